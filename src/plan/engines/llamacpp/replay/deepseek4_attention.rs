//! DeepSeek-V4's attention as llama.cpp's `deepseek4` builder makes it: the query compressed
//! and RMS-normed a head, one shared K=V head written to the sliding window's cache; in a CSA
//! layer the window's keys read beside the 4:1 compressed cache, masked to the rows the
//! lightning indexer picks, in a HCA layer beside the 128:1 one; the compressors folding the
//! batch into their caches first; then the output de-roped and projected in groups.

use super::graph::*;
use super::shaped::{leaf, node, rms, view, Ne, F16, F32, FRESH, I32, INPLACE};
use crate::model::arch::{Compression, V4Layout};

/// The graph's widths: the batch's tokens, the model's and DeepSeek-V4's own.
#[derive(Clone, Copy)]
pub(super) struct Dims<'a> {
    pub(super) tokens: u64,
    /// The reserve's sequences: each keeps a stream of every cache and state (its `tokens /
    /// seqs` rows attend to its stream alone) and may start a compressed block of its own.
    pub(super) seqs: u64,
    pub(super) outputs: u64,
    pub(super) fa: bool,
    pub(super) h: u64,
    pub(super) heads: u64,
    pub(super) head: u64,
    pub(super) vocab: u64,
    /// Cells of the sliding window's cache, the CSA (and indexer) caches and the HCA cache.
    pub(super) raw: u64,
    pub(super) csa: u64,
    pub(super) hca: u64,
    pub(super) v4: &'a V4Layout,
    pub(super) experts: u64,
    pub(super) used: u64,
    pub(super) expert_ffn: u64,
    pub(super) shared_ffn: u64,
    /// A quantized cache's keys and queries are rotated (`attn_rot_k`): the rotation's size.
    pub(super) rot: Option<u64>,
    /// Bytes of a cached row of a head (the cache's blocks).
    pub(super) cached_row: u64,
}

/// A compressed cache's inputs (llama.cpp's reserve plan: `dsv4_build_reserve_comp_plan`).
#[derive(Clone, Copy)]
pub(super) struct CompInputs {
    state_pos: usize,
    persist_src: usize,
    persist_dst: usize,
    read_idxs: usize,
    write_idxs: usize,
    write_pos: usize,
    mask: usize,
}

impl CompInputs {
    /// For `ratio`, the state holding `state` rows, two overlapping windows when `overlap`,
    /// a mask over `cells.0` cells of `cells.1` bytes an element.
    fn new(
        g: &mut Graph,
        d: &Dims<'_>,
        (ratio, state, overlap): (u64, u64, bool),
        cells: (u64, u64),
    ) -> Self {
        let t = d.tokens;
        // The worst case over the batch's sequence splits: a block a `ratio` tokens, and one
        // a sequence; the state keeps `state` rows a sequence.
        let blocks = t / ratio + d.seqs;
        let persist = t.min(state * d.seqs);
        let reads = if overlap { 2 } else { 1 } * ratio * blocks;
        CompInputs {
            state_pos: g.input(t * 4),
            persist_src: g.input(persist * 4),
            persist_dst: g.input(persist * 4),
            read_idxs: g.input(reads * 4),
            write_idxs: g.input(blocks * 8),
            write_pos: g.input(blocks * 4),
            mask: leaf(g, (cells.1, cells.0, t, 1)),
        }
    }
}

/// The graph's inputs: the batch's, the window cache's, and each compressed cache's.
pub(super) struct Inputs {
    pub(super) tokens: usize,
    pub(super) embd: usize,
    pub(super) raw_mask: usize,
    pub(super) out_ids: usize,
    pos: usize,
    k_idxs: usize,
    csa: CompInputs,
    hca: CompInputs,
    lid: CompInputs,
    /// The indexer keys' Hadamard rotation (`index_head_dim` square).
    lid_rot: Rot,
    /// A quantized cache's rotations: the window's (of the queries, the keys and the
    /// attention's output), the CSA and the HCA cache's.
    pub(super) raw_rot: Option<Rot>,
    comp_rot: Option<(Rot, Rot)>,
}

/// A Hadamard rotation's input matrix and its size.
#[derive(Clone, Copy)]
pub(super) struct Rot {
    pub(super) input: usize,
    n: u64,
}

impl Rot {
    fn new(g: &mut Graph, n: u64) -> Rot {
        Rot {
            input: g.input(n * n * 4),
            n,
        }
    }
}

/// The rotation llama.cpp builds for a cache of `head`-wide rows (`build_input_k_rot`): the
/// largest power of two from 64 that divides it.
fn rotation(head: u64) -> u64 {
    let mut n = 64;
    while head % (n * 2) == 0 {
        n *= 2;
    }
    n
}

