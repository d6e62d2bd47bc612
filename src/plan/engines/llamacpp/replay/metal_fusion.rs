//! ggml-metal's allocation dependencies (`ggml_metal_fusion_add_alloc_deps`, which its
//! `graph_optimize` runs on each split before anything else): wherever a split's nodes run
//! through one of its fusion patterns, by op alone and the longest first, everything the run
//! reads from outside it stays allocated until the run's last node, so that the fused kernel
//! reads it intact. Read from the source the llama.cpp of llama-cpp-python 0.3.36 vendors
//! (`ggml-metal-fusion.cpp`), not measured.

use super::graph::{Deps, Graph, Op};

use Op::{Add, ArgSort, Clamp, Div, GetRows, Mul, Reshape, RmsNorm, Scale, SoftMax, SumRows};
use Op::{Norm, SsmConv, Unary, View};

const NORMS: [&[Op]; 6] = [
    &[Norm, Mul],
    &[Norm, Mul, Add],
    &[Norm, Scale],
    &[RmsNorm, Mul],
    &[RmsNorm, Mul, Add],
    &[RmsNorm, Scale],
];

const ROUTERS: [&[Op]; 4] = [
    &[SoftMax, Reshape, ArgSort, View, GetRows],
    &[SoftMax, Reshape, ArgSort, View, GetRows, Scale],
    &[
        SoftMax, Reshape, ArgSort, View, GetRows, Reshape, SumRows, Clamp, Div, Reshape,
    ],
    &[
        SoftMax, Reshape, ArgSort, View, GetRows, Reshape, SumRows, Clamp, Div, Reshape, Scale,
    ],
];

/// The longest add chain ggml-metal fuses.
const ADDS_MOST: usize = 7;
/// The most experts its fused weighted sum takes (`ops_moe_reduce_8`).
const EXPERTS_MOST: usize = 8;

/// How many nodes from `at` in `nodes` run through one of ggml-metal's patterns, the longest
/// that matches (0 where none does). The weighted sum of `k` experts is a multiply, `k` views
/// and `k - 1` adds; its gated-DeltaNet cache write is not one of `g`'s ops.
fn pattern_len(g: &Graph, nodes: &[usize], at: usize) -> usize {
    let op = |k: usize| nodes.get(k).map(|&n| g.tensors[n].op);
    let matches = |p: &[Op]| p.iter().enumerate().all(|(j, &o)| op(at + j) == Some(o));
    let run = |o: Op| (0..).take_while(|&j| op(at + j) == Some(o)).count();
    let mut best = NORMS
        .iter()
        .chain(ROUTERS.iter())
        .chain([&[SsmConv, Unary][..]].iter())
        .filter(|p| matches(p))
        .map(|p| p.len())
        .max()
        .unwrap_or(0);
    let adds = run(Add).min(ADDS_MOST);
    if adds >= 2 {
        best = best.max(adds);
    }
    if op(at) == Some(Mul) {
        let views = (1..)
            .take_while(|&j| op(at + j) == Some(View))
            .count()
            .min(EXPERTS_MOST);
        if views >= 2 {
            let sums = (0..views - 1).all(|j| op(at + 1 + views + j) == Some(Add));
            if sums {
                best = best.max(2 * views);
            }
        }
    }
    best
}

/// Adds to `deps`, for each of `g`'s ggml-metal splits (`spans`), what ggml-metal keeps
/// allocated until the end of each pattern run.
pub(super) fn fusion_deps(g: &Graph, spans: &[std::ops::Range<usize>], deps: &mut Deps) {
    for span in spans {
        let nodes = &g.nodes[span.clone()];
        let mut i = 0;
        while i < nodes.len() {
            let len = pattern_len(g, nodes, i);
            if len == 0 {
                i += 1;
                continue;
            }
            let run = &nodes[i..i + len];
            let last = run[len - 1];
            let mut seen: Vec<usize> = Vec::new();
            for &n in run {
                for &s in &g.tensors[n].srcs {
                    if !seen.contains(&s) {
                        seen.push(s);
                        deps.entry(last).or_default().push(s);
                    }
                }
                seen.push(n);
            }
            i += len;
        }
    }
}

/// The most nodes one packed run holds (`GGML_METAL_FUSION_MAX`).
const PACK_MOST: usize = 16;

/// One split's nodes as ggml-metal's structural fusion pass sees them.
struct Pass<'a> {
    g: &'a Graph,
    nodes: &'a [usize],
    /// Each tensor's readers in the whole graph.
    uses: &'a [usize],
}

