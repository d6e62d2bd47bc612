//! The pool's state behind its lock: segments, blocks, the per-stream caches, counters and
//! the id batch; the rules a request follows; and the small hashers of the hot path.

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Small = 0,
    Large = 1,
}

#[derive(Debug)]
pub(super) struct SegmentRec {
    pub(super) handle: SegmentHandle,
    pub(super) address: Option<u64>,
    pub(super) size: u64,
    pub(super) kind: Kind,
    /// Live (allocated) blocks in this segment; the segment is idle when this is zero.
    pub(super) live: u32,
    pub(super) head: u32,
    /// For an expandable segment, the address range it may grow into (`size` is what is
    /// mapped); 0 for an ordinary segment.
    pub(super) range: u64,
}

/// Bytes one pool (small or large) reserves and hands out.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Held {
    pub(super) reserved: u64,
    pub(super) allocated: u64,
}

#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) total_allocated: u64,
    pub(super) allocated: u64,
    pub(super) peak_allocated: u64,
    pub(super) requested: u64,
    pub(super) peak_requested: u64,
    pub(super) reserved: u64,
    pub(super) peak_reserved: u64,
    pub(super) peak_inactive_split: u64,
    pub(super) active: u64,
    pub(super) hits: u64,
    pub(super) misses: u64,
    pub(super) device_allocs: u64,
    pub(super) device_frees: u64,
    pub(super) retries: u64,
    pub(super) ooms: u64,
    pub(super) cpu_fallbacks: u64,
}

#[derive(Debug)]
pub(super) struct State {
    pub(super) blocks: Vec<Block>,
    pub(super) spare_blocks: Vec<u32>,
    pub(super) segments: Vec<Option<SegmentRec>>,
    pub(super) spare_segments: Vec<u32>,
    /// Free sets per cache, in creation order (GLOBAL first).
    pub(super) caches: Vec<(StreamId, FreeSets)>,
    /// Where each stream's entry is in `caches`: a trace may name hundreds of thousands of
    /// streams, and a linear search per request would make its replay quadratic.
    pub(super) cache_index: HashMap<StreamId, usize, BuildHasherDefault<IdHasher>>,
    /// Segments reserved now (`segments` also holds empty slots for reuse).
    pub(super) live_segments: u64,
    /// Idle (fully free) segments per segment size, for `max_pooled_per_bucket`.
    pub(super) idle: HashMap<u64, usize, BuildHasherDefault<SizeHasher>>,
    /// Bytes in idle segments (releasable at once).
    pub(super) idle_bytes: u64,
    /// Reserved and allocated bytes of each pool (small, large): the growth policy sizes new
    /// segments from them.
    pub(super) held: [Held; 2],
    /// The expandable segment of each (stream, pool), by index into `segments`.
    pub(super) expandable: Vec<(StreamId, Kind, u32)>,
    pub(super) counters: Counters,
    pub(super) pressure: MemoryPressure,
    /// The allocated byte counts that keep `pressure` (`bands.span`).
    pub(super) pressure_span: (u64, u64),
    /// Ids `next_id..id_end` are this pool's to hand out (see [`BufferId::reserve`]).
    pub(super) next_id: u64,
    pub(super) id_end: u64,
}

/// Blocks a new pool has room for before its block table first grows (64 bytes each): a model's
/// working set is hundreds to thousands of blocks, and each growth copies the table.
pub(super) const INITIAL_BLOCKS: u32 = 1024;

/// Ids a pool takes from the process-wide counter at a time.
pub(super) const ID_BATCH: u64 = 4096;

/// Which pool a request goes to and when its block is split, from the configuration.
#[derive(Debug, Clone, Copy)]
pub(super) struct Rules {
    /// Rounded requests up to this size are small (0 in an arena, where everything is large).
    pub(super) small_limit: u64,
    /// Per [`Kind`]: a block is split when the remainder is at least `.0` bytes and the block at
    /// most `.1` bytes (PyTorch: any remainder of a small block; of a large block, more than
    /// `small_size`, and never an oversize block).
    pub(super) split: [(u64, u64); 2],
}

