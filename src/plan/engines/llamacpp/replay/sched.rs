//! ggml's scheduler over the replayed graph, for the host and its devices (`ggml-backend.cpp`,
//! `ggml_backend_sched_split_graph`): each node is given a backend — a view of the KV cache
//! that of its cache, an op reading a weight that of its weight, a graph input the CPU, the
//! rest by expanding those assignments down and up the graph (first the devices', then any) —
//! the graph is cut where the backend changes, and each split gets a copy of every tensor it
//! reads from another backend, made at the split's start, the original kept until then. With
//! pipeline parallelism the scheduler keeps `copies` of every graph input and split input,
//! allocated first and never freed. Each backend's tensors are then placed by the graph
//! allocator in its own buffer.

use super::gallocr::reserve;
use super::graph::*;

/// The host's backend id; devices are `1..`.
pub(super) const HOST: u8 = 0;

/// The fewest rows an op must compute for ggml-cuda and ggml-vulkan to run it on a weight in
/// host memory (`offload_op`: `GGML_OP_OFFLOAD_MIN_BATCH`, 32 by default).
const OFFLOAD_MIN_ROWS: u64 = 32;

/// How the scheduler runs: where `backend_of` places the model's parts (and, apart, their
/// routed experts' weights), `copies` copies of every input (1, or 4 under pipeline
/// parallelism), each backend's rules (the host's first: how its buffer places tensors, which
/// ops it runs, how it reorders its splits), and the device that takes an op on a host weight
/// (the first whose backend has `offload_op`, which ggml-cuda, ggml-vulkan and ggml-metal have
/// and ggml-rpc has not).
pub(super) struct Sched<'a> {
    pub(super) backend_of: &'a dyn Fn(Part, Option<(FfnClass, bool)>) -> u8,
    pub(super) copies: usize,
    pub(super) rules: Vec<BufferRules>,
    pub(super) offload_to: Option<u8>,
    /// The devices reorder each split they run before it is allocated (ggml-vulkan's and
    /// ggml-metal's `graph_optimize`, [`super::reorder`]).
    pub(super) reorders: bool,
}

impl Sched<'_> {
    fn rules_of(&self, b: u8) -> BufferRules {
        self.rules
            .get(usize::from(b))
            .copied()
            .unwrap_or(BufferRules::CPU)
    }
}

/// Each backend's compute buffer, the host's first.
pub(super) fn split_buffers(g: &Graph, s: &Sched<'_>) -> Vec<u64> {
    let offload_to = s.offload_to.filter(|_| s.rules.len() > 1);
    let be = assign(g, s, offload_to);
    // The splits and what each reads are found in graph order, before a backend reorders
    // its splits' nodes.
    let cuts = splits(g, &be, offload_to.is_some());
    let spans: Vec<(BufferRules, std::ops::Range<usize>)> = device_spans(g, &cuts)
        .map(|(b, span)| (s.rules_of(b), span))
        .collect();
    let of = |want: &dyn Fn(BufferRules) -> bool| -> Vec<std::ops::Range<usize>> {
        spans
            .iter()
            .filter(|(r, _)| want(*r))
            .map(|(_, span)| span.clone())
            .collect()
    };
    // A backend keeps its fused kernels' inputs by the patterns of llama.cpp's graph order,
    // found before it reorders the split.
    let mut deps = Deps::new();
    let cuda = of(&|r| r.fusion_deps == FusionDeps::Cuda);
    // (Counting the graph's uses is the costly part: only where a split fuses.)
    if !cuda.is_empty() {
        moe_sum_deps(g, &cuda, &mut deps);
        topk_moe_deps(g, &cuda, &mut deps);
    }
    super::metal_fusion::fusion_deps(g, &of(&|r| r.fusion_deps == FusionDeps::Metal), &mut deps);
    let reordered;
    let g = if s.reorders && spans.iter().any(|(r, _)| r.reorder != Reorder::None) {
        let kept;
        (reordered, kept) = reorder_device_splits(g, &spans);
        for (until, t) in kept {
            deps.entry(until).or_default().extend(t);
        }
        &reordered
    } else {
        g
    };
    (0..s.rules.len())
        .map(|b| {
            let b = u8::try_from(b).unwrap_or(u8::MAX);
            reserve(
                &per_backend(g, (&be, &cuts), b, s.copies, &deps),
                s.rules_of(b),
            )
        })
        .collect()
}

