//! Replaying a workload through the pool and straight against the device, measuring each
//! allocate and free. Measurement only: rendering lives in the output layer.

use std::time::Instant;

use hdrhistogram::Histogram;
use serde::Serialize;

use super::{Op, Workload};
use crate::alloc::{Allocation, LimitRule, MemoryStats, Pool, PoolError};
use crate::device::{
    Allocator, DeviceMemory, NativeAllocator, NativePeaks, Segment, SegmentHandle,
};

/// Latency percentiles in nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Latency {
    /// Median, ns.
    pub p50: u64,
    /// 90th percentile, ns.
    pub p90: u64,
    /// 99th percentile, ns.
    pub p99: u64,
    /// Slowest operation, ns.
    pub max: u64,
    /// Mean, ns.
    pub mean: f64,
    /// Operations the percentiles cover.
    pub count: u64,
}

fn histogram() -> Histogram<u64> {
    // 3 significant digits from 1 ns to an hour, sized up front so recording never allocates.
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("constant, valid histogram bounds")
}

fn summarize(h: &Histogram<u64>) -> Latency {
    if h.is_empty() {
        return Latency::default();
    }
    Latency {
        p50: h.value_at_quantile(0.50),
        p90: h.value_at_quantile(0.90),
        p99: h.value_at_quantile(0.99),
        max: h.max(),
        mean: h.mean(),
        count: h.len(),
    }
}

/// A point of the timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Sample {
    /// Index of the operation after which the sample was taken.
    pub op: u64,
    /// Bytes in live blocks.
    pub allocated: u64,
    /// Bytes reserved from the device.
    pub reserved: u64,
}

/// What replaying through the pool measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PoolRun {
    /// The pool's counters at the end (before the cache is emptied).
    pub stats: MemoryStats,
    /// Allocation latency through the pool.
    pub alloc_ns: Latency,
    /// Free latency through the pool.
    pub free_ns: Latency,
    /// Time inside allocate and free calls, summed.
    pub busy_ns: u64,
    /// Operations replayed (fewer than the workload's when interrupted).
    pub ops: u64,
    /// Allocations that failed even after the pool's retry.
    pub failed_allocs: u64,
    /// Fragmentation when reserved memory peaked.
    pub fragmentation_peak: f64,
    /// Fragmentation after the last operation... measured before the final frees' cache release.
    pub fragmentation_end: f64,
    /// Reserved bytes when the recorded part of a trace ended (else after the last operation).
    pub reserved_end: u64,
    /// Buffers whose bytes did not read back as written.
    pub corruptions: u64,
    /// Hit rate of the recorded part of a trace (after the allocations that predate it).
    pub recorded_hit_rate: Option<f64>,
    /// Allocated bytes and reserved bytes over the run.
    pub timeline: Vec<Sample>,
    /// Bytes the pool could reserve in all.
    pub usable_limit: u64,
    /// The configured rule that set `usable_limit`.
    pub limit_rule: LimitRule,
    /// Expandable segments: `None` when not asked for, else whether the device could map them.
    pub expandable: Option<bool>,
}

/// What replaying straight against the device measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RawRun {
    /// Allocation latency straight on the device.
    pub alloc_ns: Latency,
    /// Free latency straight on the device.
    pub free_ns: Latency,
    /// Time inside reserve and release calls, summed.
    pub busy_ns: u64,
    /// Operations replayed (fewer than the workload's when interrupted).
    pub ops: u64,
    /// Allocations the device refused.
    pub failed_allocs: u64,
    /// Buffers whose bytes did not read back as written.
    pub corruptions: u64,
    /// Most bytes held from the device at once (each allocation as the device sized it).
    pub peak_reserved: u64,
    /// Most requested bytes live at once.
    pub peak_live: u64,
}

/// How a replay runs, beyond the workload and device.
#[derive(Debug, Clone, Copy)]
pub struct Options<'a> {
    /// Write a signature into every buffer and check it on free (real devices only).
    pub verify: bool,
    /// Timeline points to keep (0: none).
    pub timeline_points: usize,
    /// When set (by a signal), the replay stops at the next operation, frees what is live and
    /// returns what it measured so far.
    pub interrupt: Option<&'a std::sync::atomic::AtomicBool>,
}

impl Options<'_> {
    fn interrupted(&self) -> bool {
        self.interrupt
            .is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed))
    }
}

