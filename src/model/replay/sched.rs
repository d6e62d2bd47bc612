//! ggml's scheduler over the replayed graph, for the host and one device (`ggml-backend.cpp`,
//! `ggml_backend_sched_split_graph`): each node is given a backend — a view of the KV cache
//! that of its cache, an op reading a weight that of its weight, a graph input the CPU, the
//! rest by expanding those assignments down and up the graph (first the device's, then any) —
//! the graph is cut where the backend changes, and each split gets a copy of every tensor it
//! reads from the other backend, made at the split's start, the original kept until then.
//! Each backend's tensors are then placed by the graph allocator in its own buffer.

use super::graph::*;

const HOST: u8 = 0;
const DEVICE: u8 = 1;

/// The host's and the device's compute buffers when the parts `on_device` says run there.
pub(super) fn split_buffers(g: &Graph, on_device: &dyn Fn(Part) -> bool) -> (u64, u64) {
    let backend = assign(g, on_device);
    let (host, device) = (
        per_backend(g, &backend, HOST),
        per_backend(g, &backend, DEVICE),
    );
    (reserve(&host), reserve(&device))
}

/// A view, reshape or permute: no op of its own (`ggml_is_view_op`), unlike an op that writes
/// into a view.
fn is_view(g: &Graph, i: usize) -> bool {
    g.tensors[i].view_src.is_some() && !g.tensors[i].writes
}

/// Every tensor's backend, pass by pass as the scheduler assigns them.
fn assign(g: &Graph, on_device: &dyn Fn(Part) -> bool) -> Vec<u8> {
    let of_part = |p: Part| if on_device(p) { DEVICE } else { HOST };
    let mut be: Vec<Option<u8>> = vec![None; g.tensors.len()];
    for &l in &g.leafs {
        let t = &g.tensors[l];
        be[l] = Some(if t.external { of_part(t.part) } else { HOST });
    }
    // Pass 1: a view of a pre-allocated tensor (the KV cache) goes with it, a graph input to
    // the CPU, an op reading a weight to the weight's backend.
    for &i in &g.nodes {
        let t = &g.tensors[i];
        if let Some(root) = t.view_src.filter(|&r| g.tensors[r].external) {
            be[i] = Some(of_part(g.tensors[root].part));
        } else if t.input {
            be[i] = Some(HOST);
        } else if let Some(&w) = t.srcs.iter().find(|&&s| g.tensors[s].external) {
            be[i] = Some(of_part(g.tensors[w].part));
        }
    }
    // Pass 2: the device's assignments expanded down and up (the CPU's stop them), then any.
    let nodes: Vec<usize> = g
        .nodes
        .iter()
        .copied()
        .filter(|&i| !is_view(g, i))
        .collect();
    for any in [false, true] {
        for order in [false, true] {
            let mut cur = None;
            let mut step = |i: usize| match be[i] {
                Some(b) => cur = (any || b == DEVICE).then_some(b),
                None => be[i] = cur,
            };
            if order {
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

/// Backend `b`'s share of the graph as the allocator sees it: its own leaves and nodes in
/// graph order; at the start of each of its splits, a copy of each tensor the split reads from
/// the other backend (once per tensor); at the start of each of the other backend's splits, a
/// hold on each of `b`'s tensors that split reads, which keeps it until then.
fn per_backend(g: &Graph, be: &[u8], b: u8) -> Graph {
    let mut out = Graph::default();
    let mut map: Vec<Option<usize>> = vec![None; g.tensors.len()];
    let mut copied: Vec<Option<usize>> = vec![None; g.tensors.len()];
    for &l in &g.leafs {
        if be[l] == b {
            let i = out.push(Tensor {
                srcs: Vec::new(),
                ..g.tensors[l].clone()
            });
            map[l] = Some(i);
            out.leafs.push(i);
        }
    }
    let mut cur = None;
    for (k, &n) in g.nodes.iter().enumerate() {
        if !is_view(g, n) && cur != Some(be[n]) {
            cur = Some(be[n]);
            let reads = split_reads(g, be, k);
            for s in reads {
                if be[n] == b && copied[s].is_none() {
                    let c = out.push(Tensor {
                        kind: Kind::Fresh,
                        srcs: Vec::new(),
                        view_src: None,
                        input: false,
                        output: false,
                        external: false,
                        ..g.tensors[s].clone()
                    });
                    out.nodes.push(c);
                    copied[s] = Some(c);
                } else if be[n] != b {
                    if let Some(m) = map[s] {
                        let root = out.tensors[m].view_src.unwrap_or(m);
                        let hold = out.push(Tensor {
                            kind: Kind::View,
                            srcs: vec![m],
                            view_src: Some(root),
                            input: false,
                            output: false,
                            ..out.tensors[m].clone()
                        });
                        out.nodes.push(hold);
                    }
                }
            }
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

/// The tensors the split starting at node `k` reads from the other backend, in order.
fn split_reads(g: &Graph, be: &[u8], k: usize) -> Vec<usize> {
    let backend = be[g.nodes[k]];
    let mut reads = Vec::new();
    for &n in g.nodes[k..]
        .iter()
        .take_while(|&&n| is_view(g, n) || be[n] == backend)
    {
        if is_view(g, n) {
            continue;
        }
        for &s in &g.tensors[n].srcs {
            if be[s] != backend && !g.tensors[s].external && !reads.contains(&s) {
                reads.push(s);
            }
        }
    }
    reads
}
