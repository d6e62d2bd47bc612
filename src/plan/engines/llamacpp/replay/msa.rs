//! MiniMax Sparse Attention as llama.cpp's `minimax-m3` builder makes it under flash attention
//! (without it every layer attends densely): an indexer of one head a KV head, cached in a
//! second cache, scores blocks of positions; each query keeps its top-k blocks, whose mask,
//! expanded from blocks to cells and added to the causal mask, goes to one flash attention
//! over every KV head at once. The block tensors span the positions in the cache padded to
//! 256 (`get_n_pos`), which at reservation (an empty cache) is 256 whatever the context.

use super::attention::caches;
use super::graph::*;
use super::inputs::CacheInputs;
use super::{Ctx, Lazy};
use crate::model::arch::Msa;

/// Positions the reserved graph's block tensors span: the cache is empty then, and
/// `get_n_pos` pads to at least 256.
const RESERVED_POSITIONS: u64 = 256;

/// The graph's MSA inputs, made on the first sparse layer's use: the indexer cache's row
/// indices (i64 a token), the local blocks' bias (f32 a block and token), the positions'
/// mask (f32 a position and token), their cells (i32 a position of each stream), the cells'
/// blocks (i32 a cell of each stream) and the causal mask cast to f32.
#[derive(Debug, Clone, Copy)]
pub(super) struct MsaInputs {
    k_idxs: usize,
    bias: usize,
    pos_mask: usize,
    pos_slot: usize,
    cell_blk: usize,
    mask_f32: usize,
}

impl MsaInputs {
    fn new(c: &Ctx<'_>, g: &mut Graph, m: Msa, mask: usize) -> Option<Self> {
        let (t, cells) = (c.tokens, c.full.cells);
        let blocks = RESERVED_POSITIONS.div_ceil(m.block);
        let k_idxs = g.input(t.checked_mul(8)?);
        let bias = g.input(blocks.checked_mul(t)?.checked_mul(4)?);
        let pos_mask = g.input(RESERVED_POSITIONS.checked_mul(t)?.checked_mul(4)?);
        let pos_slot = g.input(RESERVED_POSITIONS.checked_mul(4)?.checked_mul(c.streams)?);
        let cell_blk = g.input(cells.checked_mul(4)?.checked_mul(c.streams)?);
        let mask_f32 = g.op(
            Kind::Fresh,
            cells.checked_mul(t)?.checked_mul(4)?,
            OTHER,
            &[mask],
        );
        g.tag(mask_f32, Op::Cpy);
        Some(MsaInputs {
            k_idxs,
            bias,
            pos_mask,
            pos_slot,
            cell_blk,
            mask_f32,
        })
    }
}