impl Inputs {
    pub(super) fn new(g: &mut Graph, d: &Dims<'_>) -> Inputs {
        let t = d.tokens;
        let mask = mask_type(d);
        let id = d.v4.indexer_dim;
        let csa = CompInputs::new(g, d, (4, 8, true), (d.csa, mask));
        let hca = CompInputs::new(g, d, (128, 128, false), (d.hca, mask));
        // The fused lightning indexer reads an f16 mask.
        let lid = CompInputs::new(g, d, (4, 8, true), (d.csa, F16));
        Inputs {
            tokens: g.input(t * 4),
            embd: g.input(t * d.h * 4),
            raw_mask: g.input(d.raw * t * mask),
            out_ids: g.input(d.outputs * 4),
            pos: g.input(t * 4),
            k_idxs: g.input(t * 8),
            csa,
            hca,
            lid,
            lid_rot: Rot::new(g, rotation(id)),
            raw_rot: d.rot.map(|n| Rot::new(g, n)),
            comp_rot: d.rot.map(|n| (Rot::new(g, n), Rot::new(g, n))),
        }
    }
}

/// Flash attention reads f16 masks.
fn mask_type(d: &Dims<'_>) -> u64 {
    if d.fa {
        F16
    } else {
        F32
    }
}

/// A compressor's weights' names, the width of a compressed row, its ratio, and the rows its
/// state keeps (`llama_dsv4_comp_state`: twice the ratio where two windows overlap).
struct Compressor {
    names: [&'static str; 4],
    width: u64,
    ratio: u64,
    state: u64,
}

const CSA: Compressor = Compressor {
    names: [
        "attn_compressor_kv.weight",
        "attn_compressor_gate.weight",
        "attn_compressor_ape.weight",
        "attn_compressor_norm.weight",
    ],
    width: 0,
    ratio: 4,
    state: 8,
};

const HCA: Compressor = Compressor {
    ratio: 128,
    state: 128,
    ..CSA
};

const LID: Compressor = Compressor {
    names: [
        "indexer_compressor_kv.weight",
        "indexer_compressor_gate.weight",
        "indexer_compressor_ape.weight",
        "indexer_compressor_norm.weight",
    ],
    ..CSA
};

/// The batch folded into a compressed cache: the state's rows and the batch's KV and gate
/// projections (the gate with its positional bias) read block by block, softmax-weighted,
/// summed, normed and roped, written to the cache (rotated first for the indexer's keys);
/// then the batch's last rows kept as the state.
fn compress(
    d: &Dims<'_>,
    g: &mut Graph,
    cur: usize,
    (c, inputs, rot): (&Compressor, CompInputs, Option<Rot>),
) {
    let (t, w) = (d.tokens, c.width);
    let overlap = c.ratio == 4;
    let wide = if overlap { 2 * w } else { w };
    let blocks = t / c.ratio + d.seqs;
    // Every sequence's state rows, then the batch's.
    let kept = c.state * d.seqs;
    let projection = |g: &mut Graph, name: &'static str| {
        let m = g.matrix(name, d.h, wide);
        node(g, (FRESH, Op::MulMat), (F32, wide, t, 1), &[m, cur])
    };
    let state_kv = g.external();
    let state_score = g.external();
    let kv = projection(g, c.names[0]);
    let score = projection(g, c.names[1]);
    let ape = g.vector(c.names[2], wide * c.ratio);
    let ape = node(
        g,
        (FRESH, Op::GetRows),
        (F32, wide, t, 1),
        &[ape, inputs.state_pos],
    );
    let score = node(g, (INPLACE, Op::Add), (F32, wide, t, 1), &[score, ape]);
    let source = |g: &mut Graph, state: usize, batch: usize| {
        let base = view(g, state);
        let base = view(g, base);
        node(
            g,
            (FRESH, Op::Other),
            (F32, wide, kept + t, 1),
            &[base, batch],
        )
    };
    let blocked = |g: &mut Graph, src: usize| {
        if overlap {
            overlapping(g, (src, inputs.read_idxs), (w, kept + t, blocks))
        } else {
            let rows = node(
                g,
                (FRESH, Op::GetRows),
                (F32, w, c.ratio * blocks, 1),
                &[src, inputs.read_idxs],
            );
            let rows = view(g, rows);
            let rows = view(g, rows);
            node(g, (FRESH, Op::Cont), (F32, c.ratio, w, blocks), &[rows])
        }
    };
    let window = if overlap { 2 * c.ratio } else { c.ratio };
    let values = source(g, state_kv, kv);
    let values = blocked(g, values);
    let scores = source(g, state_score, score);
    let scores = blocked(g, scores);
    let ne = (F32, window, w, blocks);
    let weights = node(g, (INPLACE, Op::SoftMax), ne, &[scores]);
    let comp = node(g, (INPLACE, Op::Mul), ne, &[values, weights]);
    let comp = node(g, (FRESH, Op::SumRows), (F32, 1, w, blocks), &[comp]);
    let comp = view(g, comp);
    let ne = (F32, w, 1, blocks);
    let comp = node(g, (FRESH, Op::Cont), ne, &[comp]);
    let comp = rms(g, comp, ne, (c.names[3], w));
    let mut comp = node(g, (INPLACE, Op::Rope), ne, &[comp, inputs.write_pos]);
    if let Some(rot) = rot {
        comp = rotated(g, comp, rot, w * blocks);
    }
    let rows = view(g, comp);
    let cache = g.external();
    let write = g.set_rows(cache, rows, inputs.write_idxs);
    g.expand(write);
    for (batch, state) in [(kv, state_kv), (score, state_score)] {
        let rows = node(
            g,
            (FRESH, Op::GetRows),
            (F32, wide, t.min(kept), 1),
            &[batch, inputs.persist_src],
        );
        let dest = view(g, state);
        let write = g.set_rows(dest, rows, inputs.persist_dst);
        g.expand(write);
    }
}

