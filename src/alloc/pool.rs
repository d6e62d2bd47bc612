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

/// A stream (queue) id. Blocks freed on a stream are reused by that stream at once and by others
/// only after [`Pool::synchronize`].
pub type StreamId = u32;

/// The stream used when none is given.
pub const DEFAULT_STREAM: StreamId = 0;

/// Tag of free blocks any stream may take (after a synchronise).
const GLOBAL: StreamId = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Small = 0,
    Large = 1,
}

#[derive(Debug, Clone)]
struct Block {
    segment: u32,
    offset: u64,
    size: u64,
    /// The bytes the live allocation asked for (meaningless while free).
    requested: u64,
    prev: u32,
    next: u32,
    allocated: bool,
    /// For a live block: the stream using it. For a free block: the cache it sits in
    /// (a stream id, or GLOBAL).
    stream: StreamId,
    /// Bumped on every allocation of the block; a handle holds the one it was made with.
    generation: u32,
    /// The live allocation's id ([`BufferId::UNASSIGNED`] until a tracker or [`Pool::info`]
    /// needs one; meaningless while free).
    id: u64,
    /// Neighbours in its cache's free list, while free.
    free_prev: u32,
    free_next: u32,
}

impl Block {
    /// A free block of `size` bytes at `offset` in segment `segment`, after `prev` and last in
    /// it, tagged with cache `stream`, in no free set yet.
    fn free(segment: u32, offset: u64, size: u64, prev: u32, stream: StreamId) -> Self {
        Block {
            segment,
            offset,
            size,
            requested: 0,
            prev,
            next: NIL,
            allocated: false,
            stream,
            generation: 0,
            id: BufferId::UNASSIGNED.0,
            free_prev: NIL,
            free_next: NIL,
        }
    }
}

impl Links for [Block] {
    #[inline(always)]
    fn size(&self, i: u32) -> u64 {
        self[i as usize].size
    }

    #[inline(always)]
    fn links(&self, i: u32) -> (u32, u32) {
        let b = &self[i as usize];
        (b.free_prev, b.free_next)
    }

    #[inline(always)]
    fn set_prev(&mut self, i: u32, prev: u32) {
        self[i as usize].free_prev = prev;
    }

    #[inline(always)]
    fn set_next(&mut self, i: u32, next: u32) {
        self[i as usize].free_next = next;
    }
}

#[derive(Debug)]
struct SegmentRec {
    handle: SegmentHandle,
    address: Option<u64>,
    size: u64,
    kind: Kind,
    /// Live (allocated) blocks in this segment; the segment is idle when this is zero.
    live: u32,
    head: u32,
    /// For an expandable segment, the address range it may grow into (`size` is what is
    /// mapped); 0 for an ordinary segment.
    range: u64,
}

/// Free blocks of one cache, by pool (indexed by [`Kind`]), in O(1) segregated-fit indexes.
#[derive(Debug, Default)]
struct FreeSets([FreeIndex; 2]);

impl FreeSets {
    #[inline(always)]
    fn of(&mut self, kind: Kind) -> &mut FreeIndex {
        &mut self.0[kind as usize]
    }

    fn largest(&self, blocks: &(impl Links + ?Sized)) -> u64 {
        self.0[0].largest(blocks).max(self.0[1].largest(blocks))
    }
}

/// Bytes one pool (small or large) reserves and hands out.
#[derive(Debug, Default, Clone, Copy)]
struct Held {
    reserved: u64,
    allocated: u64,
}

#[derive(Debug, Default)]
struct Counters {
    total_allocated: u64,
    allocated: u64,
    peak_allocated: u64,
    requested: u64,
    peak_requested: u64,
    reserved: u64,
    peak_reserved: u64,
    peak_inactive_split: u64,
    active: u64,
    hits: u64,
    misses: u64,
    device_allocs: u64,
    device_frees: u64,
    retries: u64,
    ooms: u64,
    cpu_fallbacks: u64,
}

#[derive(Debug)]
struct State {
    blocks: Vec<Block>,
    spare_blocks: Vec<u32>,
    segments: Vec<Option<SegmentRec>>,
    spare_segments: Vec<u32>,
    /// Free sets per cache, in creation order (GLOBAL first).
    caches: Vec<(StreamId, FreeSets)>,
    /// Where each stream's entry is in `caches`: a trace may name hundreds of thousands of
    /// streams, and a linear search per request would make its replay quadratic.
    cache_index: HashMap<StreamId, usize, BuildHasherDefault<IdHasher>>,
    /// Segments reserved now (`segments` also holds empty slots for reuse).
    live_segments: u64,
    /// Idle (fully free) segments per segment size, for `max_pooled_per_bucket`.
    idle: HashMap<u64, usize, BuildHasherDefault<SizeHasher>>,
    /// Bytes in idle segments (releasable at once).
    idle_bytes: u64,
    /// Reserved and allocated bytes of each pool (small, large): the growth policy sizes new
    /// segments from them.
    held: [Held; 2],
    /// The expandable segment of each (stream, pool), by index into `segments`.
    expandable: Vec<(StreamId, Kind, u32)>,
    counters: Counters,
    pressure: MemoryPressure,
    /// The allocated byte counts that keep `pressure` (`bands.span`).
    pressure_span: (u64, u64),
    /// Ids `next_id..id_end` are this pool's to hand out (see [`BufferId::reserve`]).
    next_id: u64,
    id_end: u64,
}

/// Blocks a new pool has room for before its block table first grows (64 bytes each): a model's
/// working set is hundreds to thousands of blocks, and each growth copies the table.
const INITIAL_BLOCKS: u32 = 1024;

/// Ids a pool takes from the process-wide counter at a time.
const ID_BATCH: u64 = 4096;

/// A growing pool aims at free headroom of 1/`GROWTH_DIV` of what it holds. Measured on the
/// peer sequences (benches/peers): a half cost 1.27x reserved/live on the PyTorch trace; a
/// fifth or less, more than 1 % of its allocations going to the device (so its p99 became a
/// device allocation); a quarter, 1.18x with 23 device allocations.
const GROWTH_DIV: u64 = 4;

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
    /// Total − seed 001's driver and context reserve.
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

