//! The fast tier: a mapped pool, the persistence seam, the chunk allocator and a
//! simulated device for crash tests.

pub mod alloc;
pub mod chunk;
pub mod persist;
pub mod pool;
pub mod sim;

pub use chunk::{ChunkHeader, ChunkKind, CHUNK_HEADER_LEN};
pub use persist::{Backend, FlushSet, Mem};
pub use pool::{Device, Pool, PoolGeometry};
pub use sim::{CrashMode, SimDevice};
