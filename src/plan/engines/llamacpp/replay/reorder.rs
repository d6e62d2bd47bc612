//! ggml-vulkan's reordering of each split it runs before the split's compute buffer is reserved
//! (`ggml_vk_graph_optimize`, on unless `GGML_VK_DISABLE_GRAPH_OPTIMIZE` is set): from the first
//! node not yet placed, the nodes within the next 20 that depend on nothing left behind are
//! pulled forward beside it (a norm's multiply, a RoPE with its cache write, a bias add with its
//! product kept next to what they fuse with), then the views whose sources are placed; fusion
//! patterns found at the front are kept together. What the allocator then sees is this order,
//! so the tensors' lifetimes, and the buffer, change with it.

use std::collections::HashSet;

use super::graph::{Graph, Op};

/// How far ahead of the first unplaced node the reordering looks.
const AHEAD: usize = 20;
/// How far ahead a node fused with a pulled one is looked for.
const FUSE_AHEAD: usize = 15;
/// `GGML_MAX_SRC`.
const MAX_SRC: usize = 10;

use Op::{Add, Mul, Rope, SsmConv, SumRows, Unary, View};
use Op::{AddId, ArgSort, Clamp, Div, GetRows, MulMat, MulMatId, Reshape, SetRows, SoftMax};

const TOPK_MOE_EARLY_SOFTMAX_NORM: &[Op] = &[
    SoftMax, Reshape, ArgSort, View, GetRows, Reshape, SumRows, Clamp, Div, Reshape,
];
const TOPK_MOE_SIGMOID_NORM_BIAS: &[Op] = &[
    Unary, Reshape, Add, ArgSort, View, GetRows, Reshape, SumRows, Clamp, Div, Reshape,
];
const TOPK_MOE_EARLY_SOFTMAX: &[Op] = &[SoftMax, Reshape, ArgSort, View, GetRows];
const TOPK_MOE_LATE_SOFTMAX: &[Op] = &[ArgSort, View, GetRows, Reshape, SoftMax, Reshape];
/// How many of [`KEPT`] are routers'.
const ROUTING: usize = 4;

const RMS_NORM_MUL_ADD_MUL: &[Op] = &[Op::RmsNorm, Mul, Add, Mul];
const RMS_NORM_MUL_ADD: &[Op] = &[Op::RmsNorm, Mul, Add];
const RMS_NORM_MUL_ROPE_VIEW_SET_ROWS: &[Op] = &[Op::RmsNorm, Mul, Rope, View, SetRows];
const RMS_NORM_VIEW_SET_ROWS: &[Op] = &[Op::RmsNorm, View, SetRows];
const ROPE_VIEW_SET_ROWS: &[Op] = &[Rope, View, SetRows];

/// The patterns kept together where they stand at the front, in ggml's order of trying them;
/// the first [`ROUTING`] are a router's, whose inputs ggml-vulkan keeps alive to the end of the
/// pattern (`add_pattern_alloc_deps`: its fused kernel reads them there).
const KEPT: [&[Op]; 9] = [
    TOPK_MOE_EARLY_SOFTMAX_NORM,
    TOPK_MOE_SIGMOID_NORM_BIAS,
    TOPK_MOE_EARLY_SOFTMAX,
    TOPK_MOE_LATE_SOFTMAX,
    RMS_NORM_MUL_ADD_MUL,
    RMS_NORM_MUL_ADD,
    RMS_NORM_MUL_ROPE_VIEW_SET_ROWS,
    RMS_NORM_VIEW_SET_ROWS,
    ROPE_VIEW_SET_ROWS,
];

/// One split being reordered.
struct Split<'a> {
    g: &'a Graph,
    nodes: &'a [usize],
    used: Vec<bool>,
    /// Tensors placed so far (`used_node_set`).
    placed: HashSet<usize>,
    order: Vec<usize>,
    /// Tensors kept allocated until a node has run: `(node, kept)`.
    deps: Vec<(usize, usize)>,
    first: usize,
    /// How many times each tensor is read in the whole graph (`use_counts`).
    uses: &'a [usize],
}

/// How many times each tensor of `g` is a source of one of its nodes.
pub(super) fn use_counts(g: &Graph) -> Vec<usize> {
    let mut uses = vec![0usize; g.tensors.len()];
    for &n in &g.nodes {
        for &s in &g.tensors[n].srcs {
            uses[s] += 1;
        }
    }
    uses
}

/// `nodes` (one split of `g`, in graph order) as ggml-vulkan reorders them, and the tensors it
/// keeps allocated until a node has run, as `(node, kept)`.
pub(super) fn reorder(
    g: &Graph,
    nodes: &[usize],
    uses: &[usize],
) -> (Vec<usize>, Vec<(usize, usize)>) {
    let mut s = Split {
        g,
        nodes,
        used: vec![false; nodes.len()],
        placed: HashSet::new(),
        order: Vec::with_capacity(nodes.len()),
        deps: Vec::new(),
        first: 0,
        uses,
    };
    while s.first < nodes.len() {
        if KEPT.iter().enumerate().any(|(i, p)| s.keep(p, i < ROUTING)) {
            continue;
        }
        let mut set = s.independent();
        s.views(&mut set);
        for c in set {
            s.place(c);
        }
        s.advance();
    }
    (s.order, s.deps)
}