/// Which pool a request goes to and when its block is split, from the configuration.
#[derive(Debug, Clone, Copy)]
struct Rules {
    /// Rounded requests up to this size are small (0 in an arena, where everything is large).
    small_limit: u64,
    /// Per [`Kind`]: a block is split when the remainder is at least `.0` bytes and the block at
    /// most `.1` bytes (PyTorch: any remainder of a small block; of a large block, more than
    /// `small_size`, and never an oversize block).
    split: [(u64, u64); 2],
}

impl Rules {
    fn new(config: &MemoryConfig, round: u64, arena: bool) -> Self {
        let max_split = config.max_split_size;
        if arena {
            Rules {
                small_limit: 0,
                split: [(round, max_split); 2],
            }
        } else {
            Rules {
                small_limit: config.small_size,
                split: [
                    (round, u64::MAX),
                    (config.small_size.saturating_add(1), max_split),
                ],
            }
        }
    }
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

#[inline(always)]
fn round_up(value: u64, to: u64) -> u64 {
    if to.is_power_of_two() {
        return round_up_pow2(value, to);
    }
    value.div_ceil(to).saturating_mul(to)
}

/// `value` rounded up to `to`, a power of two: a mask instead of a division (saturating).
#[inline(always)]
fn round_up_pow2(value: u64, to: u64) -> u64 {
    value
        .checked_add(to - 1)
        .map_or(u64::MAX, |v| v & !(to - 1))
}

impl Pool {
    /// A pool over `device`. The usable limit is the smallest of `gpu_memory_fraction` × total,
    /// total − `min_free_bytes`, `max_pool_bytes`, and (on a device with a driver, unless
    /// `driver_reserve` is off) total − seed 001's reserve; [`Pool::limit_rule`] says which.
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

