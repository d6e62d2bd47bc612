//! Blocks: the pool's bookkeeping records (apart from the device's segments), their free
//! sets per size class, and the table they live in, grown and recycled without allocating on
//! the hot path.

use super::*;

#[derive(Debug, Clone)]
pub(super) struct Block {
    pub(super) segment: u32,
    pub(super) offset: u64,
    pub(super) size: u64,
    /// The bytes the live allocation asked for (meaningless while free).
    pub(super) requested: u64,
    pub(super) prev: u32,
    pub(super) next: u32,
    pub(super) allocated: bool,
    /// For a live block: the stream using it. For a free block: the cache it sits in
    /// (a stream id, or GLOBAL).
    pub(super) stream: StreamId,
    /// Bumped on every allocation of the block; a handle holds the one it was made with.
    pub(super) generation: u32,
    /// The live allocation's id ([`BufferId::UNASSIGNED`] until a tracker or [`Pool::info`]
    /// needs one; meaningless while free).
    pub(super) id: u64,
    /// Neighbours in its cache's free list, while free.
    pub(super) free_prev: u32,
    pub(super) free_next: u32,
}

impl Block {
    /// A free block of `size` bytes at `offset` in segment `segment`, after `prev` and last in
    /// it, tagged with cache `stream`, in no free set yet.
    pub(super) fn free(segment: u32, offset: u64, size: u64, prev: u32, stream: StreamId) -> Self {
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

/// Free blocks of one cache, by pool (indexed by [`Kind`]), in O(1) segregated-fit indexes.
#[derive(Debug, Default)]
pub(super) struct FreeSets(pub(super) [FreeIndex; 2]);

impl FreeSets {
    #[inline(always)]
    pub(super) fn of(&mut self, kind: Kind) -> &mut FreeIndex {
        &mut self.0[kind as usize]
    }

    pub(super) fn largest(&self, blocks: &(impl Links + ?Sized)) -> u64 {
        self.0[0].largest(blocks).max(self.0[1].largest(blocks))
    }
}

/// The last block of the segment whose first block is `head` (NIL for none).
pub(super) fn tail_of(state: &State, head: u32) -> u32 {
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
#[expect(
    clippy::cast_possible_truncation,
    reason = "2^32 blocks of at least 512 B would need a 128 GiB block table"
)]
pub(super) fn add_spare_blocks(state: &mut State) {
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
pub(super) fn new_block(state: &mut State, mut block: Block) -> u32 {
    if state.spare_blocks.is_empty() {
        add_spare_blocks(state);
    }
    let i = state.spare_blocks.pop().unwrap_or(NIL);
    block.generation = state.blocks[i as usize].generation;
    state.blocks[i as usize] = block;
    i
}

pub(super) fn recycle_block(state: &mut State, idx: u32) {
    recycle(&mut state.blocks, &mut state.spare_blocks, idx);
}

#[inline(always)]
pub(super) fn recycle(blocks: &mut [Block], spare: &mut Vec<u32>, idx: u32) {
    let b = &mut blocks[idx as usize];
    b.generation = b.generation.wrapping_add(1);
    b.allocated = false;
    b.prev = NIL;
    b.next = NIL;
    spare.push(idx);
}

/// Merges free block `next` into its left neighbour `prev`.
#[inline(always)]
pub(super) fn merge_blocks(blocks: &mut [Block], spare: &mut Vec<u32>, prev: u32, next: u32) {
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