/// CSA's overlapping windows over `src` (`[2w, rows]`): a zero row appended, the read rows
/// gathered, their first and second halves cut apart and joined a block's window long.
fn overlapping(
    g: &mut Graph,
    (src, read_idxs): (usize, usize),
    (w, rows, blocks): (u64, u64, u64),
) -> usize {
    let row = view(g, src);
    let row = node(g, (INPLACE, Op::Scale), (F32, 2 * w, 1, 1), &[row]);
    let row = view(g, row);
    let src = node(
        g,
        (FRESH, Op::Other),
        (F32, 2 * w, rows + 1, 1),
        &[src, row],
    );
    let read = 4 * blocks;
    let gathered = node(
        g,
        (FRESH, Op::GetRows),
        (F32, 2 * w, 2 * read, 1),
        &[src, read_idxs],
    );
    let half = |g: &mut Graph| {
        let v = view(g, gathered);
        let c = node(g, (FRESH, Op::Cont), (F32, w, read, 1), &[v]);
        view(g, c)
    };
    let prev = half(g);
    let cur = half(g);
    let joined = node(g, (FRESH, Op::Other), (F32, w, 8, blocks), &[prev, cur]);
    let joined = view(g, joined);
    node(g, (FRESH, Op::Cont), (F32, 8, w, blocks), &[joined])
}

/// A layer's attention over its normed input `cur`, through the grouped output projection.
pub(super) fn attention(
    d: &Dims<'_>,
    g: &mut Graph,
    inputs: &Inputs,
    cur: usize,
    l: u64,
) -> Option<usize> {
    let compression = d.v4.layer(l);
    let (hd, id) = (d.head, d.v4.indexer_dim);
    match compression {
        Compression::None => {}
        Compression::Hca => compress(
            d,
            g,
            cur,
            (
                &Compressor { width: hd, ..HCA },
                inputs.hca,
                inputs.comp_rot.map(|r| r.1),
            ),
        ),
        Compression::Csa => {
            compress(
                d,
                g,
                cur,
                (
                    &Compressor { width: hd, ..CSA },
                    inputs.csa,
                    inputs.comp_rot.map(|r| r.0),
                ),
            );
            let lid = Compressor { width: id, ..LID };
            compress(d, g, cur, (&lid, inputs.lid, Some(inputs.lid_rot)));
        }
    }
    let (t, heads) = (d.tokens, d.heads);
    let (qr, q, kv) = query_and_key(d, g, inputs, cur);
    g.expand(q);
    g.expand(kv);
    let raw = g.external();
    let rows = view(g, kv);
    let write = g.set_rows(raw, rows, inputs.k_idxs);
    g.expand(write);
    let mt = mask_type(d);
    let (k, mask, cells) = match compression {
        Compression::None => (view(g, raw), inputs.raw_mask, d.raw),
        Compression::Hca => {
            let cells = d.raw + d.hca;
            let k = beside(g, raw, (d.cached_row, cells * d.seqs));
            let srcs = [inputs.raw_mask, inputs.hca.mask];
            (
                k,
                node(g, (FRESH, Op::Other), (mt, cells, t, 1), &srcs),
                cells,
            )
        }
        Compression::Csa => {
            let cells = d.raw + d.csa;
            let k = beside(g, raw, (d.cached_row, cells * d.seqs));
            let picked = top_k_mask(d, g, inputs, (qr, cur));
            let srcs = [inputs.raw_mask, picked];
            (
                k,
                node(g, (FRESH, Op::Other), (mt, cells, t, 1), &srcs),
                cells,
            )
        }
    };
    let sinks = g.vector("attn_sinks.weight", heads);
    let out = mha(d, g, (q, k, sinks), (mask, cells));
    let out = match inputs.raw_rot {
        Some(rot) => {
            let out = rotated(g, out, rot, heads * d.head * t);
            view(g, out)
        }
        None => out,
    };
    Some(grouped_output(d, g, out, inputs.pos))
}