/// A sparse layer's attention over its normed input `cur`, up to the output projection: Q, K
/// and V normed per head and RoPE'd, the indexer's query and key likewise, its key cached,
/// then, a stream at a time (each sequence's own cache, its `tokens / streams` rows), the
/// block scores, their top-k, the mask they open and the flash attention under it; the
/// streams' outputs joined.
pub(super) fn sparse(
    c: &Ctx<'_>,
    g: &mut Graph,
    lazy: &mut Lazy,
    cur: usize,
    inputs: CacheInputs,
) -> Option<usize> {
    let m = c.b.msa?;
    let ins = match lazy.msa {
        Some(i) => i,
        None => *lazy.msa.insert(MsaInputs::new(c, g, m, inputs.mask)?),
    };
    let arch = c.arch;
    let (q, k, v) = super::attention::normed_roped_qkv(c, g, cur)?;
    // The indexer's query (a head a KV head) and key, normed and RoPE'd as Q and K are.
    let h = arch.hidden_size;
    let (iq_bytes, ik_bytes) = (
        c.width(m.heads.checked_mul(m.head_dim)?)?,
        c.width(m.head_dim)?,
    );
    let w = g.matrix(
        "indexer.q_proj.weight",
        h,
        m.heads.saturating_mul(m.head_dim),
    );
    let iq = g.op(Kind::Fresh, iq_bytes, OTHER, &[w, cur]);
    let w = g.matrix("indexer.k_proj.weight", h, m.head_dim);
    let ik = g.op(Kind::Fresh, ik_bytes, OTHER, &[w, cur]);
    let iq = g.view(iq, Q3);
    let ik = g.view(ik, K3);
    let iq = index_norm_rope(
        c,
        g,
        iq,
        (iq_bytes, Q3),
        ("indexer.q_norm.weight", m.head_dim),
    );
    let ik = index_norm_rope(
        c,
        g,
        ik,
        (ik_bytes, K3),
        ("indexer.k_norm.weight", m.head_dim),
    );
    let idx_cache = g.external();
    g.tensors[idx_cache].bytes = sat(c
        .kv_type
        .bytes_for(u128::from(inputs.cells) * u128::from(m.head_dim)));
    let rows = g.view(ik, OTHER);
    let stored = g.set_rows(idx_cache, rows, ins.k_idxs);
    g.expand(stored);
    let ik_kv = g.view(idx_cache, OTHER);
    // The attention's Q, K and V, K and V cached.
    g.expand(q);
    g.expand(k);
    g.expand(v);
    let (k_cache, v_cache) = caches(c, g, inputs.cells, (c.kv_dim, c.kv_dim));
    let k_rows = g.view(k, OTHER);
    let stored = g.set_rows(k_cache, k_rows, inputs.k_idxs);
    g.expand(stored);
    let v_rows = g.view(v, OTHER);
    let stored = g.set_rows(v_cache, v_rows, inputs.v_idxs);
    g.expand(stored);
    let k_all = g.view(k_cache, OTHER);
    let v_all = g.view(v_cache, OTHER);
    let streams = c.streams.max(1);
    let (rows, query) = (c.tokens / streams, c.query / streams);
    let mut joined: Option<(usize, u64)> = None;
    for _ in 0..streams {
        let mask = block_mask(c, g, m, ins, (iq, ik_kv), rows)?;
        // One flash attention over every KV head's group, then its heads put back in order.
        let q_s = g.view(q, OTHER);
        let (k_s, v_s) = (g.view(k_all, OTHER), g.view(v_all, OTHER));
        let (kfa, vfa) = (g.view(k_s, OTHER), g.view(v_s, OTHER));
        let q4 = g.view(q_s, OTHER);
        let qp = g.view(q4, OTHER);
        let o = g.op(Kind::Fresh, query, OTHER, &[qp, kfa, vfa, mask]);
        g.tensors[o].fa_f16 = super::attention::f16_copies(c, inputs.cells, c.kv_dim, c.kv_dim);
        g.tensors[o].fa_heads = Some(FaHeads::grouped(arch, inputs.cells));
        let o = g.view(o, OTHER);
        let o = g.op(Kind::Fresh, query, QUERY, &[o]);
        g.tag(o, Op::Cont);
        let o = g.view(o, QUERY);
        // The streams' outputs joined one after another (`ggml_concat`).
        joined = Some(match joined {
            None => (o, query),
            Some((all, bytes)) => {
                let bytes = bytes + query;
                let all = g.op(Kind::Fresh, bytes, QUERY, &[all, o]);
                (g.tag(all, Op::Other), bytes)
            }
        });
    }
    joined.map(|(o, _)| o)
}

