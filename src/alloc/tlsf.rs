//! Two-level segregated fit (TLSF) index of free blocks: insert, remove and find in O(1).
//!
//! Sizes are binned by their power of two (first level) and by 32 equal steps within it (second
//! level), so a bin spans at most 1/32 of its sizes (3 %). Two bitmaps say which bins hold
//! blocks, so a search is two find-first-set operations. The lists are intrusive: the blocks'
//! own `free_prev`/`free_next` fields (through [`Links`]), so the index allocates nothing per
//! block, and only the rows of sizes it has seen.
//!
//! A search first looks at a few blocks of the request's own bin, where an exact fit usually
//! sits when sizes repeat (plain TLSF rounds the request up to the next bin and so never takes
//! them), then takes the head of the next non-empty bin, whose every block fits.

/// The list terminator.
pub(crate) const NIL: u32 = u32::MAX;

const SL_BITS: u32 = 5;
const SL_COUNT: u64 = 1 << SL_BITS;
const SL_ROW: usize = 1 << SL_BITS;
/// First-level rows: sizes below 32 share row 0; row r ≥ 1 holds [2^(r+4), 2^(r+5)).
const ROWS: usize = 64 - SL_BITS as usize + 1;
/// Blocks of the request's own bin examined before moving to the next bin.
const OWN_BIN_PROBES: usize = 8;

/// Access to the blocks an index links together.
pub(crate) trait Links {
    /// Size of block `i`.
    fn size(&self, i: u32) -> u64;
    /// `(prev, next)` of block `i` in its free list.
    fn links(&self, i: u32) -> (u32, u32);
    /// Sets block `i`'s previous link.
    fn set_prev(&mut self, i: u32, prev: u32);
    /// Sets block `i`'s next link.
    fn set_next(&mut self, i: u32, next: u32);
}

#[derive(Debug, Clone)]
struct Row {
    bits: u32,
    heads: [u32; SL_ROW],
}

/// The free blocks of one cache.
#[derive(Debug, Clone)]
pub(crate) struct FreeIndex {
    rows_with_blocks: u64,
    /// Where each first-level row lives in `rows` (`u8::MAX`: never used), so an index that
    /// only ever sees a few sizes stays small (a trace may give every stream its own index).
    slot: [u8; ROWS],
    rows: Vec<Row>,
    len: usize,
}

impl Default for FreeIndex {
    fn default() -> Self {
        FreeIndex {
            rows_with_blocks: 0,
            slot: [u8::MAX; ROWS],
            rows: Vec::new(),
            len: 0,
        }
    }
}

/// The bin holding `size`: (row, column).
#[inline(always)]
#[expect(
    clippy::cast_possible_truncation,
    reason = "usize is 64 bits (lib.rs refuses other targets)"
)]
fn bin(size: u64) -> (usize, usize) {
    if size < SL_COUNT {
        return (0, size as usize);
    }
    let fl = 63 - size.leading_zeros();
    let row = (fl - SL_BITS + 1) as usize;
    let col = ((size >> (fl - SL_BITS)) - SL_COUNT) as usize;
    (row, col)
}