impl Pass<'_> {
    fn t(&self, p: usize) -> &super::graph::Tensor {
        &self.g.tensors[self.nodes[p]]
    }

    fn op(&self, p: usize) -> Option<Op> {
        (p < self.nodes.len()).then(|| self.t(p).op)
    }

    fn src(&self, p: usize, k: usize) -> Option<usize> {
        self.t(p).srcs.get(k).copied()
    }

    /// Positions `run` read only inside the run but for `outputs`, and no graph output
    /// (`ggml_can_fuse_subgraph_ext`).
    fn closed(&self, run: &[usize], outputs: &[usize]) -> bool {
        run.iter().enumerate().all(|(j, &p)| {
            if outputs.contains(&p) {
                return true;
            }
            let t = self.nodes[p];
            let inside: usize = run[j + 1..]
                .iter()
                .map(|&q| self.t(q).srcs.iter().filter(|&&s| s == t).count())
                .sum();
            !self.g.tensors[t].output && inside == self.uses[t]
        })
    }

    /// An element-wise chain over `run` (each reads the one before, all of one size), closed
    /// but for its last node, whose every step reads the one before as its first source.
    fn chain(&self, run: &[usize]) -> bool {
        run.windows(2).all(|w| {
            let prev = self.nodes[w[0]];
            self.src(w[1], 0) == Some(prev) && self.t(w[1]).bytes == self.t(w[0]).bytes
        }) && self.closed(run, &run[run.len() - 1..])
    }

    /// A router's softmax, sort and weights gathered (then normalized, then scaled) starting at
    /// position `at`, raw views included: its length in ops that are not views.
    fn router(&self, at: usize) -> usize {
        ROUTERS
            .iter()
            .filter(|p| {
                let raw: Vec<usize> = (at..at + p.len()).collect();
                let ops = raw
                    .iter()
                    .zip(p.iter())
                    .all(|(&q, &o)| self.op(q) == Some(o));
                let ids = at + 3;
                ops && self.src(at + 2, 0) == Some(self.nodes[at])
                    && self.src(at + 4, 1) == Some(self.nodes[ids])
                    && self.closed(&raw, &[ids, at + p.len() - 1])
            })
            .map(|p| p.iter().filter(|o| !o.is_empty()).count())
            .max()
            .unwrap_or(0)
    }

    /// The experts' weighted sum at position `at`: a multiply, one view of it per expert, the
    /// views added in a chain; its length in ops that are not views.
    fn weighted_sum(&self, at: usize) -> usize {
        if self.op(at) != Some(Mul) {
            return 0;
        }
        let mul = self.nodes[at];
        let k = (1..)
            .take_while(|&j| self.op(at + j) == Some(View) && self.src(at + j, 0) == Some(mul))
            .count();
        if !(2..=EXPERTS_MOST).contains(&k) {
            return 0;
        }
        let view = |j: usize| self.nodes[at + j];
        let mut prev = view(1);
        for j in 1..k {
            let add = at + k + j;
            if self.op(add) != Some(Add)
                || self.src(add, 0) != Some(prev)
                || self.src(add, 1) != Some(view(j + 1))
            {
                return 0;
            }
            prev = self.nodes[add];
        }
        let raw: Vec<usize> = (at..at + 2 * k).collect();
        if self.closed(&raw, &raw[raw.len() - 1..]) {
            k
        } else {
            0
        }
    }

    /// The longest pattern ggml-metal would fuse from the `f`-th of `idxs` (the positions of
    /// ops that are not views): its length in those ops, 0 for none (`ggml_metal_fusion_next`).
    fn next(&self, idxs: &[usize], f: usize) -> usize {
        let ops_at = |n: usize| {
            idxs.get(f..f + n)
                .map(|run| run.iter().map(|&p| self.t(p).op).collect::<Vec<_>>())
        };
        let safe = NORMS
            .iter()
            .map(|p| p.to_vec())
            .chain((2..=ADDS_MOST).map(|n| vec![Add; n]))
            .chain([vec![SsmConv, Unary]])
            .filter(|p| ops_at(p.len()).as_deref() == Some(&p[..]))
            .filter(|p| self.chain(&idxs[f..f + p.len()]))
            .map(|p| p.len());
        let unsafe_ = [self.router(idxs[f]), self.weighted_sum(idxs[f])];
        safe.chain(unsafe_).filter(|&n| n >= 2).max().unwrap_or(0)
    }

    /// How many raw nodes from position `at` ggml-metal packs into one (`ggml_metal_fusion_max`):
    /// fusable runs back to back, the views among them included.
    fn pack_len(&self, at: usize) -> usize {
        if self.t(at).op.is_empty() {
            return 1;
        }
        let idxs: Vec<usize> = (at..self.nodes.len())
            .filter(|&p| !self.t(p).op.is_empty())
            .take(PACK_MOST)
            .collect();
        let (mut total, mut f) = (0, 0);
        while f < idxs.len() && total < PACK_MOST {
            let n = self.next(&idxs, f);
            if n == 0 || total + n > PACK_MOST {
                break;
            }
            total += n;
            f += n;
        }
        if f == 0 {
            1
        } else {
            (idxs[f - 1] - at + 1).min(PACK_MOST)
        }
    }
}

/// `nodes` (one split, in graph order) in the runs ggml-metal packs before it reorders them:
/// each a list of positions in `nodes`.
pub(super) fn groups(g: &Graph, nodes: &[usize], uses: &[usize]) -> Vec<Vec<usize>> {
    let pass = Pass { g, nodes, uses };
    let mut out = Vec::new();
    let mut at = 0;
    while at < nodes.len() {
        let len = pass.pack_len(at);
        out.push((at..at + len).collect());
        at += len;
    }
    out
}