    /// Segment sizes to try for a miss, preferred first; `held` is what the request's pool
    /// holds now.
    fn segment_sizes(&self, rounded: u64, kind: Kind, held: Held, total: u64) -> [Option<u64>; 2] {
        if let Some(arena) = self.arena {
            // Grow by a whole arena when the request fits one; else by the request itself.
            let exact = round_up(rounded, self.config.large_round);
            return [Some(arena.max(exact)), (exact < arena).then_some(exact)];
        }
        match kind {
            _ if self.grows() => {
                // The small pool's share is of everything reserved: small requests alongside a
                // large footprint get 20 MiB segments soon rather than a long run of 2 MiB ones.
                let (unit, floor, cap, share) = match kind {
                    Kind::Small => (
                        self.config.small_segment,
                        self.config.small_segment,
                        self.config.large_segment,
                        total / GROWTH_DIV,
                    ),
                    Kind::Large => (
                        self.config.large_round,
                        self.config.large_segment,
                        self.config.max_segment,
                        held.reserved / GROWTH_DIV,
                    ),
                };
                // Headroom in proportion to what the pool holds: the reserve grows
                // geometrically (few device allocations, as VMA sizes its blocks) while the
                // newest, partly used segment stays a bounded share of it. Free bytes already
                // held count toward the headroom, so a miss from fragmentation grows by less.
                // A segment above `max_split_size` could not be split for this request.
                let cap = if rounded < self.config.max_split_size {
                    cap.min(self.config.max_split_size).max(floor)
                } else {
                    cap
                };
                let exact = round_up(rounded, unit);
                let headroom = share.clamp(floor, cap);
                let free = held.reserved - held.allocated;
                let grown = round_up(headroom.saturating_sub(free).max(floor), unit);
                if exact >= grown {
                    [Some(exact), None]
                } else {
                    [Some(grown), Some(exact)]
                }
            }
            Kind::Small => [Some(self.config.small_segment), None],
            Kind::Large if rounded < self.config.medium_size => {
                // Near the limit a full 20 MiB segment may not fit where an exact one would.
                let exact = round_up(rounded, self.config.large_round);
                [
                    Some(self.config.large_segment),
                    (exact < self.config.large_segment).then_some(exact),
                ]
            }
            Kind::Large => [Some(round_up(rounded, self.config.large_round)), None],
        }
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

    /// The allocation path, with the state reached through `access` (the lock, or an exclusive
    /// borrow).
    fn allocate_with<'a, G: std::ops::DerefMut<Target = State>>(
        &'a self,
        size: u64,
        stream: StreamId,
        tag: Option<&str>,
        access: impl FnOnce(&'a Pool) -> G,
    ) -> Result<Allocation, PoolError> {
        if size == 0 {
            return Err(PoolError::ZeroSize);
        }
        let stream = if stream == GLOBAL { GLOBAL - 1 } else { stream };
        let rounded = self.round_size(size);
        let kind = self.kind(rounded);
        let mut state = access(self);
        let (alloc, id) = match self.find_free(&mut state, stream, rounded, kind) {
            Some((idx, from)) => {
                state.counters.hits += 1;
                self.take_block(&mut state, idx, from, kind, rounded, size, stream)
            }
            None => match self.allocate_miss(&mut state, rounded, kind, size, stream) {
                Ok(made) => made,
                Err(e) => {
                    let snapshot = (state.counters.allocated, state.counters.reserved);
                    drop(state);
                    return Err(self.oom_error(size, snapshot, e));
                }
            },
        };
        // Allocated bytes only grew, so only the band's top can have been crossed.
        let transition = if state.counters.allocated > state.pressure_span.1 {
            self.update_pressure(&mut state)
        } else {
            None
        };
        drop(state);
        if self.tracker.is_some() || transition.is_some() {
            self.after_allocate(id, size, tag, transition);
        }
        Ok(alloc)
    }

    /// A miss: a new segment (or an expandable one grown) and its block taken.
    #[cold]
    #[inline(never)]
    fn allocate_miss(
        &self,
        state: &mut State,
        rounded: u64,
        kind: Kind,
        size: u64,
        stream: StreamId,
    ) -> Result<(Allocation, BufferId), DeviceError> {
        state.counters.misses += 1;
        match self.grow(state, rounded, kind, stream) {
            Ok((idx, tag)) => {
                let from = cache_slot(state, tag);
                let made = self.take_block(state, idx, from, kind, rounded, size, stream);
                // An expandable segment grows without waking; its new tail is split free memory.
                state.note_inactive_split();
                Ok(made)
            }
            Err(e) => {
                state.counters.ooms += 1;
                Err(e)
            }
        }
    }

    /// What follows an allocation outside the lock: tracking it, and pressure callbacks.
    #[cold]
    #[inline(never)]
    fn after_allocate(
        &self,
        id: BufferId,
        size: u64,
        tag: Option<&str>,
        transition: Option<(MemoryPressure, MemoryPressure)>,
    ) {
        if let Some(tracker) = &self.tracker {
            let mut meta = BufferMetadata::new(id, size, size, BufferLocation::Gpu);
            meta.tag = tag.map(str::to_string);
            tracker.track(meta);
        }
        if let Some((old, new)) = transition {
            self.fire(old, new);
        }
    }

    #[cold]
    #[inline(never)]
    fn oom_error(
        &self,
        requested: u64,
        (allocated, reserved): (u64, u64),
        cause: DeviceError,
    ) -> PoolError {
        match cause {
            DeviceError::OutOfMemory { .. } => {
                let (free, total) = self.device.mem_info().unwrap_or((0, 0));
                PoolError::OutOfMemory {
                    device: self.device.name(),
                    requested,
                    total,
                    free,
                    allocated,
                    reserved_unallocated: reserved - allocated,
                    limit: self.limit,
                }
            }
            other => PoolError::Device(other),
        }
    }

    /// Best fit for `rounded` in the stream's cache, then in the shared one, taken out of its
    /// free set. Returns the block and the position of the cache it came from.
    #[inline(always)]
    fn find_free(
        &self,
        state: &mut State,
        stream: StreamId,
        rounded: u64,
        kind: Kind,
    ) -> Option<(u32, usize)> {
        // Oversize blocks serve only oversize requests, and only without much waste.
        let max_split = self.config.max_split_size;
        let largest = if rounded < max_split {
            max_split - 1
        } else {
            rounded.saturating_add(self.config.large_segment) - 1
        };
        // The stream's own cache, then the shared one (at 0; `stream` is never GLOBAL).
        if let Some(own) = state.cache_pos(stream) {
            let set = state.caches[own].1.of(kind);
            if let Some(idx) = set.take(state.blocks.as_mut_slice(), rounded, largest) {
                return Some((idx, own));
            }
        }
        let shared = state.caches[0].1.of(kind);
        shared
            .take(state.blocks.as_mut_slice(), rounded, largest)
            .map(|idx| (idx, 0))
    }

    /// Reserves a new segment for a miss (releasing the cache and retrying once when the device
    /// is full) and returns its single free block, not yet in any free set.
    #[cold]
    #[inline(never)]
    fn grow(
        &self,
        state: &mut State,
        rounded: u64,
        kind: Kind,
        stream: StreamId,
    ) -> Result<(u32, StreamId), DeviceError> {
        if self.expandable {
            let mut grown = self.extend(state, rounded, kind, stream);
            if matches!(grown, Err(DeviceError::OutOfMemory { .. })) {
                state.counters.retries += 1;
                self.release_idle(state);
                grown = self.extend(state, rounded, kind, stream);
            }
            return grown;
        }
        if self.grows() {
            // Idle segments could not serve this request (or it would have been a hit): give
            // them back before taking more. Only those whose blocks this stream may use: another
            // stream's freed blocks may still be in use by its queued work.
            self.release_idle_of(state, Some((kind, stream)));
        }
        let sizes = self.segment_sizes(
            rounded,
            kind,
            state.held[kind as usize],
            state.counters.reserved,
        );
        let mut last = DeviceError::OutOfMemory { requested: rounded };
        for attempt in 0..2 {
            if attempt == 1 {
                state.counters.retries += 1;
                self.release_idle(state);
            }
            for seg_size in sizes.into_iter().flatten() {
                // A device smaller than the preferred segment (or nearly full) still serves what
                // fits in the room left: the segment shrinks to that room, never below the request.
                let room = self.limit.saturating_sub(state.counters.reserved);
                let room_rounded = room / self.round * self.round;
                let seg_size = if seg_size <= room {
                    seg_size
                } else if room_rounded >= rounded {
                    room_rounded
                } else {
                    last = DeviceError::OutOfMemory {
                        requested: seg_size,
                    };
                    continue;
                };
                match self.device.reserve(seg_size) {
                    Ok(seg) => {
                        log::debug!(
                            "reserved a segment of {seg_size} bytes on {}",
                            self.device.name()
                        );
                        return Ok((
                            self.add_segment(
                                state,
                                seg.handle,
                                seg.address,
                                seg.size,
                                kind,
                                stream,
                            ),
                            stream,
                        ));
                    }
                    Err(e @ DeviceError::OutOfMemory { .. }) => last = e,
                    Err(other) => return Err(other),
                }
            }
        }
        Err(last)
    }

    /// The mapping granule of an expandable segment of `kind`: the pool's segment size for that
    /// kind, in whole device granules.
    fn granule(&self, vmm: &dyn VirtualMemory, kind: Kind) -> u64 {
        let size = match kind {
            Kind::Small => self.config.small_segment,
            Kind::Large => self.config.large_segment,
        };
        round_up(size, vmm.granularity().max(1))
    }

    /// Maps more memory at the end of the (stream, kind) expandable segment, making the segment
    /// first if needed, and returns a free block of at least `rounded` bytes there (not in any
    /// free set): the free tail block extended, or a new one.
    fn extend(
        &self,
        state: &mut State,
        rounded: u64,
        kind: Kind,
        stream: StreamId,
    ) -> Result<(u32, StreamId), DeviceError> {
        let vmm = self
            .device
            .virtual_memory()
            .ok_or_else(|| DeviceError::Unsupported("no virtual memory".into()))?;
        let granule = self.granule(vmm, kind);
        let existing = state
            .expandable
            .iter()
            .find(|e| e.0 == stream && e.1 == kind)
            .map(|e| e.2);
        let seg_idx = match existing {
            Some(i) => i,
            None => {
                // Address space for all the pool may hold, so the segment never has to move.
                let span = round_up(self.limit.max(rounded), granule);
                let range = vmm.reserve_range(span)?;
                let seg_idx = segment_slot(state);
                state.segments[seg_idx as usize] = Some(SegmentRec {
                    handle: range.handle,
                    address: range.address,
                    size: 0,
                    kind,
                    live: 0,
                    head: NIL,
                    range: range.size,
                });
                state.live_segments += 1;
                self.mark_idle(state, 0, true);
                state.expandable.push((stream, kind, seg_idx));
                seg_idx
            }
        };
        let (handle, old_size, span, head, live) = match &state.segments[seg_idx as usize] {
            Some(s) => (s.handle, s.size, s.range, s.head, s.live),
            None => return Err(DeviceError::InvalidSegment(SegmentHandle(0))),
        };
        let tail = tail_of(state, head);
        let tail_free = tail != NIL && {
            let b = &state.blocks[tail as usize];
            !b.allocated && (b.stream == stream || b.stream == GLOBAL)
        };
        let start = if tail_free {
            state.blocks[tail as usize].offset
        } else {
            old_size
        };
        let new_size = round_up(start.saturating_add(rounded), granule);
        let delta = new_size.saturating_sub(old_size);
        if new_size > span || state.counters.reserved.saturating_add(delta) > self.limit {
            return Err(DeviceError::OutOfMemory { requested: rounded });
        }
        vmm.map(handle, old_size, delta)?;
        log::debug!(
            "mapped {delta} bytes more of an expandable segment on {}",
            self.device.name()
        );
        if live == 0 {
            self.mark_idle(state, old_size, false);
            self.mark_idle(state, new_size, true);
        }
        if let Some(seg) = state.segments[seg_idx as usize].as_mut() {
            seg.size = new_size;
        }
        state.held[kind as usize].reserved += delta;
        let c = &mut state.counters;
        c.reserved += delta;
        c.peak_reserved = c.peak_reserved.max(c.reserved);
        c.device_allocs += 1;
        if tail_free {
            let tag = state.blocks[tail as usize].stream;
            let (sets, blocks) = cache(state, tag);
            sets.of(kind).remove(blocks, tail);
            blocks[tail as usize].size = new_size - blocks[tail as usize].offset;
            return Ok((tail, tag));
        }
        let block = new_block(state, Block::free(seg_idx, old_size, delta, tail, stream));
        if tail == NIL {
            if let Some(seg) = state.segments[seg_idx as usize].as_mut() {
                seg.head = block;
            }
        } else {
            state.blocks[tail as usize].next = block;
        }
        Ok((block, stream))
    }

    /// Unmaps the free tail of an expandable segment down to a granule boundary (all of it when
    /// the whole segment is one free block, releasing the range); `only` limits it to a pool
    /// and to blocks free on that stream or shared. Returns the bytes unmapped.
    fn trim(&self, state: &mut State, seg_idx: u32, only: Option<(Kind, StreamId)>) -> u64 {
        let Some(vmm) = self.device.virtual_memory() else {
            return 0;
        };
        let Some((handle, size, kind, head, live)) = state.segments[seg_idx as usize]
            .as_ref()
            .map(|s| (s.handle, s.size, s.kind, s.head, s.live))
        else {
            return 0;
        };
        let tail = tail_of(state, head);
        // Wholly free (its blocks may sit in several caches): all of it goes, as an ordinary
        // idle segment would.
        let whole = state.segments[seg_idx as usize]
            .as_ref()
            .is_some_and(|s| wholly_usable(state, s, only));
        if live == 0 && whole {
            return self.release_segment(state, seg_idx);
        }
        if tail == NIL {
            return 0;
        }
        let (offset, tag, allocated) = {
            let b = &state.blocks[tail as usize];
            (b.offset, b.stream, b.allocated)
        };
        if allocated || !may_release(only, kind, tag) {
            return 0;
        }
        let keep = round_up(offset, self.granule(vmm, kind));
        if keep >= size {
            return 0;
        }
        if keep == 0 {
            return self.release_segment(state, seg_idx);
        }
        let delta = size - keep;
        if let Err(e) = vmm.unmap(handle, keep, delta) {
            log::warn!(
                "unmapping {delta} bytes on {} failed: {e}",
                self.device.name()
            );
            return 0;
        }
        let (sets, blocks) = cache(state, tag);
        sets.of(kind).remove(blocks, tail);
        if keep == offset {
            let prev = state.blocks[tail as usize].prev;
            state.blocks[prev as usize].next = NIL;
            recycle_block(state, tail);
        } else {
            state.blocks[tail as usize].size = keep - offset;
            let (sets, blocks) = cache(state, tag);
            sets.of(kind).insert(blocks, tail);
        }
        if live == 0 {
            self.mark_idle(state, size, false);
            self.mark_idle(state, keep, true);
        }
        if let Some(seg) = state.segments[seg_idx as usize].as_mut() {
            seg.size = keep;
        }
        state.held[kind as usize].reserved -= delta;
        let c = &mut state.counters;
        c.reserved -= delta;
        c.device_frees += 1;
        delta
    }

    fn add_segment(
        &self,
        state: &mut State,
        handle: SegmentHandle,
        address: Option<u64>,
        size: u64,
        kind: Kind,
        tag: StreamId,
    ) -> u32 {
        let seg_idx = segment_slot(state);
        let block = new_block(state, Block::free(seg_idx, 0, size, NIL, tag));
        state.live_segments += 1;
        state.segments[seg_idx as usize] = Some(SegmentRec {
            handle,
            address,
            size,
            kind,
            live: 0,
            head: block,
            range: 0,
        });
        self.mark_idle(state, size, true);
        state.held[kind as usize].reserved += size;
        let c = &mut state.counters;
        c.reserved += size;
        c.peak_reserved = c.peak_reserved.max(c.reserved);
        c.device_allocs += 1;
        block
    }

    /// Marks a free block of a `kind` segment (already out of its free set) live, splitting
    /// off the remainder into the free set of cache `from` (a position in `caches`). Returns the
    /// handle and the allocation's id.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn take_block(
        &self,
        state: &mut State,
        idx: u32,
        from: usize,
        kind: Kind,
        rounded: u64,
        requested: u64,
        stream: StreamId,
    ) -> (Allocation, BufferId) {
        // Only a tracker needs the id now; otherwise `info` gives the block one if asked.
        let id = if self.tracker.is_some() {
            state.fresh_id()
        } else {
            BufferId::UNASSIGNED
        };
        if state.spare_blocks.is_empty() {
            add_spare_blocks(state);
        }
        // Local slices: their pointers and lengths stay in registers across the stores below
        // (through `state` they would be reloaded after each one).
        let blocks = state.blocks.as_mut_slice();
        let b = &mut blocks[idx as usize];
        let (seg_idx, size, offset, next) = (b.segment, b.size, b.offset, b.next);
        let remaining = size - rounded;
        let (min_rest, max_size) = self.rules.split[kind as usize];
        let split = remaining >= min_rest && size <= max_size;
        let block_size = if split { rounded } else { size };
        b.size = block_size;
        b.allocated = true;
        b.requested = requested;
        b.stream = stream;
        b.id = id.0;
        // A new generation per allocation, so a stale copy of an earlier allocation of this
        // block can never free the current one; odd, so never zero.
        b.generation = b.generation.wrapping_add(2) | 1;
        let generation = NonZeroU32::new(b.generation).unwrap_or(NonZeroU32::MIN);
        if split {
            let (tag, sets) = &mut state.caches[from];
            let rest = state.spare_blocks.pop().unwrap_or(NIL);
            let r = &mut blocks[rest as usize];
            r.segment = seg_idx;
            r.offset = offset + rounded;
            r.size = remaining;
            // A spare block is already free; `requested` and `id` mean nothing while it is.
            r.prev = idx;
            r.next = next;
            r.stream = *tag;
            if next != NIL {
                blocks[next as usize].prev = rest;
            }
            blocks[idx as usize].next = rest;
            sets.of(kind).insert(blocks, rest);
        }
        let woke = state.segments[seg_idx as usize].as_mut().and_then(|seg| {
            seg.live += 1;
            (seg.live == 1).then_some(seg.size)
        });
        state.held[kind as usize].allocated += block_size;
        let c = &mut state.counters;
        c.allocated += block_size;
        c.total_allocated += block_size;
        c.peak_allocated = c.peak_allocated.max(c.allocated);
        c.requested += requested;
        c.peak_requested = c.peak_requested.max(c.requested);
        c.active += 1;
        if let Some(seg_size) = woke {
            self.wake(state, seg_size);
        }
        (
            Allocation {
                block: idx,
                generation,
            },
            id,
        )
    }

