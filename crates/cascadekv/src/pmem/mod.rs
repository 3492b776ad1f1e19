//! The fast tier: a mapped pool, the persistence seam, the chunk allocator and a
//! simulated device for crash tests.

pub(crate) mod alloc;
pub(crate) mod chunk;
pub(crate) mod persist;
pub(crate) mod pool;
mod rebuild;
pub(crate) mod sim;

pub use chunk::{ChunkHeader, ChunkKind, CHUNK_HEADER_LEN};
pub(crate) use persist::{Backend, WritebackSet};
pub use pool::{AllocClass, Device, Pool, PoolGeometry};
pub(crate) use sim::SimDevice;
