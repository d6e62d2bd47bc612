//! The one allocator: a caching pool over any device, unifying the three managers the design
//! documents describe ([`crate::design`]) (tracking and leak detection, growable named buffers, a segment/block caching
//! allocator with stream-aware reuse).
//!
//! # How it works
//! Requests are rounded up to 512 B (or the device's alignment, if larger). Requests up to
//! 1 MiB come from the *small pool*, larger ones from the *large pool*; each pool's segments
//! grow with demand: a miss reserves enough for free headroom of a share of what the pool holds
//! (half for the small pool, capped at 20 MiB segments; a quarter for the large pool, between
//! 20 MiB and `max_segment`, 256 MiB), counting the free bytes it already holds, or the request
//! itself rounded to 2 MiB when larger. So the number of device allocations grows with the
//! logarithm of the footprint, the way VMA sizes its blocks, and the newest, partly used
//! segment stays a bounded share of it. Before a miss reserves anything, the pool's idle
//! segments (fully free, and free on this stream or all) go back to the device: they could
//! not serve the request, and a growing request (a KV cache, attention scores) would otherwise
//! leave a trail of dead segments. With `max_segment` at or below `large_segment` the pool uses
//! PyTorch's fixed classes instead (2 MiB small segments; 20 MiB below 10 MiB; an exact
//! segment above; idle segments kept until memory runs out).
//!
//! With `expandable_segments` (on a device with virtual memory: host, sim, CUDA) there are no
//! separate segments: each stream and pool has one address range as large as the usable limit,
//! memory is mapped at its end (in 2 MiB granules for the small pool, 20 MiB for the large)
//! whenever a request does not fit, extending a free tail block when there is one, and the free
//! tail is unmapped when the cache is emptied or memory runs out. Freed blocks always merge with
//! their neighbours, so no segment is ever stranded at a size nothing asks for.
//!
//! Free blocks sit in a two-level segregated-fit index per stream cache: insert, remove and
//! find in O(1) with two bitmaps, a fit within one 1/32-of-a-power-of-two bin of the best. A
//! block is split when the remainder is worth keeping (≥ 512 B small, > 1 MiB large). Blocks
//! larger than `max_split_size` are never split and serve only requests within 20 MiB of their
//! size. On free a block merges at once with free neighbours in its segment.
//!
//! Every block carries a stream id. A freed block goes to its stream's cache and is reused by
//! that stream at once; other streams see it only after [`Pool::synchronize`] moves it to the
//! shared cache (the stream-local plus global caches of the segment-caching design).
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

mod allocation;
mod buffer;
mod config;
mod error;
mod fault;
mod multi;
mod named;
mod pool;
mod pressure;
mod spin;
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
pub use pool::{Allocation, AllocationInfo, BlockInfo, LimitRule, Pool, StreamId, DEFAULT_STREAM};
pub use pressure::MemoryPressure;
pub use stats::MemoryStats;
pub use tracker::{AllocationTracker, BufferId, BufferLocation, BufferMetadata};

/// The unified-pool design's common pool interface, for code written against it.
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