    /// Counts a segment of `size` that has just taken its first live block out of the idle set.
    #[cold]
    #[inline(never)]
    fn wake(&self, state: &mut State, size: u64) {
        self.mark_idle(state, size, false);
        // The segment's other free bytes were idle and now count as split.
        state.note_inactive_split();
    }

    /// Counts a segment of `size` into (or out of) the idle set; returns the idle count of its
    /// size (0 when the per-size cap is off and counts are not kept).
    fn mark_idle(&self, state: &mut State, size: u64, idle: bool) -> usize {
        if idle {
            state.idle_bytes += size;
        } else {
            state.idle_bytes -= size;
        }
        if self.config.max_pooled_per_bucket == usize::MAX {
            return 0;
        }
        let count = state.idle.entry(size).or_insert(0);
        if idle {
            *count += 1;
        } else {
            *count = count.saturating_sub(1);
        }
        *count
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

    fn free_with<'a, G: std::ops::DerefMut<Target = State>>(
        &'a self,
        alloc: Allocation,
        synchronized: bool,
        access: impl FnOnce(&'a Pool) -> G,
    ) -> Result<(), PoolError> {
        let mut state = access(self);
        state.live_block(alloc)?;
        let idx = alloc.block;
        let (seg_idx, size, requested, tag, id) = {
            let b = &mut state.blocks[idx as usize];
            b.allocated = false;
            (b.segment, b.size, b.requested, b.stream, BufferId(b.id))
        };
        let c = &mut state.counters;
        c.allocated -= size;
        c.requested -= requested;
        c.active -= 1;
        let mut now_idle = None;
        let mut kind = Kind::Large;
        if let Some(seg) = state.segments[seg_idx as usize].as_mut() {
            kind = seg.kind;
            seg.live -= 1;
            if seg.live == 0 {
                now_idle = Some((seg.size, seg.range > 0));
            }
        }
        self.insert_free(
            &mut state,
            idx,
            if synchronized { GLOBAL } else { tag },
            kind,
        );
        state.held[kind as usize].allocated -= size;
        if let Some((seg_size, expandable)) = now_idle {
            self.went_idle(&mut state, seg_idx, seg_size, expandable);
        }
        // Free bytes in split segments only grow on a free (or when a segment wakes, counted
        // where it wakes), so their peak is taken here.
        state.note_inactive_split();
        // And allocated bytes only shrank: only the band's bottom can have been crossed.
        let transition = if state.counters.allocated < state.pressure_span.0 {
            self.update_pressure(&mut state)
        } else {
            None
        };
        drop(state);
        if self.tracker.is_some() || transition.is_some() {
            self.after_free(id, transition);
        }
        Ok(())
    }

    /// Counts a segment whose last live block was just freed as idle, releasing it when its
    /// size already has `max_pooled_per_bucket` idle.
    #[cold]
    #[inline(never)]
    fn went_idle(&self, state: &mut State, seg_idx: u32, seg_size: u64, expandable: bool) {
        // An expandable segment stays (its tail is unmapped when the cache is emptied).
        if self.mark_idle(state, seg_size, true) > self.config.max_pooled_per_bucket && !expandable
        {
            self.release_segment(state, seg_idx);
        }
    }

    /// What follows a free outside the lock, as [`Pool::after_allocate`] for an allocation.
    #[cold]
    #[inline(never)]
    fn after_free(&self, id: BufferId, transition: Option<(MemoryPressure, MemoryPressure)>) {
        if let Some(tracker) = &self.tracker {
            tracker.untrack(id);
        }
        if let Some((old, new)) = transition {
            self.fire(old, new);
        }
    }

    /// Puts a free block of a `kind` segment into cache `tag`, merging it with free neighbours
    /// of the same cache.
    fn insert_free(&self, state: &mut State, mut idx: u32, tag: StreamId, kind: Kind) {
        let pos = cache_slot(state, tag);
        let set = state.caches[pos].1.of(kind);
        // A local slice, as in `take_block`.
        let blocks = state.blocks.as_mut_slice();
        blocks[idx as usize].stream = tag;
        let joins = |blocks: &[Block], i: u32| {
            i != NIL && !blocks[i as usize].allocated && blocks[i as usize].stream == tag
        };
        let prev = blocks[idx as usize].prev;
        if joins(blocks, prev) {
            set.remove(blocks, prev);
            merge_blocks(blocks, &mut state.spare_blocks, prev, idx);
            idx = prev;
        }
        let next = blocks[idx as usize].next;
        if joins(blocks, next) {
            set.remove(blocks, next);
            merge_blocks(blocks, &mut state.spare_blocks, idx, next);
        }
        set.insert(blocks, idx);
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

    fn sync_locked(&self, state: &mut State, stream: StreamId) {
        if stream == GLOBAL {
            return;
        }
        let Some(pos) = state.cache_pos(stream) else {
            return;
        };
        let mut sets = std::mem::take(&mut state.caches[pos].1);
        for (kind, set) in [Kind::Small, Kind::Large].into_iter().zip(&mut sets.0) {
            for idx in set.drain(state.blocks.as_slice()) {
                self.insert_free(state, idx, GLOBAL, kind);
            }
        }
    }

    /// Releases every fully free segment to the device; returns the bytes released.
    pub fn empty_cache(&self) -> u64 {
        let mut state = self.lock();
        self.release_idle(&mut state)
    }

    /// Seed 000's `clear_pool`: the same as [`Pool::empty_cache`].
    pub fn clear_pool(&self) -> u64 {
        self.empty_cache()
    }

    /// Seed 000's `shrink`: releases cached segments, returning the bytes released.
    pub fn shrink(&self) -> u64 {
        self.empty_cache()
    }

    /// Seed 004's emergency clean-up: synchronise every stream so their cached blocks can merge,
    /// then release every fully free segment. Returns the bytes released.
    pub fn emergency_cleanup(&self) -> u64 {
        self.synchronize_all();
        self.empty_cache()
    }

    fn release_idle(&self, state: &mut State) -> u64 {
        self.release_idle_of(state, None)
    }

    /// Releases every idle segment, or (`Some((kind, stream))`) those of one pool whose free
    /// blocks are all `stream`'s or shared.
    fn release_idle_of(&self, state: &mut State, only: Option<(Kind, StreamId)>) -> u64 {
        if state.idle_bytes == 0 && state.expandable.is_empty() {
            return 0;
        }
        let ranges: Vec<u32> = state
            .segments
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_ref().filter(|s| s.range > 0).map(|_| i as u32))
            .collect();
        let idle: Vec<u32> = state
            .segments
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                s.as_ref()
                    .filter(|s| s.range == 0 && s.live == 0 && wholly_usable(state, s, only))
                    .map(|_| i as u32)
            })
            .collect();
        let trimmed: u64 = ranges
            .into_iter()
            .map(|seg_idx| self.trim(state, seg_idx, only))
            .sum();
        trimmed
            + idle
                .into_iter()
                .map(|seg_idx| self.release_segment(state, seg_idx))
                .sum::<u64>()
    }

