//! The caching pool: segments reserved from a device, carved into blocks, cached on free.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub use super::allocation::Allocation;
use super::allocation::NamedBuffer;
use super::config::MemoryConfig;
use super::error::PoolError;
use super::pressure::{MemoryPressure, PressureBands};
use super::spin::{SpinGuard, SpinLock};
use super::stats::MemoryStats;
use super::tlsf::{FreeIndex, Links, NIL};
use super::tracker::{AllocationTracker, BufferId, BufferLocation, BufferMetadata};
use crate::device::{DeviceError, DeviceMemory, DriverReserve, SegmentHandle, VirtualMemory};

mod allocate;
mod blocks;
mod free;
mod inspect;
mod segments;
mod state;

use blocks::*;

use state::*;

/// A stream (queue) id. Blocks freed on a stream are reused by that stream at once and by others
/// only after [`Pool::synchronize`].
pub type StreamId = u32;

/// The stream used when none is given.
pub const DEFAULT_STREAM: StreamId = 0;

/// Tag of free blocks any stream may take (after a synchronise).
const GLOBAL: StreamId = u32::MAX;

/// Where a live allocation is and what it holds ([`Pool::info`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllocationInfo {
    /// Id unique across every pool of the process (the tracker's key).
    pub id: BufferId,
    /// The segment holding it.
    pub segment: SegmentHandle,
    /// Offset within the segment.
    pub offset: u64,
    /// Size of the block (the request rounded up).
    pub size: u64,
    /// Bytes the caller asked for, before rounding.
    pub requested: u64,
    /// The stream it was allocated on.
    pub stream: StreamId,
    /// Device address of its first byte, where the backend has addresses.
    pub address: Option<u64>,
}

/// Which configured limit set a pool's usable limit (the smallest wins; on a tie, the first
/// in this order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum LimitRule {
    /// `gpu_memory_fraction` × total.
    MemoryFraction,
    /// Total − `min_free_bytes`.
    MinFree,
    /// `max_pool_bytes`.
    MaxPool,
    /// Total − the driver-reserve design's driver and context reserve.
    DriverReserve {
        /// The reserve kept back.
        reserve_bytes: u64,
    },
}

/// A block as seen by diagnostics and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockInfo {
    /// The segment holding the block.
    pub segment: SegmentHandle,
    /// Size of the segment.
    pub segment_size: u64,
    /// Offset within the segment.
    pub offset: u64,
    /// Block size: the request rounded up to the pool's granularity.
    pub size: u64,
    /// Whether it is live.
    pub allocated: bool,
    /// Stream (live) or cache (free; `u32::MAX` = any stream).
    pub stream: StreamId,
}

type PressureCallback = Arc<dyn Fn(MemoryPressure, MemoryPressure) + Send + Sync>;

/// The unified caching pool over one device. `Send + Sync`: share it between threads by
/// reference or `Arc`.
pub struct Pool {
    device: Arc<dyn DeviceMemory>,
    config: MemoryConfig,
    round: u64,
    limit: u64,
    /// `limit`'s pressure thresholds, worked out once.
    bands: PressureBands,
    limit_rule: LimitRule,
    /// Segments are expandable address ranges (the config asked and the device has virtual
    /// memory).
    expandable: bool,
    /// Arena size when `initial_pool_bytes` is set (RMM-style pool), else `None`.
    arena: Option<u64>,
    /// The allocate path's rules, worked out once from the above.
    rules: Rules,
    state: SpinLock<State>,
    tracker: Option<AllocationTracker>,
    callbacks: Mutex<Vec<PressureCallback>>,
    pub(crate) named: Mutex<HashMap<String, NamedBuffer>>,
    /// Mirrors `state.pressure` so readers need not take the lock.
    pressure_level: AtomicU64,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("device", &self.device.name())
            .field("limit", &self.limit)
            .finish()
    }
}