/// A split: its backend, the index of its first node, and what it reads from other backends.
pub(super) type Cut = (u8, usize, Vec<usize>);

/// The backend and node range of each of `g`'s device splits (each to the next split's start).
fn device_spans<'a>(
    g: &'a Graph,
    cuts: &'a [Cut],
) -> impl Iterator<Item = (u8, std::ops::Range<usize>)> + 'a {
    cuts.iter()
        .enumerate()
        .filter_map(move |(i, &(b, start, _))| {
            let end = cuts.get(i + 1).map_or(g.nodes.len(), |next| next.1);
            (b != HOST).then_some((b, start..end))
        })
}

/// `g` with each device split's nodes in the order the device's backend reorders them to
/// (the host's splits and the split boundaries stay), and what the reordering keeps alive.
fn reorder_device_splits(
    g: &Graph,
    spans: &[(BufferRules, std::ops::Range<usize>)],
) -> (Graph, Deps) {
    let uses = super::reorder::use_counts(g);
    let mut nodes = g.nodes.clone();
    let mut deps = Deps::new();
    for (rules, span) in spans {
        let span = span.clone();
        let split = &g.nodes[span.clone()];
        let (order, kept) = match rules.reorder {
            Reorder::None => continue,
            Reorder::Vulkan => super::reorder::reorder(g, split, &uses),
            Reorder::Metal => (super::metal_reorder::reorder(g, split, &uses), Vec::new()),
        };
        nodes[span].copy_from_slice(&order);
        for (until, t) in kept {
            deps.entry(until).or_default().push(t);
        }
    }
    let g = Graph {
        tensors: g.tensors.clone(),
        nodes,
        leafs: g.leafs.clone(),
        seen: g.seen.clone(),
        part: g.part,
        rows: g.rows,
    };
    (g, deps)
}

/// ggml-cuda's most experts a token may sum in its fused kernel
/// (`MOE_WEIGHTED_REDUCTION_MAX_EXPERTS`).
const MOE_SUM_MOST: usize = 15;

/// In each device split, the routed experts' weighted sum ggml-cuda fuses
/// (`ggml_cuda_match_moe_weighted_reduction`): the experts' outputs multiplied by their router
/// weights, one view a selected expert, the views added in a chain. The kernel reads the
/// unweighted outputs and the weights at the last add, so both are kept until then.
pub(super) fn moe_sum_deps(g: &Graph, spans: &[std::ops::Range<usize>], deps: &mut Deps) {
    let uses = super::reorder::use_counts(g);
    for span in spans {
        let nodes = &g.nodes[span.clone()];
        for (i, &mul) in nodes.iter().enumerate() {
            let t = &g.tensors[mul];
            let [x, y] = t.srcs[..] else { continue };
            if t.op != Op::Mul {
                continue;
            }
            // The experts' outputs are the product's shape; the weights one value an expert.
            let (experts, weights) = if g.tensors[x].bytes == t.bytes {
                (x, y)
            } else {
                (y, x)
            };
            if g.tensors[experts].bytes != t.bytes || g.tensors[weights].bytes >= t.bytes {
                continue;
            }
            let views = nodes[i + 1..]
                .iter()
                .take_while(|&&v| g.tensors[v].op == Op::View && g.tensors[v].srcs == [mul])
                .count();
            let adds = &nodes[(i + 1 + views).min(nodes.len())..];
            let chained = adds.len() >= views.saturating_sub(1)
                && adds[..views.saturating_sub(1)]
                    .iter()
                    .all(|&a| g.tensors[a].op == Op::Add);
            if !(2..=MOE_SUM_MOST).contains(&views) || !chained || uses[mul] != views {
                continue;
            }
            let sum = adds[views - 2];
            let kept = deps.entry(sum).or_default();
            kept.extend([experts, weights]);
        }
    }
}

