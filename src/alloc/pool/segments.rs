//! Segments from the device: their sizes (PyTorch's rounding, the growth share), reserving
//! and growing them (expandable segments map more of their range), trimming, and releasing
//! idle ones back to the device.

use super::*;

/// A growing pool aims at free headroom of 1/`GROWTH_DIV` of what it holds. Measured on the
/// peer sequences (benches/peers): a half cost 1.27x reserved/live on the PyTorch trace; a
/// fifth or less, more than 1 % of its allocations going to the device (so its p99 became a
/// device allocation); a quarter, 1.18x with 23 device allocations before large requests got
/// segments of their own, 1.04x with 24 since.
const GROWTH_DIV: u64 = 4;

/// A request's own segment is its size in whole pages (PyTorch's 2 MiB steps cost the PyTorch
/// trace 0.03x reserved/live: a 36.8 MiB activation took 38 MiB).
const DEDICATED_ROUND: u64 = 4096;

impl Pool {
    /// Segment sizes to try for a miss, preferred first; `held` is what the request's pool
    /// holds now.
    pub(super) fn segment_sizes(
        &self,
        rounded: u64,
        kind: Kind,
        held: Held,
        total: u64,
    ) -> [Option<u64>; 2] {
        if let Some(arena) = self.arena {
            // Grow by a whole arena when the request fits one; else by the request itself.
            let exact = round_up(rounded, self.config.large_round);
            return [Some(arena.max(exact)), (exact < arena).then_some(exact)];
        }
        match kind {
            _ if self.grows() => {
                // The small pool's share is of everything reserved: small requests alongside a
                // large footprint get 20 MiB segments soon rather than a long run of 2 MiB ones.
                // But it grows by at most what it holds (two small segments at first): a
                // first small segment of a quarter of a large footprint held 4.4 MiB free at
                // the peak of the transformer sequence (benches/peers: 1.025x reserved/live,
                // 1.012x so; the PyTorch trace 1.039x -> 1.031x, random 1.273x -> 1.277x).
                let (unit, floor, cap, share) = match kind {
                    Kind::Small => (
                        self.config.small_segment,
                        self.config.small_segment,
                        self.config.large_segment,
                        (total / GROWTH_DIV).min(held.reserved.max(2 * self.config.small_segment)),
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
                // A request of a whole large segment or more gets a segment of its own, of its
                // own size: in a shared segment its block, once free, is split by smaller
                // requests and the next one of its size misses (on the PyTorch trace that cost
                // 1.18x reserved/live; its own segment, idle when freed, goes back on a miss).
                if kind == Kind::Large && rounded >= self.config.large_segment {
                    return [Some(round_up(rounded, DEDICATED_ROUND)), None];
                }
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

    /// Reserves a new segment for a miss (releasing the cache and retrying once when the device
    /// is full) and returns its single free block, not yet in any free set.
    #[cold]
    #[inline(never)]
    pub(super) fn grow(
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
            // And the other pool's, while it has blocks in use (so still needs segments of its
            // own): an idle segment there is reserve no request of this size can use. A pool
            // with nothing live keeps its idle one, as its next request would reserve it again.
            let other = match kind {
                Kind::Small => Kind::Large,
                Kind::Large => Kind::Small,
            };
            if state.held[other as usize].allocated > 0 {
                self.release_idle_of(state, Some((other, stream)));
            }
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
    pub(super) fn granule(&self, vmm: &dyn VirtualMemory, kind: Kind) -> u64 {
        let size = match kind {
            Kind::Small => self.config.small_segment,
            Kind::Large => self.config.large_segment,
        };
        round_up(size, vmm.granularity().max(1))
    }

    /// Maps more memory at the end of the (stream, kind) expandable segment, making the segment
    /// first if needed, and returns a free block of at least `rounded` bytes there (not in any
    /// free set): the free tail block extended, or a new one.
    pub(super) fn extend(
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
    pub(super) fn trim(
        &self,
        state: &mut State,
        seg_idx: u32,
        only: Option<(Kind, StreamId)>,
    ) -> u64 {
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

    pub(super) fn add_segment(
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

    pub(super) fn release_idle(&self, state: &mut State) -> u64 {
        self.release_idle_of(state, None)
    }

    /// Releases every idle segment, or (`Some((kind, stream))`) those of one pool whose free
    /// blocks are all `stream`'s or shared.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "segment indices: each segment is at least 2 MiB"
    )]
    pub(super) fn release_idle_of(&self, state: &mut State, only: Option<(Kind, StreamId)>) -> u64 {
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
    pub(super) fn release_segment(&self, state: &mut State, seg_idx: u32) -> u64 {
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

    /// Counts a segment whose last live block was just freed as idle, releasing it when its
    /// size already has `max_pooled_per_bucket` idle.
    #[cold]
    #[inline(never)]
    pub(super) fn went_idle(
        &self,
        state: &mut State,
        seg_idx: u32,
        seg_size: u64,
        expandable: bool,
    ) {
        // An expandable segment stays (its tail is unmapped when the cache is emptied).
        if self.mark_idle(state, seg_size, true) > self.config.max_pooled_per_bucket && !expandable
        {
            self.release_segment(state, seg_idx);
        }
    }
}