impl Rules {
    pub(super) fn new(config: &MemoryConfig, round: u64, arena: bool) -> Self {
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

#[inline(always)]
pub(super) fn round_up(value: u64, to: u64) -> u64 {
    if to.is_power_of_two() {
        return round_up_pow2(value, to);
    }
    value.div_ceil(to).saturating_mul(to)
}

/// `value` rounded up to `to`, a power of two: a mask instead of a division (saturating).
#[inline(always)]
pub(super) fn round_up_pow2(value: u64, to: u64) -> u64 {
    value
        .checked_add(to - 1)
        .map_or(u64::MAX, |v| v & !(to - 1))
}

/// Hashes segment sizes (multiples of 512 B) with one multiply: SipHash on the allocation path
/// cost more than the rest of a cache hit.
#[derive(Default)]
pub(super) struct SizeHasher(u64);

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
pub(super) fn mix_bytes(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h = (h.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    h
}

impl State {
    /// `alloc`'s block, when `alloc` is its current allocation.
    #[inline(always)]
    pub(super) fn live_block(&self, alloc: Allocation) -> Result<&Block, PoolError> {
        self.blocks
            .get(alloc.block as usize)
            .filter(|b| b.allocated && b.generation == alloc.generation.get())
            .ok_or(PoolError::NotLive(alloc))
    }

    #[inline(always)]
    pub(super) fn fresh_id(&mut self) -> BufferId {
        if self.next_id == self.id_end {
            self.reserve_ids();
        }
        self.next_id += 1;
        BufferId(self.next_id - 1)
    }

    #[cold]
    #[inline(never)]
    pub(super) fn reserve_ids(&mut self) {
        self.next_id = BufferId::reserve(ID_BATCH);
        self.id_end = self.next_id + ID_BATCH;
    }

    /// Where `tag`'s free sets are: a scan while there are a handful of streams (the usual
    /// case, and cheaper than any hash on the allocate/free path), the index beyond that.
    #[inline(always)]
    pub(super) fn cache_pos(&self, tag: StreamId) -> Option<usize> {
        match tag {
            // Where `Pool::new` put them; caches are never removed.
            GLOBAL => Some(0),
            DEFAULT_STREAM => Some(1),
            _ if self.caches.len() <= 8 => self.caches.iter().position(|(t, _)| *t == tag),
            _ => self.cache_index.get(&tag).copied(),
        }
    }

    /// Takes the peak of free bytes in segments that are split (not wholly free).
    pub(super) fn note_inactive_split(&mut self) {
        let c = &mut self.counters;
        let split_now = c.reserved - c.allocated - self.idle_bytes;
        c.peak_inactive_split = c.peak_inactive_split.max(split_now);
    }
}

/// Hashes stream ids for the cache index: one multiply (SipHash would be most of a cache hit's
/// cost, and `SizeHasher` drops the low bits that tell small ids apart).
#[derive(Default)]
pub(super) struct IdHasher(u64);

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
pub(super) fn cache_slot(state: &mut State, tag: StreamId) -> usize {
    state.cache_pos(tag).unwrap_or_else(|| {
        state.cache_index.insert(tag, state.caches.len());
        state.caches.push((tag, FreeSets::default()));
        state.caches.len() - 1
    })
}

/// The free sets of cache `tag` (made on first use) and the blocks they link.
pub(super) fn cache(state: &mut State, tag: StreamId) -> (&mut FreeSets, &mut [Block]) {
    let pos = cache_slot(state, tag);
    (&mut state.caches[pos].1, &mut state.blocks)
}

/// A free slot in `segments` for a new segment (a released one's, else a new one).
#[expect(
    clippy::cast_possible_truncation,
    reason = "segment indices: each segment is at least 2 MiB"
)]
pub(super) fn segment_slot(state: &mut State) -> u32 {
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
pub(super) fn may_release(only: Option<(Kind, StreamId)>, kind: Kind, tag: StreamId) -> bool {
    only.is_none_or(|(k, s)| k == kind && (tag == s || tag == GLOBAL))
}

/// Whether every block of `seg` may be released under `only` (see [`may_release`]).
pub(super) fn wholly_usable(
    state: &State,
    seg: &SegmentRec,
    only: Option<(Kind, StreamId)>,
) -> bool {
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