/// The router ops ggml-cuda fuses into one top-k kernel (`ggml_cuda_topk_moe_fusion`), from the
/// gating op at `at` in `nodes`: the gating (softmax, sigmoid), a reshape, a bias add, the
/// argsort, its view, the weights' `get_rows`, then a normalization (reshape, sum, clamp, div,
/// reshape) and a scale where they follow. `None` where the router does not match or the
/// kernel has no instance for its expert count (a power of two up to 512, or 288 or 576).
fn topk_moe_len(g: &Graph, nodes: &[usize], at: usize) -> Option<usize> {
    let op = |k: usize| nodes.get(k).map(|&n| g.tensors[n].op);
    if !matches!(op(at), Some(Op::SoftMax | Op::Unary)) {
        return None;
    }
    let mut k = at + 1;
    let next = |want: Op, k: &mut usize| (op(*k) == Some(want)).then(|| *k += 1).is_some();
    if !next(Op::Reshape, &mut k) {
        return None;
    }
    next(Op::Add, &mut k);
    let sort = k;
    if !(next(Op::ArgSort, &mut k) && next(Op::View, &mut k) && next(Op::GetRows, &mut k)) {
        return None;
    }
    let t = &g.tensors[nodes[sort]];
    let experts = t.bytes / t.rows.max(1).saturating_mul(4);
    if !(experts.is_power_of_two() && experts <= 512 || experts == 288 || experts == 576) {
        return None;
    }
    let norm = [Op::Reshape, Op::SumRows, Op::Clamp, Op::Div, Op::Reshape];
    if norm.iter().enumerate().all(|(j, &o)| op(k + j) == Some(o)) {
        k += norm.len();
    }
    next(Op::Scale, &mut k);
    Some(k - at)
}

/// In each device split, ggml-cuda's fused top-k router (its `graph_optimize`, `add_alloc_deps`):
/// every node of the fused run and everything they read is kept until the node after it.
fn topk_moe_deps(g: &Graph, spans: &[std::ops::Range<usize>], deps: &mut Deps) {
    for span in spans {
        let nodes = &g.nodes[span.clone()];
        let mut i = 0;
        while i < nodes.len() {
            let Some(len) = topk_moe_len(g, nodes, i) else {
                i += 1;
                continue;
            };
            if let Some(&until) = nodes.get(i + len) {
                let kept = deps.entry(until).or_default();
                for &n in &nodes[i..i + len] {
                    kept.push(n);
                    kept.extend(g.tensors[n].srcs.iter().copied());
                }
            }
            i += len;
        }
    }
}

/// A weight read directly (a view of one is read like any tensor).
fn is_weight(g: &Graph, i: usize) -> bool {
    g.tensors[i].external && g.tensors[i].view_src.is_none()
}

/// Whether the first device takes node `i`, which reads the host weight `w`: ggml offloads
/// an op of enough rows, but never an embedding lookup (`get_rows`); ggml-metal only a matrix
/// product (`products_only`).
fn offloaded(g: &Graph, i: usize, w: usize, products_only: bool) -> bool {
    let lookup = g.tensors[w].weight.is_some_and(|w| w.lookup);
    let product = matches!(g.tensors[i].op, Op::MulMat | Op::MulMatId);
    !lookup && (product || !products_only) && g.tensors[i].rows >= OFFLOAD_MIN_ROWS
}

/// A view, reshape or permute: no op of its own (`ggml_is_view_op`), unlike an op that writes
/// into a view.
fn is_view(g: &Graph, i: usize) -> bool {
    g.tensors[i].view_src.is_some() && !g.tensors[i].writes
}

