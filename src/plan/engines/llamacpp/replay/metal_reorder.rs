//! ggml-metal's reordering of each split it runs, before the split's compute buffer is
//! reserved (`ggml_graph_optimize` in `ggml-metal-common.cpp`, on unless
//! `GGML_METAL_GRAPH_OPTIMIZE_DISABLE` is set), read from the source the llama.cpp of
//! llama-cpp-python 0.3.36 vendors: the nodes its kernels fuse are packed together first
//! ([`super::metal_fusion`]'s patterns, checked as its structural pass checks them); then,
//! wherever a node must wait for the set of nodes that may run concurrently before it, the next
//! 64 nodes are searched for ones that read and write nothing the set or the skipped nodes
//! write (or read, for a write), and those join the set ahead of it. A node pulled ahead is
//! allocated earlier, so the tensors' lives, and the buffer, change with it.

use super::graph::{Graph, Op};

/// How far ahead of a waiting node its concurrent companions are looked for (`N_FORWARD`).
const AHEAD: usize = 64;

/// The ops ggml-metal moves across others (`h_safe`); views and the like always.
fn movable(op: Op) -> bool {
    use Op::*;
    op.is_empty()
        || matches!(
            op,
            MulMat
                | MulMatId
                | Rope
                | Norm
                | RmsNorm
                | SumRows
                | SsmConv
                | Clamp
                | Mul
                | Add
                | Div
                | Glu
                | Scale
                | Unary
                | GetRows
                | SetRows
                | Cpy
                | Cont
        )
}

/// One split's nodes.
struct Split<'a> {
    g: &'a Graph,
    nodes: &'a [usize],
}

impl Split<'_> {
    fn op(&self, i: usize) -> Op {
        self.g.tensors[self.nodes[i]].op
    }

    fn srcs(&self, i: usize) -> &[usize] {
        &self.g.tensors[self.nodes[i]].srcs
    }

    /// The memory a tensor stands for: its own, or what it views.
    fn base(&self, t: usize) -> usize {
        self.g.tensors[t].view_src.unwrap_or(t)
    }
}

/// `nodes` (one split of `g`, in graph order) as ggml-metal reorders them; `uses` counts each
/// tensor's readers in the whole graph.
pub(super) fn reorder(g: &Graph, nodes: &[usize], uses: &[usize]) -> Vec<usize> {
    let s = Split { g, nodes };
    let groups = super::metal_fusion::groups(g, nodes, uses);
    let mut out = Vec::with_capacity(nodes.len());
    let mut used = vec![false; groups.len()];
    let mut set = Ranges::default();
    let mut skipped = Ranges::default();
    for i0 in 0..groups.len() {
        if used[i0] {
            continue;
        }
        let first = &groups[i0];
        if !s.op(first[0]).is_empty() && !set.admits(&s, first) {
            skipped.clear();
            skipped.add(&s, first);
            for i1 in i0 + 1..(i0 + AHEAD).min(groups.len()) {
                if used[i1] {
                    continue;
                }
                let next = &groups[i1];
                if !movable(s.op(next[0])) {
                    break;
                }
                let empty = s.op(next[0]).is_empty();
                if (empty || set.admits(&s, next)) && skipped.admits(&s, next) {
                    set.add(&s, next);
                    out.extend(next.iter().map(|&p| nodes[p]));
                    used[i1] = true;
                } else {
                    skipped.add(&s, next);
                }
            }
            set.clear();
        }
        set.add(&s, first);
        out.extend(first.iter().map(|&p| nodes[p]));
    }
    out
}

/// The memory a set of nodes reads and writes (`ggml_mem_ranges`): a tensor's memory is its
/// base tensor's, and the KV cache's K and V of one layer, which llama.cpp allocates side by
/// side, overlap (ggml-metal's test counts touching ranges as overlapping).
#[derive(Default)]
struct Ranges {
    reads: Vec<usize>,
    writes: Vec<usize>,
}

impl Ranges {
    fn clear(&mut self) {
        self.reads.clear();
        self.writes.clear();
    }

    /// A run's external reads (what none of its nodes makes) and all its nodes' writes.
    fn parts(s: &Split<'_>, run: &[usize]) -> (Vec<usize>, Vec<usize>) {
        let made: Vec<usize> = run.iter().map(|&p| s.nodes[p]).collect();
        let reads = run
            .iter()
            .flat_map(|&p| s.srcs(p).iter().copied())
            .filter(|t| !made.contains(t))
            .map(|t| s.base(t))
            .collect();
        let writes = made.iter().map(|&t| s.base(t)).collect();
        (reads, writes)
    }

    fn add(&mut self, s: &Split<'_>, run: &[usize]) {
        let (r, w) = Self::parts(s, run);
        self.reads.extend(r);
        self.writes.extend(w);
    }

    /// Whether `run` may run beside this set: it reads nothing the set writes, and writes
    /// nothing the set reads or writes.
    fn admits(&self, s: &Split<'_>, run: &[usize]) -> bool {
        let (r, w) = Self::parts(s, run);
        let hits = |a: usize, b: usize| a == b || neighbours(s.g, a, b);
        r.iter().all(|&a| self.writes.iter().all(|&b| !hits(a, b)))
            && w.iter()
                .all(|&a| self.reads.iter().chain(&self.writes).all(|&b| !hits(a, b)))
    }
}

/// A layer's K and V cache, made one after the other and allocated side by side.
fn neighbours(g: &Graph, a: usize, b: usize) -> bool {
    let cache = |t: usize| g.tensors[t].external && g.tensors[t].weight.is_none();
    a.abs_diff(b) == 1 && cache(a) && cache(b)
}