/// Bytes written at both ends of every buffer: the allocation id and its size.
fn signature(id: u32, size: u64) -> [u8; 16] {
    let mut s = [0u8; 16];
    s[..8].copy_from_slice(&(u64::from(id) ^ 0xA5A5_5A5A_0000_0000).to_le_bytes());
    s[8..].copy_from_slice(&size.to_le_bytes());
    s
}

/// Where the signature goes: the start, and the end when the buffer is big enough.
fn spots(size: u64) -> Vec<(u64, usize)> {
    if size >= 32 {
        vec![(0, 16), (size - 16, 16)]
    } else {
        vec![(0, size.min(16) as usize)]
    }
}

/// Replays `workload` through `pool`. `progress` is called with the number of operations done.
pub fn run_pool(
    workload: &Workload,
    pool: &Pool,
    opts: Options<'_>,
    progress: &mut dyn FnMut(u64),
) -> Result<PoolRun, PoolError> {
    let mut r = PoolReplay {
        pool,
        verify: opts.verify && !pool.device().simulated(),
        completed_frees: workload.completed_frees,
        slots: vec![None; workload.allocations as usize],
        alloc_h: histogram(),
        free_h: histogram(),
        busy: 0,
        failed: 0,
        corruptions: 0,
        peak_reserved: 0,
        fragmentation_peak: 0.0,
    };
    let every = if opts.timeline_points == 0 {
        u64::MAX
    } else {
        (workload.ops.len() as u64 / opts.timeline_points as u64).max(1)
    };
    let mut timeline = Vec::new();
    let mut reserved_at_recording_end = None;
    let mut after_prefix = None;
    let mut ops_done = workload.ops.len() as u64;
    for (i, op) in workload.ops.iter().enumerate() {
        if opts.interrupted() {
            ops_done = i as u64;
            break;
        }
        if workload.recorded_ops.is_some() && i == workload.preexisting as usize {
            let s = pool.stats();
            after_prefix = Some((s.pool_hits, s.pool_misses));
        }
        if Some(i) == workload.recorded_ops {
            reserved_at_recording_end = Some(pool.stats().reserved_bytes);
        }
        match *op {
            Op::Alloc { id, size, stream } => r.alloc(id, size, stream)?,
            Op::Free { id } => r.free(id)?,
        }
        let done = i as u64 + 1;
        if done % every == 0 {
            let s = pool.stats();
            timeline.push(Sample {
                op: done,
                allocated: s.allocated_bytes,
                reserved: s.reserved_bytes,
            });
        }
        if done % 1024 == 0 {
            progress(done);
        }
    }
    progress(ops_done);
    let stats = pool.stats();
    // An interrupted replay leaves blocks live: give them back so nothing leaks.
    let interrupted = ops_done < workload.ops.len() as u64;
    for (a, _) in r.slots.iter().flatten().filter(|_| interrupted) {
        pool.free(*a)?;
    }
    Ok(PoolRun {
        usable_limit: pool.usable_limit(),
        limit_rule: pool.limit_rule(),
        expandable: pool
            .config()
            .expandable_segments
            .then(|| pool.expandable_segments()),
        stats,
        alloc_ns: summarize(&r.alloc_h),
        free_ns: summarize(&r.free_h),
        busy_ns: r.busy,
        ops: ops_done,
        failed_allocs: r.failed,
        fragmentation_peak: r.fragmentation_peak,
        fragmentation_end: stats.fragmentation(),
        reserved_end: reserved_at_recording_end.unwrap_or(stats.reserved_bytes),
        corruptions: r.corruptions,
        recorded_hit_rate: after_prefix.map(|(hits, misses)| {
            let (h, m) = (stats.pool_hits - hits, stats.pool_misses - misses);
            if h + m == 0 {
                1.0
            } else {
                h as f64 / (h + m) as f64
            }
        }),
        timeline,
    })
}

/// A pool replay's state: the live allocations by workload id, the latency histograms, and
/// the counts. Only the pool's own calls are timed.
struct PoolReplay<'a> {
    pool: &'a Pool,
    verify: bool,
    completed_frees: bool,
    slots: Vec<Option<(Allocation, u64)>>,
    alloc_h: Histogram<u64>,
    free_h: Histogram<u64>,
    busy: u64,
    failed: u64,
    corruptions: u64,
    peak_reserved: u64,
    fragmentation_peak: f64,
}

