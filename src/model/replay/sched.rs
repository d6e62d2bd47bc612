//! ggml's scheduler over the replayed graph, for the host and its devices (`ggml-backend.cpp`,
//! `ggml_backend_sched_split_graph`): each node is given a backend — a view of the KV cache
//! that of its cache, an op reading a weight that of its weight, a graph input the CPU, the
//! rest by expanding those assignments down and up the graph (first the devices', then any) —
//! the graph is cut where the backend changes, and each split gets a copy of every tensor it
//! reads from another backend, made at the split's start, the original kept until then. With
//! pipeline parallelism the scheduler keeps `copies` of every graph input and split input,
//! allocated first and never freed. Each backend's tensors are then placed by the graph
//! allocator in its own buffer.

use super::graph::*;

/// The host's backend id; devices are `1..`.
pub(super) const HOST: u8 = 0;

/// Each backend's compute buffer (the host's first) when `backend_of` places the model's
/// parts (and, apart, their routed experts' weights), with `copies` copies of every input (1, or 4 under pipeline parallelism).
pub(super) fn split_buffers(
    g: &Graph,
    backends: u8,
    backend_of: &dyn Fn(Part, Option<(FfnClass, bool)>) -> u8,
    copies: usize,
    device_rules: BufferRules,
) -> Vec<u64> {
    let be = assign(g, backend_of);
    (0..backends)
        .map(|b| {
            let rules = if b == HOST {
                BufferRules::CPU
            } else {
                device_rules
            };
            reserve(&per_backend(g, &be, b, copies), rules)
        })
        .collect()
}

/// A view, reshape or permute: no op of its own (`ggml_is_view_op`), unlike an op that writes
/// into a view.
fn is_view(g: &Graph, i: usize) -> bool {
    g.tensors[i].view_src.is_some() && !g.tensors[i].writes
}

/// Every tensor's backend, pass by pass as the scheduler assigns them.
fn assign(g: &Graph, backend_of: &dyn Fn(Part, Option<(FfnClass, bool)>) -> u8) -> Vec<u8> {
    let of = |t: &Tensor| backend_of(t.part, t.ffn.map(|c| (c, t.experts)));
    let mut be: Vec<Option<u8>> = vec![None; g.tensors.len()];
    for &l in &g.leafs {
        let t = &g.tensors[l];
        be[l] = Some(if t.external { of(t) } else { HOST });
    }
    // Pass 1: a view of a pre-allocated tensor (the KV cache) goes with it, a graph input to
    // the CPU, an op reading a weight to the weight's backend.
    for &i in &g.nodes {
        let t = &g.tensors[i];
        if let Some(root) = t.view_src.filter(|&r| g.tensors[r].external) {
            be[i] = Some(of(&g.tensors[root]));
        } else if t.input {
            be[i] = Some(HOST);
        } else if let Some(&w) = t
            .srcs
            .iter()
            .find(|&&s| g.tensors[s].external && g.tensors[s].view_src.is_none())
        {
            be[i] = Some(of(&g.tensors[w]));
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
                None => be[i] = cur,
            };
            if reverse {
                nodes.iter().rev().for_each(|&i| step(i));
            } else {
                nodes.iter().for_each(|&i| step(i));
            }
        }
    }
    // Pass 4: views go with what they view; anything left with the CPU.
    for &i in &g.nodes {
        if be[i].is_none() {
            be[i] = g.tensors[i].view_src.and_then(|r| be[r]);
        }
    }
    be.into_iter().map(|b| b.unwrap_or(HOST)).collect()
}

/// Each split: its backend, where it starts, and what it reads from other backends that no
/// earlier split of its backend read (the scheduler copies a tensor to a backend once, and
/// later splits there use that copy: only the first depends on the original).
fn splits(g: &Graph, be: &[u8]) -> Vec<(u8, usize, Vec<usize>)> {
    let mut out = Vec::new();
    let mut cur = None;
    let mut read_by: Vec<(usize, u8)> = Vec::new();
    for (k, &n) in g.nodes.iter().enumerate() {
        if is_view(g, n) || cur == Some(be[n]) {
            continue;
        }
        cur = Some(be[n]);
        let mut reads = Vec::new();
        for &m in g.nodes[k..]
            .iter()
            .take_while(|&&m| is_view(g, m) || be[m] == be[n])
        {
            if is_view(g, m) {
                continue;
            }
            for &s in &g.tensors[m].srcs {
                // A weight is not copied, but a view of one is (`ggml_view` of a weight has no
                // buffer of its own when the scheduler runs, so it is read like any input).
                let weight = g.tensors[s].external && g.tensors[s].view_src.is_none();
                if be[s] != be[n] && !weight && !read_by.contains(&(s, be[n])) {
                    reads.push(s);
                    read_by.push((s, be[n]));
                }
            }
        }
        out.push((be[n], k, reads));
    }
    out
}

/// Backend `b`'s share of the graph as the allocator sees it: its leaves, a copy of each tensor
/// one of its splits reads from another backend (at the split's start, once per tensor; with
/// several copies, all of them first and kept), its nodes in graph order, and a hold on each of
/// its tensors another backend's split reads, which keeps it until that split starts.
fn per_backend(g: &Graph, be: &[u8], b: u8, copies: usize) -> Graph {
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
    let splits = splits(g, be);
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
    for (k, &n) in g.nodes.iter().enumerate() {
        if let Some((sb, _, reads)) = next.next_if(|(_, start, _)| *start == k) {
            split_start(g, *sb, b, reads, &mut out, &map, &mut copied);
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
    }
    out
}

/// At the start of a split of backend `sb`: when it is `b`'s, the copies it reads (those not
/// made yet); when another's, a hold on each of `b`'s tensors it reads.
fn split_start(
    g: &Graph,
    sb: u8,
    b: u8,
    reads: &[usize],
    out: &mut Graph,
    map: &[Option<usize>],
    copied: &mut [Option<usize>],
) {
    for &s in reads {
        if sb == b && copied[s].is_none() {
            let c = out.push(Tensor {
                kind: Kind::Fresh,
                srcs: Vec::new(),
                view_src: None,
                input: false,
                output: false,
                external: false,
                fa_f16: None,
                ..g.tensors[s].clone()
            });
            out.nodes.push(c);
            copied[s] = Some(c);
        } else if sb != b {
            if let Some(m) = map[s] {
                // The scheduler's dependency on the original: it owns no memory and ends the
                // original's life when nothing else reads it.
                let hold = out.push(Tensor {
                    kind: Kind::Fresh,
                    srcs: vec![m],
                    view_src: None,
                    input: false,
                    output: false,
                    external: true,
                    ..out.tensors[m].clone()
                });
                out.nodes.push(hold);
            }
        }
    }
}
