//! ggml's graph allocator (`ggml-alloc.c`): each tensor placed best fit over the free blocks,
//! the last block of a chunk growing it, freed after its last consumer; a buffer type with a
//! largest buffer (ggml-vulkan's 1 GiB blocks) is filled chunk by chunk.

use super::graph::{BufferRules, Graph, Kind, UNBOUNDED};

/// Where a tensor sits: its chunk and its offset there.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Addr {
    pub(super) chunk: usize,
    pub(super) offset: u64,
}

/// A chunk ggml allocates in: free blocks sorted by offset (the last one growing the chunk up
/// to its bound) and its high-water mark, which is the buffer allocated for it.
#[derive(Debug)]
pub(super) struct Chunk {
    pub(super) free: Vec<(u64, u64)>,
    pub(super) high: u64,
}

/// ggml's dynamic tensor allocator (`ggml_dyn_tallocr`) over one buffer type.
#[derive(Debug)]
pub(super) struct Blocks {
    pub(super) chunks: Vec<Chunk>,
    alignment: u64,
    max_chunk: u64,
}

/// `GGML_VBUFFER_MAX_CHUNKS`: the last chunk ggml allows is unbounded.
const MAX_CHUNKS: usize = 16;

impl Blocks {
    pub(super) fn new(alignment: u64, max_chunk: u64) -> Self {
        Blocks {
            chunks: Vec::new(),
            alignment,
            max_chunk: max_chunk.min(UNBOUNDED),
        }
    }

    pub(super) fn aligned(&self, bytes: u64) -> u64 {
        bytes.div_ceil(self.alignment) * self.alignment
    }

    /// The buffer reserved: every chunk's high-water mark.
    pub(super) fn total(&self) -> u64 {
        self.chunks.iter().map(|c| c.high).sum()
    }

    pub(super) fn alloc(&mut self, bytes: u64) -> Addr {
        let size = self.aligned(bytes);
        let (c, i) = self
            .best_fit(size)
            .or_else(|| self.best_last(size))
            .unwrap_or_else(|| self.new_chunk(size));
        let chunk = &mut self.chunks[c];
        let offset = chunk.free[i].0;
        chunk.free[i].0 += size;
        chunk.free[i].1 -= size;
        if chunk.free[i].1 == 0 {
            chunk.free.remove(i);
        }
        chunk.high = chunk.high.max(offset + size);
        Addr { chunk: c, offset }
    }

    /// The smallest block that fits among every chunk's blocks but its last; ggml's search
    /// starts over in each chunk, so a later chunk's fit wins over an earlier one's.
    fn best_fit(&self, size: u64) -> Option<(usize, usize)> {
        let mut best = None;
        for (c, chunk) in self.chunks.iter().enumerate() {
            let mut best_size = u64::MAX;
            let inner = chunk.free.len().saturating_sub(1);
            for (i, &(_, len)) in chunk.free[..inner].iter().enumerate() {
                if len >= size && len <= best_size {
                    best = Some((c, i));
                    best_size = len;
                }
            }
        }
        best
    }

    /// A chunk's last block: the one that grows its chunk least, else the one that leaves
    /// least of its chunk unused.
    fn best_last(&self, size: u64) -> Option<(usize, usize)> {
        let mut best = None;
        let mut best_reuse = i128::MIN;
        for (c, chunk) in self.chunks.iter().enumerate() {
            let Some(&(offset, len)) = chunk.free.last() else {
                continue;
            };
            let reuse = i128::from(chunk.high) - i128::from(offset) - i128::from(size);
            let better_reuse = best_reuse < 0 && reuse > best_reuse;
            let better_fit = reuse >= 0 && reuse < best_reuse;
            if len >= size && (better_reuse || better_fit) {
                best = Some((c, chunk.free.len() - 1));
                best_reuse = reuse;
            }
        }
        best
    }

    fn new_chunk(&mut self, size: u64) -> (usize, usize) {
        let bound = if self.chunks.len() == MAX_CHUNKS - 1 {
            UNBOUNDED
        } else {
            size.max(self.max_chunk)
        };
        self.chunks.push(Chunk {
            free: vec![(0, bound)],
            high: 0,
        });
        (self.chunks.len() - 1, 0)
    }