impl PoolReplay<'_> {
    #[expect(clippy::cast_possible_truncation, reason = "2^64 ns is 584 years")]
    fn alloc(
        &mut self,
        id: u32,
        size: u64,
        stream: crate::alloc::StreamId,
    ) -> Result<(), PoolError> {
        let pool = self.pool;
        let start = Instant::now();
        let result = pool.allocate_on(size, stream);
        let ns = start.elapsed().as_nanos() as u64;
        self.busy += ns;
        match result {
            Ok(a) => {
                let _ = self.alloc_h.record(ns.max(1));
                if self.verify {
                    let sig = signature(id, size);
                    for (at, len) in spots(size) {
                        pool.write(&a, at, &sig[..len])?;
                    }
                }
                self.slots[id as usize] = Some((a, size));
            }
            Err(PoolError::OutOfMemory { .. }) => self.failed += 1,
            Err(e) => return Err(e),
        }
        // The full snapshot only when the peak moves: it walks every stream's cache.
        if pool.reserved_bytes() > self.peak_reserved {
            let stats = pool.stats();
            self.peak_reserved = stats.reserved_bytes;
            self.fragmentation_peak = stats.fragmentation();
        }
        Ok(())
    }

    #[expect(clippy::cast_possible_truncation, reason = "2^64 ns is 584 years")]
    fn free(&mut self, id: u32) -> Result<(), PoolError> {
        let Some((a, size)) = self.slots[id as usize].take() else {
            return Ok(());
        };
        let pool = self.pool;
        if self.verify {
            let sig = signature(id, size);
            let mut back = [0u8; 16];
            for (at, len) in spots(size) {
                pool.read(&a, at, &mut back[..len])?;
                if back[..len] != sig[..len] {
                    self.corruptions += 1;
                }
            }
        }
        let start = Instant::now();
        let result = if self.completed_frees {
            pool.free_synchronized(a)
        } else {
            pool.free(a)
        };
        let ns = start.elapsed().as_nanos() as u64;
        self.busy += ns;
        let _ = self.free_h.record(ns.max(1));
        result
    }
}

/// Replays `workload` with every allocation going straight to the device.
pub fn run_raw(
    workload: &Workload,
    device: &dyn DeviceMemory,
    opts: Options<'_>,
    progress: &mut dyn FnMut(u64),
) -> Result<RawRun, crate::device::DeviceError> {
    replay_direct(workload, Direct::Reserve(device), opts, progress)
}

/// What replaying through the device's native allocator measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NativeRun {
    /// The allocator that ran.
    pub allocator: Allocator,
    /// The replay, its peak reserved as counted (each allocation at its requested size).
    pub run: RawRun,
    /// The allocator's own watermarks over the replay, where it reports them.
    pub peaks: Option<NativePeaks>,
}

/// Replays `workload` through the device's native allocator (CUDA's stream-ordered pool),
/// between its `begin` and `finish`; `None` where the device has none beside `reserve` (the
/// raw replay is then the native one).
pub fn run_native(
    workload: &Workload,
    device: &dyn DeviceMemory,
    opts: Options<'_>,
    progress: &mut dyn FnMut(u64),
) -> Result<Option<NativeRun>, crate::device::DeviceError> {
    let Some(native) = device.native_allocator() else {
        return Ok(None);
    };
    native.begin()?;
    let run = replay_direct(workload, Direct::Native(device, native), opts, progress);
    // Whatever the replay ended with, its frees are waited for and the cache handed back.
    let peaks = native.finish();
    let run = run?;
    Ok(Some(NativeRun {
        allocator: native.allocator(),
        run,
        peaks: peaks?,
    }))
}

/// What a direct replay allocates through: the device's `reserve` and `release`, or its native
/// allocator (whose allocations are read and written through the device).
#[derive(Clone, Copy)]
enum Direct<'a> {
    Reserve(&'a dyn DeviceMemory),
    Native(&'a dyn DeviceMemory, &'a dyn NativeAllocator),
}

impl Direct<'_> {
    fn device(&self) -> &dyn DeviceMemory {
        match *self {
            Direct::Reserve(d) | Direct::Native(d, _) => d,
        }
    }

    fn allocate(&self, bytes: u64) -> Result<Segment, crate::device::DeviceError> {
        match *self {
            Direct::Reserve(d) => d.reserve(bytes),
            Direct::Native(_, n) => n.allocate(bytes),
        }
    }

    fn free(&self, segment: SegmentHandle) -> Result<(), crate::device::DeviceError> {
        match *self {
            Direct::Reserve(d) => d.release(segment),
            Direct::Native(_, n) => n.free(segment),
        }
    }
}