/// The compressed query (for the indexer too), the query's heads RMS-normed and roped, and
/// the shared K=V head normed and roped; a quantized cache's rotation applied to both.
fn query_and_key(
    d: &Dims<'_>,
    g: &mut Graph,
    inputs: &Inputs,
    cur: usize,
) -> (usize, usize, usize) {
    let (t, heads, hd, ql) = (d.tokens, d.heads, d.head, d.v4.q_lora);
    let wq_a = g.matrix("attn_q_a.weight", d.h, ql);
    let qr = node(g, (FRESH, Op::MulMat), (F32, ql, t, 1), &[wq_a, cur]);
    let qr = rms(g, qr, (F32, ql, t, 1), ("attn_q_a_norm.weight", ql));
    let wq_b = g.matrix("attn_q_b.weight", ql, heads * hd);
    let q = node(g, (FRESH, Op::MulMat), (F32, heads * hd, t, 1), &[wq_b, qr]);
    let q = view(g, q);
    let q = node(g, (INPLACE, Op::RmsNorm), (F32, hd, heads, t), &[q]);
    let mut q = node(
        g,
        (INPLACE, Op::Rope),
        (F32, hd, heads, t),
        &[q, inputs.pos],
    );
    let wkv = g.matrix("attn_kv.weight", d.h, hd);
    let kv = node(g, (FRESH, Op::MulMat), (F32, hd, t, 1), &[wkv, cur]);
    let kv = rms(g, kv, (F32, hd, t, 1), ("attn_kv_a_norm.weight", hd));
    let kv = view(g, kv);
    let mut kv = node(g, (INPLACE, Op::Rope), (F32, hd, 1, t), &[kv, inputs.pos]);
    if let Some(rot) = inputs.raw_rot {
        q = rotated(g, q, rot, heads * hd * t);
        kv = rotated(g, kv, rot, hd * t);
    }
    (qr, q, kv)
}

/// `llama_mul_mat_hadamard`: `x`'s `elems` values rotated `rot.n` at a time, in its shape.
fn rotated(g: &mut Graph, x: usize, rot: Rot, elems: u64) -> usize {
    let flat = view(g, x);
    let ne = (F32, rot.n, elems / rot.n, 1);
    let product = node(g, (FRESH, Op::MulMat), ne, &[rot.input, flat]);
    view(g, product)
}

/// The window's keys and a compressed cache's, joined (`ggml_concat`, of the caches' type:
/// `row` bytes a cell, `cells` over every sequence's stream).
fn beside(g: &mut Graph, raw: usize, (row, cells): (u64, u64)) -> usize {
    let raw = view(g, raw);
    let comp = g.external();
    let comp = view(g, comp);
    let comp = view(g, comp);
    node(g, (FRESH, Op::Other), (1, row, 1, cells), &[raw, comp])
}

/// `build_attn_mha` over one shared K=V head with the heads' sinks: flash attention, or the
/// scores, their softmax and the product with V made contiguous and transposed.
fn mha(
    d: &Dims<'_>,
    g: &mut Graph,
    (q, k, sinks): (usize, usize, usize),
    (mask, cells): (usize, u64),
) -> usize {
    let (t, heads, hd) = (d.tokens, d.heads, d.head);
    let q = view(g, q);
    let q = view(g, q);
    if d.fa {
        let kp = view(g, k);
        let vp = view(g, k);
        let out = node(
            g,
            (FRESH, Op::Other),
            (F32, hd, heads, t),
            &[q, kp, vp, mask, sinks],
        );
        g.tensors[out].fa_heads = Some(FaHeads {
            k: hd,
            v: hd,
            gqa: heads,
            cells,
        });
        return view(g, out);
    }
    // Each sequence's rows over its own stream: V is made contiguous a stream at a time.
    let (rows, planes) = (t / d.seqs, heads * d.seqs);
    let vp = view(g, k);
    let vt = view(g, vp);
    let v = node(g, (FRESH, Op::Cont), (F16, cells, hd, d.seqs), &[vt]);
    let kp = view(g, k);
    let scores = (F32, cells, rows, planes);
    let kq = node(g, (FRESH, Op::MulMat), scores, &[kp, q]);
    let kq = node(g, (INPLACE, Op::SoftMax), scores, &[kq, mask, sinks]);
    let kqv = node(g, (FRESH, Op::MulMat), (F32, hd, rows, planes), &[v, kq]);
    let kqv = view(g, kqv);
    node(g, (FRESH, Op::Cont), (F32, hd * heads, t, 1), &[kqv])
}