/// `build_norm` (RMS, times its weight) then RoPE over an indexer query or key.
fn index_norm_rope(
    c: &Ctx<'_>,
    g: &mut Graph,
    x: usize,
    (bytes, layout): (u64, u64),
    (weight, n): (&'static str, u64),
) -> usize {
    let x = g.op(Kind::InPlace, bytes, layout, &[x]);
    g.tag(x, Op::RmsNorm);
    let w = g.vector(weight, n);
    let x = g.op(Kind::InPlace, bytes, layout, &[x, w]);
    let x = g.op(Kind::InPlace, bytes, layout, &[x, c.pos]);
    g.tag(x, Op::Rope)
}

/// The f16 mask of each KV head's group over a stream's `t` rows: the indexer's scores of
/// every position, max-pooled by block, biased so the local blocks rank first, their top-k
/// opened in a mask of -inf blocks, expanded to the cells through each cell's block and added
/// to the causal mask.
fn block_mask(
    c: &Ctx<'_>,
    g: &mut Graph,
    m: Msa,
    ins: MsaInputs,
    (iq, ik_kv): (usize, usize),
    t: u64,
) -> Option<usize> {
    let (cells, heads) = (c.full.cells, m.heads);
    let blocks = RESERVED_POSITIONS.div_ceil(m.block);
    let top = m.top_k_blocks.min(blocks);
    let f32s = |n: u64| n.checked_mul(4);
    let per_token = |n: u64| n.checked_mul(heads)?.checked_mul(t);
    // The stream's views.
    let iq_s = g.view(iq, OTHER);
    let ik_s = g.view(ik_kv, OTHER);
    let psl_s = g.view(ins.pos_slot, OTHER);
    let pm_s = g.view(ins.pos_mask, OTHER);
    let cb_s = g.view(ins.cell_blk, OTHER);
    let mf_s = g.view(ins.mask_f32, OTHER);
    let bias_s = g.view(ins.bias, OTHER);
    let idx = top_blocks(g, m, t, [iq_s, ik_s, psl_s, pm_s, bias_s])?;
    // The block mask: -inf everywhere, 0 at the top-k blocks.
    let ninf = g.op(
        Kind::InPlace,
        f32s(blocks.checked_mul(t)?)?,
        OTHER,
        &[bias_s],
    );
    g.tag(ninf, Op::Scale);
    let ninf = g.op(
        Kind::Fresh,
        blocks.checked_mul(t)?.checked_mul(2)?,
        OTHER,
        &[ninf],
    );
    g.tag(ninf, Op::Cpy);
    let ninf = g.op(
        Kind::Fresh,
        per_token(blocks)?.checked_mul(2)?,
        OTHER,
        &[ninf],
    );
    g.tag(ninf, Op::Other);
    let zero = g.op(Kind::Fresh, f32s(per_token(top)?)?, WEIGHTS, &[idx]);
    g.tag(zero, Op::Cpy);
    let zero = g.op(Kind::InPlace, f32s(per_token(top)?)?, WEIGHTS, &[zero]);
    g.tag(zero, Op::Scale);
    let ninf_r = g.view(ninf, OTHER);
    let zero_r = g.view(zero, OTHER);
    let idx_r = g.view(idx, OTHER);
    let bm = g.set_rows(ninf_r, zero_r, idx_r);
    let bm = g.view(bm, OTHER);
    let bm = g.view(bm, OTHER);
    let half = per_token(blocks)?.checked_mul(2)?;
    let bm = g.op(Kind::Fresh, half, OTHER, &[bm]);
    g.tag(bm, Op::Cont);
    let bm2 = g.view(bm, OTHER);
    let bm2 = g.view(bm2, OTHER);
    let bm2 = g.op(Kind::Fresh, half, OTHER, &[bm2]);
    g.tag(bm2, Op::Cont);
    // Blocks to cells, then the causal mask added, cast to f16.
    let cell_bytes = f32s(per_token(cells)?)?;
    let bmc = g.op(Kind::Fresh, cell_bytes, OTHER, &[bm2, cb_s]);
    g.tag(bmc, Op::GetRows);
    let bmx = g.view(bmc, OTHER);
    let bmx = g.op(Kind::Fresh, cell_bytes, OTHER, &[bmx]);
    g.tag(bmx, Op::Cont);
    let bmx = g.view(bmx, OTHER);
    let mask4 = g.write(bmx, &[bmx, mf_s]);
    g.tag(mask4, Op::Add);
    let mask4 = g.view(mask4, OTHER);
    let mask = g.op(
        Kind::Fresh,
        per_token(cells)?.checked_mul(2)?,
        OTHER,
        &[mask4],
    );
    Some(g.tag(mask, Op::Cpy))
}

/// The top-k blocks' indices of each token and head: every position's indexer score (the keys
/// gathered through the positions' cells), summed over blocks, biased, sorted. `views`: the
/// stream's indexer queries and keys, position slots, position mask and block bias.
fn top_blocks(g: &mut Graph, m: Msa, t: u64, views: [usize; 5]) -> Option<usize> {
    let [iq_s, ik_s, psl_s, pm_s, bias_s] = views;
    let heads = m.heads;
    let blocks = RESERVED_POSITIONS.div_ceil(m.block);
    let top = m.top_k_blocks.min(blocks);
    let f32s = |n: u64| n.checked_mul(4);
    let per_token = |n: u64| n.checked_mul(heads)?.checked_mul(t);
    // Scores of every position (the indexer keys gathered through the positions' cells).
    let ikp = g.op(
        Kind::Fresh,
        f32s(m.head_dim.checked_mul(RESERVED_POSITIONS)?)?,
        OTHER,
        &[ik_s, psl_s],
    );
    g.tag(ikp, Op::GetRows);
    let iq2 = g.view(iq_s, OTHER);
    let sc = g.op(
        Kind::Fresh,
        f32s(per_token(RESERVED_POSITIONS)?)?,
        OTHER,
        &[ikp, iq2],
    );
    g.tag(sc, Op::MulMat);
    let sc = g.view(sc, OTHER);
    let sc = g.write(sc, &[sc, pm_s]);
    g.tag(sc, Op::Add);
    let block_bytes = f32s(per_token(blocks)?)?;
    let bs = g.op(Kind::Fresh, block_bytes, SCORES, &[sc]);
    g.tag(bs, Op::Other);
    let bsf = g.op(Kind::InPlace, block_bytes, SCORES, &[bs, bias_s]);
    g.tag(bsf, Op::Add);
    let idx = g.op(Kind::Fresh, f32s(per_token(top)?)?, ROUTER_IDS, &[bsf]);
    g.tag(idx, Op::ArgSort);
    Some(idx)
}
