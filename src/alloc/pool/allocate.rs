//! The allocate path: a cached block of the request's stream (or a shared one) taken in one
//! pass over its TLSF bin, split where the rest is worth keeping; on a miss, growth, a retry
//! after releasing the cache, or a typed out-of-memory error.

use super::*;

impl Pool {
    /// The allocation path, with the state reached through `access` (the lock, or an exclusive
    /// borrow).
    pub(super) fn allocate_with<'a, G: std::ops::DerefMut<Target = State>>(
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
    pub(super) fn allocate_miss(
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
    pub(super) fn after_allocate(
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
    pub(super) fn oom_error(
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
    pub(super) fn find_free(
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

    /// Marks a free block of a `kind` segment (already out of its free set) live, splitting
    /// off the remainder into the free set of cache `from` (a position in `caches`). Returns the
    /// handle and the allocation's id.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn take_block(
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
    pub(super) fn wake(&self, state: &mut State, size: u64) {
        self.mark_idle(state, size, false);
        // The segment's other free bytes were idle and now count as split.
        state.note_inactive_split();
    }

    /// Counts a segment of `size` into (or out of) the idle set; returns the idle count of its
    /// size (0 when the per-size cap is off and counts are not kept).
    pub(super) fn mark_idle(&self, state: &mut State, size: u64, idle: bool) -> usize {
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
}