    /// Returns a fully free segment to the device. Its blocks leave their free sets.
    fn release_segment(&self, state: &mut State, seg_idx: u32) -> u64 {
        let Some(seg) = state.segments[seg_idx as usize].take() else {
            return 0;
        };
        if seg.range > 0 {
            state.expandable.retain(|e| e.2 != seg_idx);
        }
        log::debug!(
            "releasing a segment of {} bytes on {}",
            seg.size,
            self.device.name()
        );
        let mut idx = seg.head;
        while idx != NIL {
            let (allocated, tag, next) = {
                let b = &state.blocks[idx as usize];
                (b.allocated, b.stream, b.next)
            };
            if !allocated {
                let (sets, blocks) = cache(state, tag);
                sets.of(seg.kind).remove(blocks, idx);
            }
            recycle_block(state, idx);
            idx = next;
        }
        if seg.live == 0 {
            self.mark_idle(state, seg.size, false);
        }
        state.spare_segments.push(seg_idx);
        state.live_segments -= 1;
        // A failed release leaves the bytes with the driver; count them as released from the
        // pool's point of view, since the handle is gone either way, and log it.
        if let Err(e) = self.device.release(seg.handle) {
            log::warn!(
                "releasing segment {:?} on {} failed: {e}",
                seg.handle,
                self.device.name()
            );
        }
        state.held[seg.kind as usize].reserved -= seg.size;
        let c = &mut state.counters;
        c.reserved -= seg.size;
        c.device_frees += 1;
        seg.size
    }