impl Pool {
    /// A pool over `device`. The usable limit is the smallest of `gpu_memory_fraction` × total,
    /// total − `min_free_bytes`, `max_pool_bytes`, and (on a device with a driver, unless
    /// `driver_reserve` is off) total − the driver-reserve design's reserve; [`Pool::limit_rule`] says which.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "a float cast saturates; the fraction is 0-1"
    )]
    pub fn new(device: Arc<dyn DeviceMemory>, config: MemoryConfig) -> Result<Self, PoolError> {
        config
            .validate()
            .map_err(|e| PoolError::Device(DeviceError::Unsupported(e.to_string())))?;
        let (_, total) = device.mem_info()?;
        let mut limit = (total as f64 * config.gpu_memory_fraction) as u64;
        let mut limit_rule = LimitRule::MemoryFraction;
        let mut tighter = |bytes: u64, rule: LimitRule| {
            if bytes < limit {
                limit = bytes;
                limit_rule = rule;
            }
        };
        tighter(
            total.saturating_sub(config.min_free_bytes),
            LimitRule::MinFree,
        );
        if let Some(max) = config.max_pool_bytes {
            tighter(max, LimitRule::MaxPool);
        }
        if config.driver_reserve && device.has_driver() {
            let reserve = DriverReserve::default().of(total);
            tighter(
                total.saturating_sub(reserve),
                LimitRule::DriverReserve {
                    reserve_bytes: reserve,
                },
            );
        }
        // A power of two (round_bytes is validated as one), so rounding is a mask.
        let round = config
            .round_bytes
            .max(device.alignment().max(1).next_power_of_two());
        let arena = config.initial_pool_bytes.map(|bytes| {
            let cap = device.max_allocation().unwrap_or(u64::MAX).min(limit);
            round_up(bytes.min(cap).max(config.large_round), config.large_round).min(cap)
        });
        let expandable =
            config.expandable_segments && arena.is_none() && device.virtual_memory().is_some();
        let bands = PressureBands::new(limit);
        let mut pool = Pool {
            limit_rule,
            expandable,
            tracker: config.track_allocations.then(AllocationTracker::new),
            device,
            round,
            limit,
            bands,
            arena,
            rules: Rules::new(&config, round, arena.is_some()),
            state: SpinLock::new(State {
                blocks: Vec::new(),
                spare_blocks: Vec::new(),
                segments: Vec::new(),
                spare_segments: Vec::new(),
                caches: vec![
                    (GLOBAL, FreeSets::default()),
                    (DEFAULT_STREAM, FreeSets::default()),
                ],
                cache_index: [(GLOBAL, 0), (DEFAULT_STREAM, 1)].into_iter().collect(),
                live_segments: 0,
                idle: HashMap::default(),
                idle_bytes: 0,
                held: [Held::default(); 2],
                expandable: Vec::new(),
                counters: Counters::default(),
                pressure: MemoryPressure::Low,
                pressure_span: bands.span(MemoryPressure::Low),
                next_id: 0,
                id_end: 0,
            }),
            callbacks: Mutex::new(Vec::new()),
            named: Mutex::new(HashMap::new()),
            pressure_level: AtomicU64::new(0),
            config,
        };
        add_spare_blocks(pool.state.get_mut());
        if pool.config.pre_allocate {
            let sizes = pool.config.pre_allocate_sizes.clone();
            pool.warmup(&sizes)?;
        }
        Ok(pool)
    }

    /// The device under this pool.
    pub fn device(&self) -> &Arc<dyn DeviceMemory> {
        &self.device
    }

    /// The configuration the pool was built with.
    pub fn config(&self) -> &MemoryConfig {
        &self.config
    }

    /// Bytes this pool may reserve in all.
    pub fn usable_limit(&self) -> u64 {
        self.limit
    }

    /// Whether segments are expandable: one address range per stream and pool, memory mapped
    /// into it as demand grows and unmapped from its free tail when the cache is emptied
    /// (asked for with `expandable_segments`, and the device has virtual memory).
    pub fn expandable_segments(&self) -> bool {
        self.expandable
    }

    /// The rule that set [`Pool::usable_limit`].
    pub fn limit_rule(&self) -> LimitRule {
        self.limit_rule
    }

    /// The allocation tracker, when `track_allocations` is on.
    pub fn tracker(&self) -> Option<&AllocationTracker> {
        self.tracker.as_ref()
    }

    /// The request size after rounding, as the pool will account it.
    #[inline(always)]
    pub fn round_size(&self, size: u64) -> u64 {
        round_up_pow2(size.max(1), self.round)
    }

    fn lock(&self) -> SpinGuard<'_, State> {
        self.state.lock()
    }

    #[inline(always)]
    fn kind(&self, rounded: u64) -> Kind {
        if rounded <= self.rules.small_limit {
            Kind::Small
        } else {
            Kind::Large
        }
    }

    /// Whether the large pool grows (see [`MemoryConfig::max_segment`]) rather than using
    /// PyTorch's fixed classes.
    fn grows(&self) -> bool {
        self.arena.is_none()
            && !self.expandable
            && self.config.max_segment > self.config.large_segment
    }

    /// Allocates `size` bytes on the default stream.
    pub fn allocate(&self, size: u64) -> Result<Allocation, PoolError> {
        self.allocate_on(size, DEFAULT_STREAM)
    }

    /// Allocates `size` bytes on `stream`: a near-best fit from the stream's cache, then from the
    /// shared cache, then a new segment. When the device is full, every cached free segment is
    /// released and the allocation retried once before failing with [`PoolError::OutOfMemory`].
    pub fn allocate_on(&self, size: u64, stream: StreamId) -> Result<Allocation, PoolError> {
        self.allocate_tagged(size, stream, None)
    }

    /// Allocates `size` bytes on the default stream, as [`Pool::allocate`] does, for an owner
    /// with the pool to itself (`&mut`): the lock is not taken, which saves an atomic operation
    /// per call (about a tenth of an uncontended allocate). A single-threaded engine's choice.
    pub fn allocate_exclusive(&mut self, size: u64) -> Result<Allocation, PoolError> {
        let this: &Pool = self;
        // SAFETY: `&mut self` is held for the whole call, so no other thread or guard can reach
        // the state meanwhile.
        this.allocate_with(size, DEFAULT_STREAM, None, |p| unsafe {
            p.state.assume_unlocked()
        })
    }

    pub(crate) fn allocate_tagged(
        &self,
        size: u64,
        stream: StreamId,
        tag: Option<&str>,
    ) -> Result<Allocation, PoolError> {
        self.allocate_with(size, stream, tag, Pool::lock)
    }

    /// Returns an allocation to the pool; it is reused by its stream at once.
    pub fn free(&self, alloc: Allocation) -> Result<(), PoolError> {
        self.free_into(alloc, false)
    }

    /// Returns an allocation whose stream work is known to be complete (e.g. a PyTorch
    /// `free_completed` event): any stream may reuse it at once, as after [`Pool::synchronize`].
    pub fn free_synchronized(&self, alloc: Allocation) -> Result<(), PoolError> {
        self.free_into(alloc, true)
    }

    /// Gives an allocation back, as [`Pool::free`] does, without taking the lock (see
    /// [`Pool::allocate_exclusive`]).
    pub fn free_exclusive(&mut self, alloc: Allocation) -> Result<(), PoolError> {
        let this: &Pool = self;
        // SAFETY: as in `allocate_exclusive`.
        this.free_with(alloc, false, |p| unsafe { p.state.assume_unlocked() })
    }

    fn free_into(&self, alloc: Allocation, synchronized: bool) -> Result<(), PoolError> {
        self.free_with(alloc, synchronized, Pool::lock)
    }

    /// Makes blocks freed on `stream` available to every stream (the caller has synchronised
    /// the stream, so its pending work on them is done).
    pub fn synchronize(&self, stream: StreamId) {
        let mut state = self.lock();
        self.sync_locked(&mut state, stream);
    }

    /// Synchronises every stream that has a cache, as `synchronize` does for one.
    pub fn synchronize_all(&self) {
        let mut state = self.lock();
        let streams: Vec<StreamId> = state
            .caches
            .iter()
            .map(|(s, _)| *s)
            .filter(|s| *s != GLOBAL)
            .collect();
        for s in streams {
            self.sync_locked(&mut state, s);
        }
    }

    /// Releases every fully free segment to the device; returns the bytes released.
    pub fn empty_cache(&self) -> u64 {
        let mut state = self.lock();
        self.release_idle(&mut state)
    }

    /// The unified-pool design's `clear_pool`: the same as [`Pool::empty_cache`].
    pub fn clear_pool(&self) -> u64 {
        self.empty_cache()
    }

    /// The unified-pool design's `shrink`: releases cached segments, returning the bytes released.
    pub fn shrink(&self) -> u64 {
        self.empty_cache()
    }

    /// The RAII-pool design's emergency clean-up: synchronise every stream so their cached blocks can merge,
    /// then release every fully free segment. Returns the bytes released.
    pub fn emergency_cleanup(&self) -> u64 {
        self.synchronize_all();
        self.empty_cache()
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // Live allocations at this point are leaks by the caller; their segments go back to the
        // device anyway, so a dropped pool never strands device memory.
        let state = self.state.get_mut();
        for seg in state.segments.iter_mut().filter_map(Option::take) {
            let _ = self.device.release(seg.handle);
        }
    }
}
