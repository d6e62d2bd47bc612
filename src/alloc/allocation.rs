//! What a pool hands out and keeps about it: the 8-byte [`Allocation`] handle, and the record
//! of a named buffer. Apart from the pool's code so that the pool, its errors and its named
//! buffers all depend on these without depending on each other.

use std::num::NonZeroU32;

/// One live allocation from a pool: the block's index and generation, 8 bytes, as cheap to keep
/// and pass around as a raw offset. [`Pool::info`](super::Pool::info) says where it is and how large. Give it back
/// with [`Pool::free`](super::Pool::free) (or use [`super::Buffer`], which does so when dropped). A copy that
/// outlives its allocation is stale: freeing it, reading or writing through it, or asking for its
/// info is refused with [`PoolError::NotLive`](super::PoolError::NotLive), even after the block is reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Allocation {
    pub(super) block: u32,
    pub(super) generation: NonZeroU32,
}

impl std::fmt::Display for Allocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "block {} (generation {})", self.block, self.generation)
    }
}

/// A named device buffer held by the pool (see `named.rs`: `Pool::ensure_capacity`).
#[derive(Debug)]
pub struct NamedBuffer {
    pub(crate) allocation: Allocation,
    /// Usable bytes (at least what was last asked for).
    pub(crate) capacity: u64,
    /// Times it was grown.
    pub(crate) resizes: u64,
}