/// Whether a device runs node `i` (`supports_op`): with a `limit`, only when neither the node
/// nor anything it reads spans more bytes; flash attention where it has the kernel.
fn device_runs(g: &Graph, i: usize, limit: Option<u64>, fa: FaKernels) -> bool {
    let t = &g.tensors[i];
    let fits = limit
        .is_none_or(|most| t.bytes <= most && t.srcs.iter().all(|&s| g.tensors[s].bytes <= most));
    fits && t.fa_heads.is_none_or(|h| h.runs_on(fa))
}

/// Every tensor's backend, pass by pass as the scheduler assigns them. A node a device cannot
/// run is left to the CPU: never given a device's backend, and the expansions pass over it.
fn assign(g: &Graph, s: &Sched<'_>, offload_to: Option<u8>) -> Vec<u8> {
    // A weight beyond its device's limit is loaded into host memory (llama.cpp's
    // `weight_buft_supported` fails every device buffer type for it).
    let of = |t: &Tensor| {
        let b = (s.backend_of)(t.part, t.ffn.map(|c| (c, t.experts)));
        let limit = s.rules_of(b).tensor_limit;
        if t.weight.is_some() && limit.is_some_and(|most| t.bytes > most) {
            HOST
        } else {
            b
        }
    };
    let runs = |i: usize, b: u8| {
        let r = s.rules_of(b);
        device_runs(g, i, r.tensor_limit, r.fa_kernels)
    };
    let mut be: Vec<Option<u8>> = vec![None; g.tensors.len()];
    for &l in &g.leafs {
        let t = &g.tensors[l];
        be[l] = Some(if t.external { of(t) } else { HOST });
    }
    // Pass 1: a view of a pre-allocated tensor (the KV cache) goes with it, a graph input to
    // the CPU, an op reading a weight to the weight's backend, or, where the weight is the
    // host's, to the device that offloads it.
    for &i in &g.nodes {
        let t = &g.tensors[i];
        if let Some(root) = t.view_src.filter(|&r| g.tensors[r].external) {
            be[i] = Some(of(&g.tensors[root]));
        } else if t.input {
            be[i] = Some(HOST);
        } else if let Some(&w) = t.srcs.iter().find(|&&s| is_weight(g, s)) {
            let home = of(&g.tensors[w]);
            be[i] = if home == HOST {
                let to = offload_to.filter(|&d| {
                    offloaded(g, i, w, s.rules_of(d).offloads_products_only) && runs(i, d)
                });
                Some(to.unwrap_or(HOST))
            } else {
                // A device weight whose op the device cannot run: copied to whichever backend
                // the op ends up on.
                runs(i, home).then_some(home)
            };
        }
    }
    // Pass 2: the devices' assignments expanded down and up (the CPU's stop them), then any.
    let nodes: Vec<usize> = g
        .nodes
        .iter()
        .copied()
        .filter(|&i| !is_view(g, i))
        .collect();
    for any in [false, true] {
        for reverse in [false, true] {
            let mut cur = None;
            let mut step = |i: usize| match be[i] {
                Some(b) => cur = (any || b != HOST).then_some(b),
                None if cur.is_some_and(|c| c != HOST && !runs(i, c)) => {}
                None => be[i] = cur,
            };
            if reverse {
                nodes.iter().rev().for_each(|&i| step(i));
            } else {
                nodes.iter().for_each(|&i| step(i));
            }
        }
    }
    unplaced_to_best(g, s, &nodes, &mut be);
    // Pass 4: views go with what they view; anything left with the CPU.
    for &i in &g.nodes {
        if be[i].is_none() {
            be[i] = g.tensors[i].view_src.and_then(|r| be[r]);
        }
    }
    be.into_iter().map(|b| b.unwrap_or(HOST)).collect()
}