    /// Allocates each size and frees it again, so the cache holds segments for them.
    pub fn warmup(&self, sizes: &[u64]) -> Result<(), PoolError> {
        let mut held = Vec::with_capacity(sizes.len());
        let result = sizes
            .iter()
            .try_for_each(|&s| self.allocate(s).map(|a| held.push(a)));
        for a in held {
            self.free(a)?;
        }
        result
    }

    /// Bytes reserved from the device now: `stats().reserved_bytes` without building the whole
    /// snapshot (cheap enough to read after every request).
    pub fn reserved_bytes(&self) -> u64 {
        self.lock().counters.reserved
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> MemoryStats {
        let state = self.lock();
        let c = &state.counters;
        MemoryStats {
            total_allocated_bytes: c.total_allocated,
            in_use_bytes: c.allocated,
            pooled_bytes: c.reserved - c.allocated,
            peak_bytes: c.peak_allocated,
            pool_hits: c.hits,
            pool_misses: c.misses,
            cpu_fallbacks: c.cpu_fallbacks,
            active_buffers: c.active,
            allocated_bytes: c.allocated,
            peak_allocated_bytes: c.peak_allocated,
            reserved_bytes: c.reserved,
            peak_reserved_bytes: c.peak_reserved,
            requested_bytes: c.requested,
            peak_requested_bytes: c.peak_requested,
            inactive_split_bytes: c.reserved - c.allocated - state.idle_bytes,
            peak_inactive_split_bytes: c.peak_inactive_split,
            device_allocs: c.device_allocs,
            device_frees: c.device_frees,
            retries: c.retries,
            ooms: c.ooms,
            largest_free_block: state
                .caches
                .iter()
                .map(|(_, s)| s.largest(state.blocks.as_slice()))
                .max()
                .unwrap_or(0),
            segments: state.live_segments,
        }
    }

    pub(crate) fn count_cpu_fallback(&self) {
        self.lock().counters.cpu_fallbacks += 1;
    }

    /// Current pressure: allocated bytes against the usable limit.
    pub fn pressure(&self) -> MemoryPressure {
        MemoryPressure::from_u8(self.pressure_level.load(Ordering::Relaxed) as u8)
    }

    /// Calls `callback(old, new)` once every time the pressure level changes.
    pub fn on_pressure_change(
        &self,
        callback: impl Fn(MemoryPressure, MemoryPressure) + Send + Sync + 'static,
    ) {
        self.callbacks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::new(callback));
    }