/// Replays `workload` with every allocation going to `through`, one per request.
#[expect(clippy::cast_possible_truncation, reason = "2^64 ns is 584 years")]
fn replay_direct(
    workload: &Workload,
    through: Direct<'_>,
    opts: Options<'_>,
    progress: &mut dyn FnMut(u64),
) -> Result<RawRun, crate::device::DeviceError> {
    let device = through.device();
    let verify = opts.verify && !device.simulated();
    let mut slots: Vec<Option<(Segment, u64)>> = vec![None; workload.allocations as usize];
    let (mut alloc_h, mut free_h) = (histogram(), histogram());
    let (mut busy, mut failed, mut corruptions) = (0u64, 0u64, 0u64);
    // Bytes held and requested now, and their peaks.
    let (mut held, mut live, mut peak_reserved, mut peak_live) = (0u64, 0u64, 0u64, 0u64);
    let mut ops_done = workload.ops.len() as u64;
    for (i, op) in workload.ops.iter().enumerate() {
        if opts.interrupted() {
            ops_done = i as u64;
            break;
        }
        match *op {
            Op::Alloc { id, size, .. } => {
                let start = Instant::now();
                let result = through.allocate(size);
                let ns = start.elapsed().as_nanos() as u64;
                busy += ns;
                match result {
                    Ok(seg) => {
                        let _ = alloc_h.record(ns.max(1));
                        if verify {
                            let sig = signature(id, size);
                            for (at, len) in spots(size) {
                                device.write(seg.handle, at, &sig[..len])?;
                            }
                        }
                        held += seg.size;
                        live += size;
                        peak_reserved = peak_reserved.max(held);
                        peak_live = peak_live.max(live);
                        slots[id as usize] = Some((seg, size));
                    }
                    Err(crate::device::DeviceError::OutOfMemory { .. }) => failed += 1,
                    Err(e) => return Err(e),
                }
            }
            Op::Free { id } => {
                if let Some((seg, size)) = slots[id as usize].take() {
                    held -= seg.size;
                    live -= size;
                    if verify {
                        let sig = signature(id, size);
                        let mut back = [0u8; 16];
                        for (at, len) in spots(size) {
                            device.read(seg.handle, at, &mut back[..len])?;
                            if back[..len] != sig[..len] {
                                corruptions += 1;
                            }
                        }
                    }
                    let start = Instant::now();
                    let result = through.free(seg.handle);
                    let ns = start.elapsed().as_nanos() as u64;
                    busy += ns;
                    let _ = free_h.record(ns.max(1));
                    result?;
                }
            }
        }
        if (i + 1) % 1024 == 0 {
            progress(i as u64 + 1);
        }
    }
    progress(ops_done);
    for (seg, _) in slots.into_iter().flatten() {
        through.free(seg.handle)?;
    }
    Ok(RawRun {
        alloc_ns: summarize(&alloc_h),
        free_ns: summarize(&free_h),
        busy_ns: busy,
        ops: ops_done,
        failed_allocs: failed,
        corruptions,
        peak_reserved,
        peak_live,
    })
}

/// How much of a device a benchmark pool may use, as RMM's benchmark sizes it: an arena of half
/// the free memory (at most one device allocation), live bytes kept under 80 % of it (at most
/// 16 GiB), leaving room for rounding and fragmentation inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arena {
    /// Bytes the pool may reserve.
    pub bytes: u64,
    /// Most bytes a synthetic workload keeps live.
    pub max_live: u64,
}

impl Arena {
    /// The arena on a device with `free` bytes free and allocations of at most `max_allocation`.
    pub fn on_device(free: u64, max_allocation: Option<u64>) -> Self {
        let bytes = max_allocation.unwrap_or(u64::MAX).min(free / 2);
        Arena {
            bytes,
            max_live: (bytes / 5 * 4).min(16 << 30),
        }
    }

    /// For `workload`: a trace recorded with expandable segments grows to what the program
    /// needed, so its arena is the trace's peak (in whole 20 MiB steps) where that is smaller.
    pub fn for_workload(self, workload: &super::Workload) -> u64 {
        match workload.reference {
            Some(r) if r.expandable_segments => self
                .bytes
                .min(workload.peak_live_bytes().div_ceil(20 << 20) * (20 << 20)),
            _ => self.bytes,
        }
    }
}
