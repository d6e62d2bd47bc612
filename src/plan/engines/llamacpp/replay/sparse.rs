//! DeepSeek-V3.2's sparse attention as llama.cpp's `deepseek32` builder makes it: the lightning
//! indexer (its key LayerNormed, RoPE'd, Hadamard-rotated and cached in a cache of its own; its
//! query from the compressed query; per-head weights from the layer's input) scores every cached
//! token for each query, and the `top_k` best are unmasked in a copy of the attention's mask
//! (`build_attn` over `llm_graph_input_attn_k_dsa`).

use super::graph::*;
use super::inputs::CacheInputs;

/// Layer `layer`'s sparse mask: its indexer's (keeping its top-k in `lazy`), or, in a layer
/// that shares the previous full layer's (GLM-5.2), the mask that top-k leaves open.
pub(super) fn layer_mask(
    c: &super::Ctx<'_>,
    g: &mut Graph,
    lazy: &mut super::Lazy,
    (cur, q_in, rank, layer): (usize, usize, u64, u64),
    d: crate::model::Indexer,
    inputs: CacheInputs,
) -> Option<usize> {
    if c.arch.indexer_shared.contains(layer) {
        return Some(unmasked(g, inputs, lazy.top_k?));
    }
    let (mask, top_k) = sparse_mask(c, g, (cur, q_in, rank), d, inputs)?;
    lazy.top_k = Some(top_k);
    Some(mask)
}

/// The layer's sparse mask over the latent cache: the indexer's keys written to their cache
/// (expanded here, before the attention's own Q, K and V, as the builder orders them), then,
/// unexpanded, the scores, their top-k, and the attention mask with only those cells open;
/// with the top-k and its bytes.
/// `cur` is the layer's normed input, `q_in` the normed compressed query.
fn sparse_mask(
    c: &super::Ctx<'_>,
    g: &mut Graph,
    (cur, q_in, rank): (usize, usize, u64),
    d: crate::model::Indexer,
    inputs: CacheInputs,
) -> Option<(usize, (usize, u64))> {
    let ix = inputs.indexer?;
    let h = c.arch.hidden_size;
    let key = c.width(d.head_dim)?;
    let query = c.width(d.heads.checked_mul(d.head_dim)?)?;
    // The key: projected, LayerNormed with its bias, RoPE'd, rotated, cached.
    let w_k = g.matrix("indexer.attn_k.weight", h, d.head_dim);
    let k = g.op(Kind::Fresh, key, OTHER, &[w_k, cur]);
    let k = g.op(Kind::Fresh, key, OTHER, &[k]);
    g.tag(k, Op::Norm);
    let w_norm = g.vector("indexer.k_norm.weight", d.head_dim);
    let k = g.op(Kind::InPlace, key, OTHER, &[k, w_norm]);
    let b_norm = g.vector("indexer.k_norm.bias", d.head_dim);
    let k = g.op(Kind::InPlace, key, OTHER, &[k, b_norm]);
    let k = rotated(g, c.pos, ix.rotation, (k, key));
    let cache = g.external();
    g.tensors[cache].bytes = sat(c
        .kv_type
        .bytes_for(u128::from(inputs.cells) * u128::from(d.head_dim)));
    let rows = g.view(k, OTHER);
    let stored = g.set_rows(cache, rows, ix.k_idxs);
    g.expand(stored);
    // The query from the compressed query, and the heads' weights, pre-scaled.
    let w_q = g.matrix(
        "indexer.attn_q_b.weight",
        rank,
        d.heads.saturating_mul(d.head_dim),
    );
    let q = g.op(Kind::Fresh, query, OTHER, &[w_q, q_in]);
    let q = rotated(g, c.pos, ix.rotation, (q, query));
    let w_proj = g.matrix("indexer.proj.weight", h, d.heads);
    let weights = g.op(Kind::Fresh, c.width(d.heads)?, OTHER, &[w_proj, cur]);
    let weights = g.view(weights, OTHER);
    let weights = g.op(Kind::InPlace, c.width(d.heads)?, OTHER, &[weights]);
    g.tag(weights, Op::Scale);
    // The fused lightning indexer: one f32 score a cell and token, then the top-k cells.
    let keys = g.view(cache, OTHER);
    let q = g.view(q, OTHER);
    let cells_f32 = inputs.cells.checked_mul(c.tokens)?.checked_mul(4)?;
    let scores = g.op(Kind::Fresh, cells_f32, OTHER, &[q, keys, weights, ix.mask]);
    let top = inputs.cells.min(d.top_k);
    let top_bytes = top.checked_mul(c.tokens)?.checked_mul(4)?;
    let top_k = g.op(Kind::Fresh, top_bytes, OTHER, &[scores]);
    g.tag(top_k, Op::ArgSort);
    let top_k = g.op(Kind::Fresh, top_bytes, OTHER, &[top_k]);
    g.tag(top_k, Op::Cont);
    Some((unmasked(g, inputs, (top_k, top_bytes)), (top_k, top_bytes)))
}

/// `cur` RoPE'd (NeoX, over a reshape of it: a fresh tensor) and multiplied by the Hadamard
/// rotation input.
fn rotated(g: &mut Graph, pos: usize, rotation: usize, (cur, bytes): (usize, u64)) -> usize {
    let cur = g.view(cur, OTHER);
    let cur = g.op(Kind::InPlace, bytes, OTHER, &[cur, pos]);
    g.tag(cur, Op::Rope);
    let cur = g.op(Kind::Fresh, bytes, OTHER, &[rotation, cur]);
    g.tag(cur, Op::MulMat)
}

/// The attention mask with only the `top_k` cells open: the mask filled with −∞ (a copy), a
/// zero (an f32 leaf the allocator places, filled in its own memory) written to each chosen
/// cell's row, and the original mask added.
fn unmasked(g: &mut Graph, inputs: CacheInputs, (top_k, top_bytes): (usize, u64)) -> usize {
    let mask_bytes = g.tensors[inputs.mask].bytes;
    let closed = g.op(Kind::InPlace, mask_bytes, SCORES, &[inputs.mask]);
    g.tag(closed, Op::Other);
    let closed = g.view(closed, OTHER);
    let chosen = g.view(top_k, OTHER);
    let zeros = g.input(top_bytes);
    // A leaf of the graph, not an input: its fill may take its memory.
    g.tensors[zeros].input = false;
    g.tensors[zeros].layout = WEIGHTS;
    let zeros = g.op(Kind::InPlace, top_bytes, WEIGHTS, &[zeros]);
    g.tag(zeros, Op::Other);
    let opened = g.set_rows(closed, zeros, chosen);
    let opened = g.view(opened, OTHER);
    let mask = g.op(Kind::InPlace, mask_bytes, SCORES, &[opened, inputs.mask]);
    g.tag(mask, Op::Add)
}
