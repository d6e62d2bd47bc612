//! The free path: a block back into its stream's cache, merged with free neighbours; and
//! synchronising a stream, which makes its freed blocks everyone's.

use super::*;

impl Pool {
    pub(super) fn free_with<'a, G: std::ops::DerefMut<Target = State>>(
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

    /// What follows a free outside the lock, as [`Pool::after_allocate`] for an allocation.
    #[cold]
    #[inline(never)]
    pub(super) fn after_free(
        &self,
        id: BufferId,
        transition: Option<(MemoryPressure, MemoryPressure)>,
    ) {
        if let Some(tracker) = &self.tracker {
            tracker.untrack(id);
        }
        if let Some((old, new)) = transition {
            self.fire(old, new);
        }
    }

    /// Puts a free block of a `kind` segment into cache `tag`, merging it with free neighbours
    /// of the same cache.
    pub(super) fn insert_free(&self, state: &mut State, mut idx: u32, tag: StreamId, kind: Kind) {
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

    pub(super) fn sync_locked(&self, state: &mut State, stream: StreamId) {
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
}
