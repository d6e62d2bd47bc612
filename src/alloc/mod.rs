//! The one allocator: a caching pool over any device, unifying the three managers the seeds
//! describe (tracking and leak detection, growable named buffers, a segment/block caching
//! allocator with stream-aware reuse).
//!
//! # How it works
//! Requests are rounded up to 512 B (or the device's alignment, if larger). Requests up to
//! 1 MiB come from the *small pool*, carved from 2 MiB segments; larger ones from the *large
//! pool*: below 10 MiB from 20 MiB segments, above that from a segment of their own rounded up
//! to 2 MiB. A free block is found by best fit in an ordered set keyed by (size, block) — O(log n),
//! no scans — and split when the remainder is worth keeping (≥ 512 B small, > 1 MiB large).
//! Blocks larger than `max_split_size` are never split and serve only requests within 20 MiB of
//! their size. On free a block merges at once with free neighbours in its segment.
//!
//! Every block carries a stream id. A freed block goes to its stream's cache and is reused by
//! that stream at once; other streams see it only after [`Pool::synchronize`] moves it to the
//! shared cache (the stream-local plus global caches of seed 003).
//!
//! When a request misses and a new segment does not fit (the device refuses, or the pool's
//! usable limit would be passed), the pool releases every fully free cached segment and tries
//! once more. If that fails too the request fails with [`PoolError::OutOfMemory`], whose
//! message names what was requested, the device's total and free memory, and what the pool has
//! allocated and reserved-but-unallocated; [`Pool::buffer`] then serves it from CPU memory if
//! `cpu_fallback_enabled`.
//!
//! # Statistics ([`MemoryStats`])
//! - *allocated*: bytes in live blocks (rounded sizes); *requested*: bytes callers asked for.
//! - *reserved*: bytes in segments held from the device.
//! - *inactive split*: free bytes in segments that also hold live blocks (cannot be released).
//! - *hit rate*: requests served without a device allocation ÷ all requests.
//! - *fragmentation*: 1 − largest free block ÷ total free bytes in the cache (0 when nothing is
//!   free). 0 means the cache could serve its whole free size as one request.
//! - *efficiency*: peak allocated ÷ peak reserved.
//! - *pressure* ([`MemoryPressure`]): allocated ÷ usable limit; Low < 60 %, Medium < 80 %,
//!   High ≤ 95 %, Critical above. The usable limit is the smallest of
//!   `gpu_memory_fraction` × device total, total − `min_free_bytes`, and `max_pool_bytes`.

mod buffer;
mod config;
mod error;
mod fault;
mod multi;
mod named;
mod pool;
mod pressure;
mod stats;
mod tlsf;
mod tracker;
pub mod transfer;

pub use buffer::{BatchBuffers, Buffer};
pub use config::{ConfigError, MemoryConfig, Preset};
pub use error::PoolError;
pub use fault::FaultInjector;
pub use multi::MultiDevicePool;
pub use named::NamedInfo;
pub use pool::{Allocation, BlockInfo, Pool, StreamId, DEFAULT_STREAM};
pub use pressure::MemoryPressure;
pub use stats::MemoryStats;
pub use tracker::{AllocationTracker, BufferId, BufferLocation, BufferMetadata};

/// Seed 000's common pool interface, for code written against it.
pub trait GpuMemoryPool: Send + Sync {
    /// The device's name as its backend gives it.
    fn backend_name(&self) -> String;
    /// The pool's counters now.
    fn stats(&self) -> MemoryStats;
    /// Device memory in bytes.
    fn total_memory(&self) -> u64;
    /// Device free bytes as the device reports them.
    fn free_memory(&self) -> u64;
    /// Pressure from allocated bytes over the usable limit.
    fn pressure(&self) -> MemoryPressure;
    /// Releases every cached free segment.
    fn clear_pool(&self);
    /// Releases cached segments; returns the bytes released.
    fn shrink(&self) -> u64;
}

impl GpuMemoryPool for Pool {
    fn backend_name(&self) -> String {
        self.device().name()
    }

    fn stats(&self) -> MemoryStats {
        Pool::stats(self)
    }

    fn total_memory(&self) -> u64 {
        self.device()
            .mem_info()
            .map(|(_, total)| total)
            .unwrap_or(0)
    }

    fn free_memory(&self) -> u64 {
        self.device().mem_info().map(|(free, _)| free).unwrap_or(0)
    }

    fn pressure(&self) -> MemoryPressure {
        Pool::pressure(self)
    }

    fn clear_pool(&self) {
        Pool::clear_pool(self);
    }

    fn shrink(&self) -> u64 {
        Pool::shrink(self)
    }
}
