//! `bench-alloc --compare native`: the pool beside the device's own allocator on the same
//! workload, with each figure's ratio. The native side is the driver's own caching allocator
//! where the device has one (CUDA's stream-ordered pool), else the raw replay: one device
//! allocation per request, freed on release.

use serde::Serialize;

use super::bench::{NativeRun, PoolRun, RawRun};
use crate::device::{Allocator, NativePeaks};

/// What `bench-alloc` compares the pool with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Comparison {
    /// The backend's raw allocation API, one device allocation per request.
    Native,
}

/// One side's figures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Side {
    /// Operations (allocate and free) per second of time inside them.
    pub ops_per_sec: f64,
    /// Median allocate latency.
    pub alloc_p50_ns: u64,
    /// 99th-percentile allocate latency.
    pub alloc_p99_ns: u64,
    /// Most bytes held from the device at once.
    pub peak_reserved_bytes: u64,
    /// Most bytes the workload asked for that were live at once.
    pub peak_live_bytes: u64,
    /// `peak_reserved_bytes` ÷ `peak_live_bytes` (0 when nothing was live).
    pub reserved_per_live: f64,
}

/// Pool ÷ native, figure by figure (0 where the native figure is 0).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Ratios {
    /// Pool ops/s ÷ native ops/s (above 1: the pool is faster).
    pub ops_per_sec: f64,
    /// Pool p50 ÷ native p50 (below 1: the pool is faster).
    pub alloc_p50: f64,
    /// Pool p99 ÷ native p99.
    pub alloc_p99: f64,
    /// Pool peak reserved ÷ native peak reserved.
    pub peak_reserved: f64,
    /// Pool reserved/live ÷ native reserved/live.
    pub reserved_per_live: f64,
}

/// The pool and the native allocator side by side.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct NativeComparison {
    /// Which allocator the native side ran.
    pub allocator: Allocator,
    /// The native allocator's own watermarks (CUDA's `CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH` and
    /// `USED_MEM_HIGH`), where it reports them: then the native peak reserved is its
    /// `reserved`; else (`None`) the replay counted each allocation at its size.
    pub driver_peaks: Option<NativePeaks>,
    /// The device's own allocator, once per request.
    pub native: Side,
    /// The pool.
    pub pool: Side,
    /// Pool ÷ native.
    pub ratios: Ratios,
}

fn per_sec(ops: u64, busy_ns: u64) -> f64 {
    if busy_ns == 0 {
        0.0
    } else {
        ops as f64 * 1e9 / busy_ns as f64
    }
}

fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        0.0
    } else {
        a / b
    }
}

impl Side {
    fn new(ops: u64, busy_ns: u64, (p50, p99): (u64, u64), reserved: u64, live: u64) -> Self {
        Side {
            ops_per_sec: per_sec(ops, busy_ns),
            alloc_p50_ns: p50,
            alloc_p99_ns: p99,
            peak_reserved_bytes: reserved,
            peak_live_bytes: live,
            reserved_per_live: ratio(reserved as f64, live as f64),
        }
    }
}

impl NativeComparison {
    /// From one replay through the pool and the same replay through the device's native
    /// allocator (`native`), or where it has none through its `reserve` (`raw`, run by
    /// `allocator`).
    pub fn new(
        pool: &PoolRun,
        native: Option<&NativeRun>,
        raw: &RawRun,
        allocator: Allocator,
    ) -> Self {
        match native {
            Some(n) => Self::of(pool, &n.run, n.allocator, n.peaks),
            None => Self::of(pool, raw, allocator, None),
        }
    }

    fn of(
        pool: &PoolRun,
        native: &RawRun,
        allocator: Allocator,
        driver_peaks: Option<NativePeaks>,
    ) -> Self {
        let s = &pool.stats;
        let pool = Side::new(
            pool.ops,
            pool.busy_ns,
            (pool.alloc_ns.p50, pool.alloc_ns.p99),
            s.peak_reserved_bytes,
            s.peak_requested_bytes,
        );
        let native = Side::new(
            native.ops,
            native.busy_ns,
            (native.alloc_ns.p50, native.alloc_ns.p99),
            driver_peaks.map_or(native.peak_reserved, |p| p.reserved),
            native.peak_live,
        );
        let r = |a: u64, b: u64| ratio(a as f64, b as f64);
        NativeComparison {
            allocator,
            driver_peaks,
            ratios: Ratios {
                ops_per_sec: ratio(pool.ops_per_sec, native.ops_per_sec),
                alloc_p50: r(pool.alloc_p50_ns, native.alloc_p50_ns),
                alloc_p99: r(pool.alloc_p99_ns, native.alloc_p99_ns),
                peak_reserved: r(pool.peak_reserved_bytes, native.peak_reserved_bytes),
                reserved_per_live: ratio(pool.reserved_per_live, native.reserved_per_live),
            },
            native,
            pool,
        }
    }
}
