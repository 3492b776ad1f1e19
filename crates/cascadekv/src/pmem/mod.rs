//! The fast tier: a mapped pool, the persistence seam, the chunk allocator and a
//! simulated device for crash tests.

pub(crate) mod alloc;
pub(crate) mod chunk;
pub(crate) mod journal;
pub(crate) mod persist;
pub(crate) mod pool;
mod rebuild;
pub(crate) mod sim;

pub use chunk::{ChunkHeader, ChunkKind, CHUNK_HEADER_LEN};
pub(crate) use persist::{Backend, WritebackSet};
pub use pool::{AllocClass, Device, Pool, PoolGeometry};
pub(crate) use sim::SimDevice;

/// A 4 MiB pool of 64 KiB chunks on a simulated device, for unit tests.
#[cfg(test)]
pub(crate) fn test_pool() -> std::sync::Arc<Pool> {
    let dev = std::sync::Arc::new(SimDevice::new(4 << 20));
    let geo = PoolGeometry {
        pool_size: 4 << 20,
        chunk_size: 64 << 10,
    };
    std::sync::Arc::new(
        Pool::open(std::path::Path::new("sim"), &Device::Sim(dev), geo, true)
            .unwrap_or_else(|e| panic!("pool: {e}")),
    )
}