    /// The new pressure level, once allocated bytes have left the current band's span (the
    /// callers check, so the common case costs one comparison).
    #[inline(always)]
    fn update_pressure(&self, state: &mut State) -> Option<(MemoryPressure, MemoryPressure)> {
        let allocated = state.counters.allocated;
        let level = self.bands.level(allocated);
        state.pressure_span = self.bands.span(level);
        if level == state.pressure {
            return None;
        }
        let old = std::mem::replace(&mut state.pressure, level);
        self.pressure_level
            .store(u64::from(level.to_u8()), Ordering::Relaxed);
        Some((old, level))
    }

    fn fire(&self, old: MemoryPressure, new: MemoryPressure) {
        let callbacks: Vec<PressureCallback> = self
            .callbacks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for cb in callbacks {
            cb(old, new);
        }
    }

    /// Every block of every segment, in segment and address order (diagnostics and tests).
    pub fn blocks(&self) -> Vec<BlockInfo> {
        let state = self.lock();
        let mut out = Vec::new();
        for seg in state.segments.iter().flatten() {
            let mut idx = seg.head;
            while idx != NIL {
                let b = &state.blocks[idx as usize];
                out.push(BlockInfo {
                    segment: seg.handle,
                    segment_size: seg.size,
                    offset: b.offset,
                    size: b.size,
                    allocated: b.allocated,
                    stream: b.stream,
                });
                idx = b.next;
            }
        }
        out.sort_by_key(|b| (b.segment, b.offset));
        out
    }

    /// Where a live allocation is and what it holds; [`PoolError::NotLive`] for a stale handle
    /// (freed, or from another pool).
    pub fn info(&self, alloc: &Allocation) -> Result<AllocationInfo, PoolError> {
        let mut state = self.lock();
        state.live_block(*alloc)?;
        if state.blocks[alloc.block as usize].id == BufferId::UNASSIGNED.0 {
            let id = state.fresh_id();
            state.blocks[alloc.block as usize].id = id.0;
        }
        let b = &state.blocks[alloc.block as usize];
        let seg = state.segments[b.segment as usize].as_ref();
        Ok(AllocationInfo {
            id: BufferId(b.id),
            segment: seg.map_or(SegmentHandle(0), |s| s.handle),
            offset: b.offset,
            size: b.size,
            requested: b.requested,
            stream: b.stream,
            address: seg.and_then(|s| s.address).map(|a| a + b.offset),
        })
    }

    /// Writes bytes into a live allocation through the device.
    pub fn write(&self, alloc: &Allocation, offset: u64, data: &[u8]) -> Result<(), PoolError> {
        self.write_at(&self.info(alloc)?, offset, data)
    }

    /// Reads bytes from a live allocation through the device.
    pub fn read(&self, alloc: &Allocation, offset: u64, out: &mut [u8]) -> Result<(), PoolError> {
        self.read_at(&self.info(alloc)?, offset, out)
    }

    /// [`Pool::write`] where the allocation was looked up already (a transfer's chunks).
    pub(crate) fn write_at(
        &self,
        at: &AllocationInfo,
        offset: u64,
        data: &[u8],
    ) -> Result<(), PoolError> {
        crate::device::check_bounds(offset, data.len(), at.size)?;
        Ok(self.device.write(at.segment, at.offset + offset, data)?)
    }