/// Pass 3 of ggml's assignment: a node no expansion could place (its neighbours' backends
/// cannot run it) goes to the backend that runs it and already holds the most of its inputs,
/// the first in ggml's order on a tie (the devices in order, the CPU last). A backend holds an
/// input assigned to it: each device's buffers are its own, and the CPU's are host memory.
fn unplaced_to_best(g: &Graph, s: &Sched<'_>, nodes: &[usize], be: &mut [Option<u8>]) {
    let order: Vec<u8> = (1..u8::try_from(s.rules.len()).unwrap_or(u8::MAX))
        .chain([HOST])
        .collect();
    for &i in nodes {
        if be[i].is_some() {
            continue;
        }
        let held = |b: u8| {
            g.tensors[i]
                .srcs
                .iter()
                .filter(|&&x| {
                    be[x].or_else(|| g.tensors[x].view_src.and_then(|r| be[r])) == Some(b)
                })
                .count()
        };
        let mut best: Option<(usize, u8)> = None;
        for &b in &order {
            let r = s.rules_of(b);
            if b == HOST || device_runs(g, i, r.tensor_limit, r.fa_kernels) {
                let n = held(b);
                if best.is_none_or(|(most, _)| n > most) {
                    best = Some((n, b));
                }
            }
        }
        be[i] = best.map(|(_, b)| b);
    }
}

/// Each split: its backend, where it starts, and what it reads from other backends that no
/// earlier split of its backend read (the scheduler copies a tensor to a backend once, and
/// later splits there use that copy: only the first depends on the original). A split ends
/// where the backend changes, and, under operator offload, before an op on another backend's
/// weight once the split has inputs (so that the copies of earlier weights can be freed).
fn splits(g: &Graph, be: &[u8], offload: bool) -> Vec<Cut> {
    let mut out: Vec<(u8, usize, Vec<usize>)> = Vec::new();
    let mut read_by: std::collections::HashSet<(usize, u8)> = std::collections::HashSet::new();
    for (k, &n) in g.nodes.iter().enumerate() {
        if is_view(g, n) {
            continue;
        }
        let b = be[n];
        let srcs = &g.tensors[n].srcs;
        let foreign_weight = offload && srcs.iter().any(|&s| is_weight(g, s) && be[s] != b);
        match out.last() {
            Some((cb, _, reads)) if *cb == b && (!foreign_weight || reads.is_empty()) => {}
            _ => out.push((b, k, Vec::new())),
        }
        let Some((_, _, reads)) = out.last_mut() else {
            continue;
        };
        for &s in srcs {
            // A weight is copied only when an op is offloaded from it (without offload an op
            // runs where its weight is); a view of one is read like any input (`ggml_view` of
            // a weight has no buffer of its own when the scheduler runs).
            if be[s] != b && (offload || !is_weight(g, s)) && read_by.insert((s, b)) {
                reads.push(s);
            }
        }
    }
    out
}