impl Split<'_> {
    fn op(&self, i: usize) -> Op {
        self.g.tensors[self.nodes[i]].op
    }

    fn empty(&self, i: usize) -> bool {
        self.op(i).is_empty()
    }

    fn src(&self, i: usize, s: usize) -> Option<usize> {
        self.g.tensors[self.nodes[i]].srcs.get(s).copied()
    }

    fn base(&self, t: usize) -> usize {
        self.g.tensors[t].view_src.unwrap_or(t)
    }

    /// Whether node `dst` reads what node `src` writes (`is_src_of`): a source, a view of the
    /// same memory, or memory `src` still reads.
    fn is_src_of(&self, dst: usize, src: usize) -> bool {
        let (d, s) = (self.nodes[dst], self.nodes[src]);
        let (dt, st) = (&self.g.tensors[d], &self.g.tensors[s]);
        let either_empty = dt.op.is_empty() || st.op.is_empty();
        for k in 0..MAX_SRC {
            let ds = dt.srcs.get(k).copied();
            if ds == Some(s) {
                return true;
            }
            if either_empty {
                continue;
            }
            if ds.is_some_and(|x| self.base(x) == self.base(s)) {
                return true;
            }
            if st
                .srcs
                .get(k)
                .is_some_and(|&x| self.base(d) == self.base(x))
            {
                return true;
            }
        }
        self.base(d) == self.base(s)
    }

    fn matches(&self, pattern: &[Op], start: usize) -> bool {
        start + pattern.len() <= self.nodes.len()
            && pattern
                .iter()
                .enumerate()
                .all(|(j, &op)| self.op(start + j) == op && !self.used[start + j])
    }

    fn place(&mut self, i: usize) {
        self.order.push(self.nodes[i]);
        self.placed.insert(self.nodes[i]);
        self.used[i] = true;
    }

    fn advance(&mut self) {
        while self.first < self.nodes.len() && self.used[self.first] {
            self.first += 1;
        }
    }

    /// A fusion pattern at the front: placed as it stands; a router's with its inputs kept
    /// to its end (or to the scale after it, which its kernel fuses too).
    fn keep(&mut self, pattern: &[Op], router: bool) -> bool {
        if !self.matches(pattern, self.first) {
            return false;
        }
        if router {
            let mut last = self.first + pattern.len() - 1;
            if last + 1 < self.nodes.len() && self.op(last + 1) == Op::Scale {
                last += 1;
            }
            let until = self.nodes[last];
            let mut seen = HashSet::new();
            for j in 0..pattern.len() {
                let n = self.nodes[self.first + j];
                for &src in &self.g.tensors[n].srcs {
                    if seen.insert(src) && !self.deps.contains(&(until, src)) {
                        self.deps.push((until, src));
                    }
                }
                seen.insert(n);
            }
        }
        for j in 0..pattern.len() {
            self.place(self.first + j);
        }
        self.advance();
        true
    }

    fn empty_or_placed(&self, lo: usize, hi: usize) -> bool {
        (lo..hi).all(|v| self.used[v] || self.empty(v))
    }

    /// Whether node `j` may join a set ending in `last` although it reads node `c` (a pair
    /// ggml-vulkan fuses).
    fn fuses(&self, c: usize, j: usize, last: usize) -> bool {
        if c != last {
            return false;
        }
        let (oc, oj) = (self.op(c), self.op(j));
        let between = self.empty_or_placed(c + 1, j);
        match (oc, oj) {
            (Op::RmsNorm | Unary, Mul) => between,
            (MulMat, Add) | (MulMatId, AddId | Mul) | (Add, Add) | (SsmConv, Add | Unary) => {
                j == c + 1
            }
            _ => false,
        }
    }

    /// The first unplaced node and those of the next [`AHEAD`] that depend on no node left
    /// behind, with what fuses with them pulled in.
    fn independent(&mut self) -> Vec<usize> {
        let first = self.first;
        let mut set = vec![first];
        let end = (first + AHEAD).min(self.nodes.len());
        for j in first + 1..end {
            if self.used[j] || self.empty(j) || KEPT.iter().any(|p| self.matches(p, j)) {
                continue;
            }
            let last = *set.last().unwrap_or(&first);
            let blocked = (first..j)
                .any(|c| !self.used[c] && self.is_src_of(j, c) && !self.fuses(c, j, last));
            if blocked {
                continue;
            }
            set.push(j);
            self.pull(j, &mut set);
        }
        set
    }

    /// After `j` joined the set: the nodes ggml-vulkan fuses with it, pulled in beside it.
    fn pull(&mut self, j: usize, set: &mut Vec<usize>) {
        let mut rope = j;
        if j > 0 && self.op(j) == Mul && self.op(j - 1) == Op::RmsNorm {
            if let Some(k) = self.find(j, |s, k| {
                s.op(k) == Rope
                    && s.src(k, 0) == Some(s.nodes[j])
                    && s.src(k, 1).is_some_and(|p| s.g.tensors[p].op == Op::None)
                    && s.src(k, 2).is_none_or(|f| s.g.tensors[f].op == Op::None)
            }) {
                rope = k;
                set.push(k);
                self.used[k] = true;
            }
        }
        if matches!(self.op(rope), Rope | Op::RmsNorm) {
            self.pull_cache_write(rope, set);
        }
        let prev = if j > 0 { Some(self.op(j - 1)) } else { None };
        let operand_ready = |s: &Self, k: usize| {
            s.src(k, 0) == Some(s.nodes[j])
                && s.src(k, 1)
                    .is_some_and(|o| s.g.tensors[o].op == Op::None || s.placed.contains(&o))
        };
        let fused = match (prev, self.op(j)) {
            (Some(MulMatId), AddId) => self.find(j, |s, k| s.op(k) == Mul && operand_ready(s, k)),
            (Some(MulMat), Add) => self.find(j, |s, k| s.op(k) == Add && operand_ready(s, k)),
            (Some(SsmConv), Add) => self.find(j, |s, k| {
                s.op(k) == Unary && s.src(k, 0) == Some(s.nodes[j])
            }),
            (_, Unary) => self.find(j, |s, k| s.unary_mul(j, k)),
            _ => None,
        };
        if let Some(k) = fused {
            set.push(k);
            self.used[k] = true;
        }
    }

    /// The first node within [`FUSE_AHEAD`] after `j` that `test` accepts.
    fn find(&self, j: usize, test: impl Fn(&Self, usize) -> bool) -> Option<usize> {
        (j + 1..(j + FUSE_AHEAD).min(self.nodes.len())).find(|&k| test(self, k))
    }

    /// A multiply of the activation at `j` by a weight or a placed tensor.
    fn unary_mul(&self, j: usize, k: usize) -> bool {
        if self.op(k) != Mul {
            return false;
        }
        let (a, b) = (self.src(k, 0), self.src(k, 1));
        let other = if a == Some(self.nodes[j]) {
            b
        } else if b == Some(self.nodes[j]) {
            a
        } else {
            return false;
        };
        other.is_some_and(|o| self.g.tensors[o].op == Op::None || self.placed.contains(&o))
    }

    /// A RoPE's (or norm's) write into the KV cache through a view, pulled in beside it when
    /// nothing else reads the two and nothing between them feeds the write.
    fn pull_cache_write(&mut self, at: usize, set: &mut Vec<usize>) {
        let end = (at + FUSE_AHEAD).min(self.nodes.len());
        let mut view = None;
        let mut write = None;
        for k in at + 1..end {
            if self.used[k] {
                continue;
            }
            match view {
                None if self.op(k) == View && self.src(k, 0) == Some(self.nodes[at]) => {
                    view = Some(k);
                }
                Some(v) if self.op(k) == SetRows && self.src(k, 0) == Some(self.nodes[v]) => {
                    write = Some(k);
                    break;
                }
                _ => {}
            }
        }
        let (Some(v), Some(w)) = (view, write) else {
            return;
        };
        let alone = self.fusable(&[at, v, w], w)
            && (at + 1..w)
                .all(|c| self.used[c] || c == v || self.empty(c) || !self.is_src_of(w, c));
        if alone {
            set.extend([v, w]);
            self.used[v] = true;
            self.used[w] = true;
        }
    }

    /// `ggml_can_fuse_subgraph_ext`: every node of `idxs` but `output` is read only inside
    /// them, is no graph output, and views only what they hold.
    fn fusable(&self, idxs: &[usize], output: usize) -> bool {
        idxs.iter().enumerate().all(|(i, &n)| {
            if n == output {
                return true;
            }
            let t = &self.g.tensors[self.nodes[n]];
            if t.output {
                return false;
            }
            let inside: usize = idxs[i + 1..]
                .iter()
                .map(|&o| {
                    let srcs = &self.g.tensors[self.nodes[o]].srcs;
                    srcs.iter().filter(|&&s| s == self.nodes[n]).count()
                })
                .sum();
            inside == self.uses[self.nodes[n]]
                && t.view_src.is_none_or(|v| {
                    idxs.iter().any(|&o| self.nodes[o] == v) || self.g.tensors[v].external
                })
        })
    }

    /// The views among the next [`AHEAD`] whose sources are placed or in `set` (not after an
    /// add, which fuses with what follows it).
    fn views(&self, set: &mut Vec<usize>) {
        let first = self.first;
        let last = *set.last().unwrap_or(&first);
        if self.op(last) == Add {
            return;
        }
        let end = (first + AHEAD).min(self.nodes.len());
        for j in first + 1..end {
            if self.used[j] || !self.empty(j) || set.contains(&j) {
                continue;
            }
            let ready =
                (first..j).all(|c| self.used[c] || !self.is_src_of(j, c) || set.contains(&c));
            if ready {
                set.push(j);
            }
        }
    }
}