/// The rows the lightning indexer picks as a mask over the CSA cache: every cell masked, the
/// picked rows zeroed, plus the cache's own mask.
fn top_k_mask(d: &Dims<'_>, g: &mut Graph, inputs: &Inputs, (qr, cur): (usize, usize)) -> usize {
    let (t, mt) = (d.tokens, mask_type(d));
    let k = d.csa.min(d.v4.indexer_top_k);
    let zeros = leaf(g, (mt, 1, k, t));
    let zeros = node(g, (INPLACE, Op::Other), (mt, 1, k, t), &[zeros]);
    let picked = lid_top_k(d, g, inputs, (qr, cur), k);
    let picked = view(g, picked);
    let all: Ne = (mt, d.csa, t, 1);
    let masked = node(g, (INPLACE, Op::Other), all, &[inputs.csa.mask]);
    let masked = view(g, masked);
    let set = g.set_rows(masked, zeros, picked);
    let set = view(g, set);
    node(g, (INPLACE, Op::Add), all, &[set, inputs.csa.mask])
}

/// The lightning indexer (fused, as llama.cpp runs it): its roped and rotated queries, its
/// heads' weights, scored against the cached indexer keys; the top `k` rows a token.
fn lid_top_k(
    d: &Dims<'_>,
    g: &mut Graph,
    inputs: &Inputs,
    (qr, cur): (usize, usize),
    k: u64,
) -> usize {
    let (t, ih, id) = (d.tokens, d.v4.indexer_heads, d.v4.indexer_dim);
    let w = g.matrix("indexer.attn_q_b.weight", d.v4.q_lora, ih * id);
    let q = node(g, (FRESH, Op::MulMat), (F32, ih * id, t, 1), &[w, qr]);
    let q = view(g, q);
    let q = node(g, (INPLACE, Op::Rope), (F32, id, ih, t), &[q, inputs.pos]);
    let q = rotated(g, q, inputs.lid_rot, id * ih * t);
    let q = view(g, q);
    let keys = g.external();
    let keys = view(g, keys);
    let keys = view(g, keys);
    let w = g.matrix("indexer.proj.weight", d.h, ih);
    let weights = node(g, (FRESH, Op::MulMat), (F32, ih, t, 1), &[w, cur]);
    let weights = node(g, (INPLACE, Op::Scale), (F32, ih, t, 1), &[weights]);
    let weights = view(g, weights);
    let srcs = [q, keys, weights, inputs.lid.mask];
    let scores = node(g, (FRESH, Op::Other), (F32, d.csa, t, 1), &srcs);
    let top = node(g, (FRESH, Op::Other), (I32, k, t, 1), &[scores]);
    node(g, (FRESH, Op::Cont), (I32, k, t, 1), &[top])
}

/// The attention's output de-roped, projected a group of heads at a time to `o_lora_rank`,
/// then to the model's width.
fn grouped_output(d: &Dims<'_>, g: &mut Graph, out: usize, pos: usize) -> usize {
    let (t, heads, hd) = (d.tokens, d.heads, d.head);
    let (groups, rank) = (d.v4.o_groups, d.v4.o_lora);
    let out = view(g, out);
    let out = node(g, (INPLACE, Op::Rope), (F32, hd, heads, t), &[out, pos]);
    let out = view(g, out);
    let out = view(g, out);
    let wo_a = g.matrix("attn_output_a.weight", heads * hd, rank);
    let oa = node(g, (FRESH, Op::MulMat), (F32, rank, t, groups), &[wo_a, out]);
    let oa = view(g, oa);
    let oa = node(g, (FRESH, Op::Cont), (F32, rank * groups, t, 1), &[oa]);
    let wo_b = g.matrix("attn_output_b.weight", groups * rank, d.h);
    node(g, (FRESH, Op::MulMat), (F32, d.h, t, 1), &[wo_b, oa])
}