/// Backend `b`'s share of the graph as the allocator sees it: its leaves, a copy of each tensor
/// one of its splits reads from another backend (at the split's start, once per tensor; with
/// several copies, all of them first and kept), its nodes in graph order, and a hold on each of
/// its tensors another backend's split reads, which keeps it until that split starts.
fn per_backend(
    g: &Graph,
    (be, splits): (&[u8], &[Cut]),
    b: u8,
    copies: usize,
    deps: &Deps,
) -> Graph {
    let mut out = Graph::default();
    let mut map: Vec<Option<usize>> = vec![None; g.tensors.len()];
    let mut copied: Vec<Option<usize>> = vec![None; g.tensors.len()];
    let kept = |t: &Tensor| Tensor {
        srcs: Vec::new(),
        view_src: None,
        input: true,
        output: true,
        external: false,
        fa_f16: None,
        fa_heads: None,
        ..t.clone()
    };
    for &l in &g.leafs {
        if be[l] != b {
            continue;
        }
        let t = &g.tensors[l];
        let i = if copies > 1 && t.input {
            // The inputs' copies for the other pipeline stages, and the input itself, kept.
            for _ in 1..copies {
                let c = out.push(kept(t));
                out.leafs.push(c);
            }
            out.push(kept(t))
        } else {
            out.push(Tensor {
                srcs: Vec::new(),
                ..t.clone()
            })
        };
        map[l] = Some(i);
        out.leafs.push(i);
    }
    if copies > 1 {
        for (_, _, reads) in splits.iter().filter(|(sb, _, _)| *sb == b) {
            for &s in reads {
                if copied[s].is_none() {
                    for c in 0..copies {
                        let i = out.push(kept(&g.tensors[s]));
                        out.leafs.push(i);
                        if c == 0 {
                            copied[s] = Some(i);
                        }
                    }
                }
            }
        }
    }
    let mut next = splits.iter().peekable();
    // Tensors of `b` another backend's split reads before they are made (a view made after
    // the split starts): held when they are.
    let mut pending: Vec<usize> = Vec::new();
    for (k, &n) in g.nodes.iter().enumerate() {
        if let Some((sb, _, reads)) = next.next_if(|(_, start, _)| *start == k) {
            let split = Split { sb: *sb, b, reads };
            split_start(g, &split, &mut out, &map, &mut copied, &mut pending);
        }
        if be[n] != b {
            continue;
        }
        let t = &g.tensors[n];
        let srcs = t
            .srcs
            .iter()
            .filter_map(|&s| if be[s] == b { map[s] } else { copied[s] })
            .collect();
        let i = out.push(Tensor {
            srcs,
            view_src: t.view_src.and_then(|r| map[r]),
            ..t.clone()
        });
        map[n] = Some(i);
        out.nodes.push(i);
        // What the backend keeps alive until this node has run (ggml's dependency node).
        if let Some(kept) = deps.get(&n) {
            let srcs: Vec<usize> = kept.iter().filter_map(|&k| map[k]).collect();
            hold_all(&mut out, i, srcs);
        }
        // (Under pipeline parallelism every input is kept: no hold ends a life there.)
        if let Some(p) = pending.iter().position(|&s| s == n).filter(|_| copies == 1) {
            pending.swap_remove(p);
            hold(&mut out, i);
        }
    }
    out
}

/// A split starting: its backend `sb`, the backend `b` whose graph is being made, and what the
/// split reads from other backends.
struct Split<'a> {
    sb: u8,
    b: u8,
    reads: &'a [usize],
}

/// ggml's dependency node after `after`: it reads `srcs`, owns no memory, and so ends their
/// lives no earlier than there.
fn hold_all(out: &mut Graph, after: usize, srcs: Vec<usize>) {
    let h = out.push(Tensor {
        op: Op::None,
        kind: Kind::Fresh,
        srcs,
        view_src: None,
        input: false,
        output: false,
        external: true,
        ..out.tensors[after].clone()
    });
    out.nodes.push(h);
}

/// The scheduler's dependency on `b`'s tensor `m` that another backend's split reads: it owns
/// no memory and ends the original's life when nothing else reads it.
fn hold(out: &mut Graph, m: usize) {
    hold_all(out, m, vec![m]);
}

/// At the start of a split of backend `sb`: when it is `b`'s, the copies it reads (those not
/// made yet); when another's, a hold on each of `b`'s tensors it reads (on one not made yet,
/// when it is: `pending`).
fn split_start(
    g: &Graph,
    split: &Split<'_>,
    out: &mut Graph,
    map: &[Option<usize>],
    copied: &mut [Option<usize>],
    pending: &mut Vec<usize>,
) {
    let Split { sb, b, reads } = *split;
    for &s in reads {
        if sb == b && copied[s].is_none() {
            let c = out.push(Tensor {
                op: Op::None,
                kind: Kind::Fresh,
                srcs: Vec::new(),
                view_src: None,
                input: false,
                output: false,
                external: false,
                fa_f16: None,
                fa_heads: None,
                ..g.tensors[s].clone()
            });
            out.nodes.push(c);
            copied[s] = Some(c);
        } else if sb != b {
            match map[s] {
                Some(m) => hold(out, m),
                None => pending.push(s),
            }
        }
    }
}
