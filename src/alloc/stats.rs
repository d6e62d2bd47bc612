//! Pool statistics (the unified-pool design's `MemoryStats`, extended with PyTorch-style counters).

use serde::Serialize;

/// A snapshot of one pool's counters. Definitions are in the `alloc` module docs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct MemoryStats {
    /// Bytes handed out over the pool's life (rounded sizes, cumulative).
    pub total_allocated_bytes: u64,
    /// Bytes in live blocks now (rounded sizes); same as `allocated_bytes`.
    pub in_use_bytes: u64,
    /// Bytes reserved from the device but not in live blocks (the cache).
    pub pooled_bytes: u64,
    /// Highest `allocated_bytes` seen.
    pub peak_bytes: u64,
    /// Requests served from cached memory, without a device allocation.
    pub pool_hits: u64,
    /// Requests that needed a device allocation.
    pub pool_misses: u64,
    /// Requests served from CPU memory because the device was full.
    pub cpu_fallbacks: u64,
    /// Live buffers on the device (CPU fallbacks not counted).
    pub active_buffers: u64,
    /// Bytes in live blocks (rounded sizes).
    pub allocated_bytes: u64,
    /// Highest `allocated_bytes`.
    pub peak_allocated_bytes: u64,
    /// Bytes reserved from the device (sum of segment sizes).
    pub reserved_bytes: u64,
    /// Highest `reserved_bytes`.
    pub peak_reserved_bytes: u64,
    /// Bytes callers asked for in live blocks (before rounding).
    pub requested_bytes: u64,
    /// Highest `requested_bytes`.
    pub peak_requested_bytes: u64,
    /// Free bytes inside segments that also hold live blocks (cannot be released).
    pub inactive_split_bytes: u64,
    /// Highest `inactive_split_bytes`.
    pub peak_inactive_split_bytes: u64,
    /// Segments reserved from the device.
    pub device_allocs: u64,
    /// Segments released to the device.
    pub device_frees: u64,
    /// Out-of-memory retries (cache released, allocation tried again).
    pub retries: u64,
    /// Requests that failed on the device even after the retry.
    pub ooms: u64,
    /// Largest free block in the cache.
    pub largest_free_block: u64,
    /// Segments reserved from the device now.
    pub segments: u64,
}

impl MemoryStats {
    /// Requests served without a device allocation / all requests (1.0 with no requests).
    pub fn hit_rate(&self) -> f64 {
        let total = self.pool_hits + self.pool_misses;
        if total == 0 {
            1.0
        } else {
            self.pool_hits as f64 / total as f64
        }
    }

    /// 1 − largest free block / total free bytes; 0 when nothing is free.
    pub fn fragmentation(&self) -> f64 {
        if self.pooled_bytes == 0 {
            0.0
        } else {
            1.0 - self.largest_free_block as f64 / self.pooled_bytes as f64
        }
    }

    /// Peak allocated / peak reserved (1.0 before anything was reserved).
    pub fn efficiency(&self) -> f64 {
        if self.peak_reserved_bytes == 0 {
            1.0
        } else {
            self.peak_allocated_bytes as f64 / self.peak_reserved_bytes as f64
        }
    }
}

impl std::fmt::Display for MemoryStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::units::format_bytes as b;
        write!(
            f,
            "allocated {} (peak {}), reserved {} (peak {}), {} live buffers, hit rate {:.1} %, \
             fragmentation {:.1} %, {} device allocs, {} frees, {} retries, {} OOMs, {} CPU fallbacks",
            b(self.allocated_bytes),
            b(self.peak_allocated_bytes),
            b(self.reserved_bytes),
            b(self.peak_reserved_bytes),
            self.active_buffers,
            self.hit_rate() * 100.0,
            self.fragmentation() * 100.0,
            self.device_allocs,
            self.device_frees,
            self.retries,
            self.ooms,
            self.cpu_fallbacks
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_ratios() {
        let s = MemoryStats {
            pool_hits: 3,
            pool_misses: 1,
            pooled_bytes: 100,
            largest_free_block: 25,
            ..Default::default()
        };
        assert_eq!(s.hit_rate(), 0.75);
        assert_eq!(s.fragmentation(), 0.75);
        assert_eq!(MemoryStats::default().fragmentation(), 0.0);
        assert_eq!(MemoryStats::default().hit_rate(), 1.0);
        let text = s.to_string();
        assert!(text.contains("hit rate 75.0 %"), "{text}");
    }
}
