//! Handler tests for the stream commands (in-process, exact replies).

use crate::cmd::testkit::Kit;