impl FreeIndex {
    /// Free blocks held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    fn row(&self, r: usize) -> Option<&Row> {
        self.rows.get(self.slot[r] as usize)
    }

    #[inline(always)]
    #[expect(
        clippy::cast_possible_truncation,
        reason = "at most 64 first-level rows; usize is 64 bits (lib.rs refuses other targets)"
    )]
    fn row_mut(&mut self, r: usize) -> &mut Row {
        if self.slot[r] == u8::MAX {
            self.slot[r] = self.rows.len() as u8;
            self.rows.push(Row {
                bits: 0,
                heads: [NIL; SL_ROW],
            });
        }
        &mut self.rows[self.slot[r] as usize]
    }

    /// Adds free block `i` (not already in any index).
    #[inline(always)]
    pub(crate) fn insert(&mut self, links: &mut (impl Links + ?Sized), i: u32) {
        let (r, c) = bin(links.size(i));
        let row = self.row_mut(r);
        let head = row.heads[c];
        row.heads[c] = i;
        row.bits |= 1 << c;
        self.rows_with_blocks |= 1 << r;
        self.len += 1;
        links.set_prev(i, NIL);
        links.set_next(i, head);
        if head != NIL {
            links.set_prev(head, i);
        }
    }

    /// Takes block `i` out. It must be in this index with the size it was inserted with.
    #[inline(always)]
    pub(crate) fn remove(&mut self, links: &mut (impl Links + ?Sized), i: u32) {
        let (r, c) = bin(links.size(i));
        self.unlink(links, i, r, c);
    }

    /// Takes block `i`, which is in bin (r, c), out.
    #[inline(always)]
    fn unlink(&mut self, links: &mut (impl Links + ?Sized), i: u32, r: usize, c: usize) {
        let (prev, next) = links.links(i);
        if next != NIL {
            links.set_prev(next, prev);
        }
        if prev != NIL {
            links.set_next(prev, next);
        } else {
            let slot = self.slot[r] as usize;
            let row = &mut self.rows[slot];
            row.heads[c] = next;
            if next == NIL {
                row.bits &= !(1 << c);
                if row.bits == 0 {
                    self.rows_with_blocks &= !(1 << r);
                }
            }
        }
        self.len -= 1;
    }

    /// A block of at least `size` bytes from `size`'s own bin or else the next non-empty one
    /// (so at most one bin's width, 3 %, above the smallest such block unless the own bin is
    /// long); `None` when no block is that large. The block stays in the index.
    #[cfg(test)]
    pub(crate) fn find(&self, links: &(impl Links + ?Sized), size: u64) -> Option<u32> {
        self.locate(links, size).map(|(i, _, _)| i)
    }

    /// The block [`FreeIndex::find`] would give, taken out of the index, unless it is larger
    /// than `max` bytes (then nothing is taken).
    #[inline(always)]
    pub(crate) fn take(
        &mut self,
        links: &mut (impl Links + ?Sized),
        size: u64,
        max: u64,
    ) -> Option<u32> {
        let (i, r, c) = self.locate(links, size)?;
        if links.size(i) > max {
            return None;
        }
        self.unlink(links, i, r, c);
        Some(i)
    }

    /// `find`'s block and its bin.
    #[inline(always)]
    fn locate(&self, links: &(impl Links + ?Sized), size: u64) -> Option<(u32, usize, usize)> {
        if self.rows_with_blocks == 0 {
            return None;
        }
        let (r, c) = bin(size);
        let mut i = NIL;
        if self.rows_with_blocks & (1 << r) != 0 {
            if let Some(row) = self.row(r) {
                i = row.heads[c];
                for _ in 0..OWN_BIN_PROBES {
                    if i == NIL {
                        break;
                    }
                    if links.size(i) >= size {
                        return Some((i, r, c));
                    }
                    i = links.links(i).1;
                }
                // Every block in a later bin of the row fits.
                let above = row.bits & ((u32::MAX - 1) << c);
                if above != 0 {
                    let c = above.trailing_zeros() as usize;
                    return Some((row.heads[c], r, c));
                }
            }
        }
        let rows_above = self.rows_with_blocks & ((u64::MAX - 1) << r);
        if rows_above != 0 {
            let r = rows_above.trailing_zeros() as usize;
            let row = self.row(r)?;
            let c = row.bits.trailing_zeros() as usize;
            return Some((row.heads[c], r, c));
        }
        // Nothing larger anywhere: the rest of the own bin is the last chance.
        while i != NIL {
            if links.size(i) >= size {
                return Some((i, r, c));
            }
            i = links.links(i).1;
        }
        None
    }

    /// The largest free block's size (0 when empty): the last non-empty bin, scanned.
    pub(crate) fn largest(&self, links: &(impl Links + ?Sized)) -> u64 {
        if self.rows_with_blocks == 0 {
            return 0;
        }
        let r = 63 - self.rows_with_blocks.leading_zeros() as usize;
        let Some(row) = self.row(r) else {
            return 0;
        };
        let mut i = row.heads[31 - row.bits.leading_zeros() as usize];
        let mut largest = 0;
        while i != NIL {
            largest = largest.max(links.size(i));
            i = links.links(i).1;
        }
        largest
    }

    /// Every block in the index, emptying it.
    pub(crate) fn drain(&mut self, links: &(impl Links + ?Sized)) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.len);
        for row in &self.rows {
            let mut bits = row.bits;
            while bits != 0 {
                let c = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let mut i = row.heads[c];
                while i != NIL {
                    out.push(i);
                    i = links.links(i).1;
                }
            }
        }
        *self = FreeIndex::default();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    struct Arena {
        size: Vec<u64>,
        link: Vec<(u32, u32)>,
    }

    impl Links for Arena {
        fn size(&self, i: u32) -> u64 {
            self.size[i as usize]
        }
        fn links(&self, i: u32) -> (u32, u32) {
            self.link[i as usize]
        }
        fn set_prev(&mut self, i: u32, prev: u32) {
            self.link[i as usize].0 = prev;
        }
        fn set_next(&mut self, i: u32, next: u32) {
            self.link[i as usize].1 = next;
        }
    }

    #[test]
    fn bins_are_monotonic_and_narrow() {
        let mut last = (0, 0);
        for size in (1u64..5000)
            .chain((13..63).flat_map(|s| [(1u64 << s) - 1, 1 << s, (1 << s) + (1 << (s - 6))]))
        {
            let b = bin(size);
            assert!(b >= last, "{size}: {b:?} < {last:?}");
            last = b;
        }
        assert_eq!(bin(u64::MAX).0, ROWS - 1);
    }

    // Against a sorted set: whatever is found fits and comes from the request's own bin or the
    // next non-empty one, and nothing is missed; removal and drain keep the lists consistent.
    #[test]
    fn finds_a_near_best_fit_and_never_misses() {
        let mut rng = crate::workload::Rng::new(11);
        let n = 4000u32;
        let mut arena = Arena {
            size: (0..n).map(|_| 512 * rng.range(1, 1 << 16)).collect(),
            link: vec![(NIL, NIL); n as usize],
        };
        let mut index = FreeIndex::default();
        let mut model = BTreeSet::new();
        for step in 0..10_000u32 {
            let i = u32::try_from(rng.below(u64::from(n))).unwrap();
            if model.contains(&(arena.size[i as usize], i)) {
                index.remove(&mut arena, i);
                model.remove(&(arena.size[i as usize], i));
            } else {
                index.insert(&mut arena, i);
                model.insert((arena.size[i as usize], i));
            }
            let want = 512 * rng.range(1, 1 << 16);
            let best = model.range((want, 0)..).next().map(|b| b.0);
            let found = index.find(&arena, want).map(|i| arena.size[i as usize]);
            match (best, found) {
                (None, None) => {}
                (Some(_), Some(f)) => {
                    assert!(f >= want, "step {step}: {f} < {want}");
                    let own = bin(want);
                    let next = model.iter().map(|b| bin(b.0)).filter(|b| *b > own).min();
                    assert!(
                        bin(f) == own || Some(bin(f)) == next,
                        "step {step}: found {f} for {want}"
                    );
                }
                other => panic!("step {step}: {other:?}"),
            }
            assert_eq!(index.len(), model.len());
            let largest = model.last().map_or(0, |b| b.0);
            assert_eq!(index.largest(&arena), largest);
        }
        let mut drained = index.drain(&arena);
        drained.sort_unstable();
        let mut expected: Vec<u32> = model.iter().map(|b| b.1).collect();
        expected.sort_unstable();
        assert_eq!(drained, expected);
        assert_eq!(index.find(&arena, 1), None);
    }
}