    pub(super) fn release(&mut self, at: Addr, bytes: u64) {
        let size = self.aligned(bytes);
        let free = &mut self.chunks[at.chunk].free;
        let offset = at.offset;
        for i in 0..free.len() {
            let (start, len) = free[i];
            if start + len == offset {
                free[i].1 += size;
                if i + 1 < free.len() && free[i].0 + free[i].1 == free[i + 1].0 {
                    free[i].1 += free[i + 1].1;
                    free.remove(i + 1);
                }
                return;
            }
            if offset + size == start {
                free[i].0 = offset;
                free[i].1 += size;
                if i > 0 && free[i - 1].0 + free[i - 1].1 == offset {
                    free[i - 1].1 += free[i].1;
                    free.remove(i);
                }
                return;
            }
        }
        let at = free.partition_point(|&(start, _)| start < offset);
        free.insert(at, (offset, size));
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct Slot {
    allocated: bool,
    children: u32,
    views: u32,
    at: Addr,
}

/// The buffer ggml's graph allocator reserves for `g` (`ggml_gallocr_reserve`) in a buffer
/// placed by `rules`: the sum of its chunks.
pub(super) fn reserve(g: &Graph, rules: BufferRules) -> u64 {
    let mut blocks = Blocks::new(rules.alignment, rules.max_chunk);
    let mut slots = vec![Slot::default(); g.tensors.len()];
    let size = |i: usize| rules.alloc_size(&g.tensors[i]);
    let allocate = |i: usize, slots: &mut [Slot], blocks: &mut Blocks| {
        let t = &g.tensors[i];
        if t.external || slots[i].allocated || t.view_src.is_some() {
            return;
        }
        slots[i].allocated = true;
        if t.kind == Kind::InPlace {
            for &p in &t.srcs {
                let parent = &g.tensors[p];
                // Only memory the allocator placed itself (never a view's), never an output,
                // only of the same layout, and only when this op is the parent's last use.
                if !slots[p].allocated || parent.output || parent.layout != t.layout {
                    continue;
                }
                if slots[p].children == 1 && slots[p].views == 0 {
                    slots[i].at = slots[p].at;
                    slots[p].allocated = false;
                    let (had, needs) = (blocks.aligned(size(p)), blocks.aligned(size(i)));
                    if had > needs {
                        let tail = Addr {
                            offset: slots[p].at.offset + needs,
                            ..slots[p].at
                        };
                        blocks.release(tail, had - needs);
                    }
                    return;
                }
            }
        }
        slots[i].at = blocks.alloc(size(i));
    };
    for &leaf in &g.leafs {
        allocate(leaf, &mut slots, &mut blocks);
    }
    for &n in &g.nodes {
        if let Some(root) = g.tensors[n].view_src {
            slots[root].views += 1;
        }
        if g.tensors[n].input {
            allocate(n, &mut slots, &mut blocks);
        }
        for &s in &g.tensors[n].srcs {
            slots[s].children += 1;
            if g.tensors[s].input {
                allocate(s, &mut slots, &mut blocks);
            }
        }
    }
    for &n in &g.nodes {
        for &p in &g.tensors[n].srcs {
            allocate(p, &mut slots, &mut blocks);
        }
        allocate(n, &mut slots, &mut blocks);
        for &p in &g.tensors[n].srcs {
            slots[p].children -= 1;
            if slots[p].children != 0 || slots[p].views != 0 {
                continue;
            }
            match g.tensors[p].view_src {
                Some(root) => {
                    slots[root].views -= 1;
                    if slots[root].views == 0
                        && slots[root].children == 0
                        && slots[root].allocated
                        && !g.tensors[root].output
                    {
                        blocks.release(slots[root].at, size(root));
                        slots[root].allocated = false;
                    }
                }
                None if slots[p].allocated && !g.tensors[p].output => {
                    blocks.release(slots[p].at, size(p));
                    slots[p].allocated = false;
                }
                None => {}
            }
        }
    }
    blocks.total()
}