    /// [`Pool::read`] where the allocation was looked up already.
    pub(crate) fn read_at(
        &self,
        at: &AllocationInfo,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), PoolError> {
        crate::device::check_bounds(offset, out.len(), at.size)?;
        Ok(self.device.read(at.segment, at.offset + offset, out)?)
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

/// Hashes segment sizes (multiples of 512 B) with one multiply: SipHash on the allocation path
/// cost more than the rest of a cache hit.
#[derive(Default)]
struct SizeHasher(u64);

impl Hasher for SizeHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0 = mix_bytes(self.0, bytes);
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = (v >> 9).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// The fallback byte-wise mix of both hashers (their integer writes are the fast paths).
fn mix_bytes(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h = (h.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    h
}

impl State {
    /// `alloc`'s block, when `alloc` is its current allocation.
    #[inline(always)]
    fn live_block(&self, alloc: Allocation) -> Result<&Block, PoolError> {
        self.blocks
            .get(alloc.block as usize)
            .filter(|b| b.allocated && b.generation == alloc.generation.get())
            .ok_or(PoolError::NotLive(alloc))
    }

    #[inline(always)]
    fn fresh_id(&mut self) -> BufferId {
        if self.next_id == self.id_end {
            self.reserve_ids();
        }
        self.next_id += 1;
        BufferId(self.next_id - 1)
    }

    #[cold]
    #[inline(never)]
    fn reserve_ids(&mut self) {
        self.next_id = BufferId::reserve(ID_BATCH);
        self.id_end = self.next_id + ID_BATCH;
    }

    /// Where `tag`'s free sets are: a scan while there are a handful of streams (the usual
    /// case, and cheaper than any hash on the allocate/free path), the index beyond that.
    #[inline(always)]
    fn cache_pos(&self, tag: StreamId) -> Option<usize> {
        match tag {
            // Where `Pool::new` put them; caches are never removed.
            GLOBAL => Some(0),
            DEFAULT_STREAM => Some(1),
            _ if self.caches.len() <= 8 => self.caches.iter().position(|(t, _)| *t == tag),
            _ => self.cache_index.get(&tag).copied(),
        }
    }

    /// Takes the peak of free bytes in segments that are split (not wholly free).
    fn note_inactive_split(&mut self) {
        let c = &mut self.counters;
        let split_now = c.reserved - c.allocated - self.idle_bytes;
        c.peak_inactive_split = c.peak_inactive_split.max(split_now);
    }
}

/// Hashes stream ids for the cache index: one multiply (SipHash would be most of a cache hit's
/// cost, and `SizeHasher` drops the low bits that tell small ids apart).
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0 = mix_bytes(self.0, bytes);
    }

    fn write_u32(&mut self, v: u32) {
        self.0 = u64::from(v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// Where cache `tag` is in `caches` (made on first use).
#[inline(always)]
fn cache_slot(state: &mut State, tag: StreamId) -> usize {
    state.cache_pos(tag).unwrap_or_else(|| {
        state.cache_index.insert(tag, state.caches.len());
        state.caches.push((tag, FreeSets::default()));
        state.caches.len() - 1
    })
}

/// The free sets of cache `tag` (made on first use) and the blocks they link.
fn cache(state: &mut State, tag: StreamId) -> (&mut FreeSets, &mut [Block]) {
    let pos = cache_slot(state, tag);
    (&mut state.caches[pos].1, &mut state.blocks)
}

/// A free slot in `segments` for a new segment (a released one's, else a new one).
fn segment_slot(state: &mut State) -> u32 {
    match state.spare_segments.pop() {
        Some(i) => i,
        None => {
            state.segments.push(None);
            (state.segments.len() - 1) as u32
        }
    }
}

/// Whether a release limited to `only` (a pool, and blocks free on a stream or shared) may
/// take a free block of `kind` in cache `tag`; `None` allows everything.
fn may_release(only: Option<(Kind, StreamId)>, kind: Kind, tag: StreamId) -> bool {
    only.is_none_or(|(k, s)| k == kind && (tag == s || tag == GLOBAL))
}

/// Whether every block of `seg` may be released under `only` (see [`may_release`]).
fn wholly_usable(state: &State, seg: &SegmentRec, only: Option<(Kind, StreamId)>) -> bool {
    let mut idx = seg.head;
    while idx != NIL {
        let b = &state.blocks[idx as usize];
        if !may_release(only, seg.kind, b.stream) {
            return false;
        }
        idx = b.next;
    }
    true
}

/// The last block of the segment whose first block is `head` (NIL for none).
fn tail_of(state: &State, head: u32) -> u32 {
    let mut idx = head;
    while idx != NIL {
        let next = state.blocks[idx as usize].next;
        if next == NIL {
            return idx;
        }
        idx = next;
    }
    NIL
}

/// Adds blank blocks to the spare list, so that splitting a block on the allocate path only
/// ever pops one (a growing `Vec` there would cost a branch and a reload per allocation): first
/// [`INITIAL_BLOCKS`], then half the table again each time (the table's copy is amortised).
#[cold]
#[inline(never)]
fn add_spare_blocks(state: &mut State) {
    let first = state.blocks.len() as u32;
    let count = if first == 0 {
        INITIAL_BLOCKS
    } else {
        (first / 2).clamp(64, 1 << 16)
    };
    state
        .blocks
        .extend((0..count).map(|_| Block::free(0, 0, 0, NIL, GLOBAL)));
    // Popped lowest first.
    state.spare_blocks.extend((first..first + count).rev());
}

/// A slot for `block` from the spare list (topped up as the allocate path tops it up); the
/// slot's generation carries on.
fn new_block(state: &mut State, mut block: Block) -> u32 {
    if state.spare_blocks.is_empty() {
        add_spare_blocks(state);
    }
    let i = state.spare_blocks.pop().unwrap_or(NIL);
    block.generation = state.blocks[i as usize].generation;
    state.blocks[i as usize] = block;
    i
}

fn recycle_block(state: &mut State, idx: u32) {
    recycle(&mut state.blocks, &mut state.spare_blocks, idx);
}

#[inline(always)]
fn recycle(blocks: &mut [Block], spare: &mut Vec<u32>, idx: u32) {
    let b = &mut blocks[idx as usize];
    b.generation = b.generation.wrapping_add(1);
    b.allocated = false;
    b.prev = NIL;
    b.next = NIL;
    spare.push(idx);
}

/// Merges free block `next` into its left neighbour `prev`.
#[inline(always)]
fn merge_blocks(blocks: &mut [Block], spare: &mut Vec<u32>, prev: u32, next: u32) {
    let (size, after) = {
        let n = &blocks[next as usize];
        (n.size, n.next)
    };
    blocks[prev as usize].size += size;
    blocks[prev as usize].next = after;
    if after != NIL {
        blocks[after as usize].prev = prev;
    }
    recycle(blocks, spare, next);
}
