//! GLM-5-next's latent attention as llama.cpp's `glm5-next` builder makes it
//! (`build_dsa_layer`, `build_kpool_select`): a full-indexer layer caches its tokens' indexer
//! keys and pool gates, pools the keys of the pools the batch completes, scores every pool
//! with the fused lightning indexer, expands the best pools and the incomplete tail into a
//! scatter mask over the cache and folds the causal mask in; a shared layer reuses that mask.
//! The nope-only query absorbs `wk_b`, the cache holds the latent alone, and `wv_b` maps the
//! attended latent back to the heads' values.

use super::graph::*;
use super::recurrent::StateInputs;
use super::shaped::{leaf, node, rms, view, Ne, F16, F32, FRESH, I32, INPLACE};
use crate::model::arch::{G5nLayout, Ssm};

/// The graph's widths: the batch's, the model's and GLM-5-next's own.
#[derive(Clone, Copy)]
pub(super) struct Dims<'a> {
    pub(super) tokens: u64,
    /// The reserve's sequences (each with its own recurrent state), and the latent cache's
    /// streams (one a sequence, or one under `--kv-unified`): each stream's `tokens /
    /// streams` rows attend to its own cells.
    pub(super) seqs: u64,
    pub(super) streams: u64,
    pub(super) outputs: u64,
    pub(super) fa: bool,
    pub(super) h: u64,
    pub(super) heads: u64,
    /// The query's nope width a head, the value's width a head, the q and KV ranks.
    pub(super) head_k: u64,
    pub(super) head_v: u64,
    pub(super) q_lora: u64,
    pub(super) kv_lora: u64,
    pub(super) vocab: u64,
    /// Cells of the latent (and indexer) cache.
    pub(super) cells: u64,
    /// Pools the indexer scores (`n_kpool`, its reserve's padding) and the pools a batch
    /// completes (`n_kpool_new`, reserved for every cell's).
    pub(super) pools: u64,
    pub(super) new_pools: u64,
    /// Cells a token's selection names: the chosen pools' and the incomplete tail's.
    pub(super) selected: u64,
    pub(super) g5n: &'a G5nLayout,
    pub(super) ssm: Ssm,
    pub(super) experts: u64,
    pub(super) used: u64,
    pub(super) expert_ffn: u64,
    pub(super) shared_ffn: u64,
    pub(super) dense_ffn: u64,
    pub(super) dense_lead: u64,
}

/// The graph's inputs, in the order llama.cpp's builder expands them.
pub(super) struct Inputs {
    pub(super) pool_cells: usize,
    pub(super) pool_idxs: usize,
    pub(super) pool_mask: usize,
    pub(super) tail_idxs: usize,
    pub(super) gather_mask: usize,
    pub(super) idx_k_idxs: usize,
    pub(super) new_pool_idxs: usize,
    pub(super) new_pool_rep: usize,
    pub(super) k_idxs: usize,
    pub(super) kq_mask: usize,
    pub(super) states: StateInputs,
}

/// One latent-attention mixer over `cur` in layer `l`; `sel` holds the last full indexer's
/// mask, which a shared-indexer layer reads.
pub(super) fn dsa_layer(
    d: &Dims<'_>,
    g: &mut Graph,
    inputs: &Inputs,
    cur: usize,
    (l, sel): (u64, &mut Option<usize>),
) -> Option<usize> {
    let (t, heads) = (d.tokens, d.heads);
    let w = g.matrix("attn_q_a.weight", d.h, d.q_lora);
    let qr = node(g, (FRESH, Op::MulMat), (F32, d.q_lora, t, 1), &[w, cur]);
    let qr = rms(
        g,
        qr,
        (F32, d.q_lora, t, 1),
        ("attn_q_a_norm.weight", d.q_lora),
    );
    let mask = if d.g5n.full_indexer_at(l) {
        let m = kpool_select(d, g, inputs, (cur, qr));
        *sel = Some(m);
        m
    } else {
        (*sel)?
    };
    let w = g.matrix("attn_q_b.weight", d.q_lora, heads * d.head_k);
    let q = node(
        g,
        (FRESH, Op::MulMat),
        (F32, heads * d.head_k, t, 1),
        &[w, qr],
    );
    let q = view(g, q);
    let q = view(g, q);
    let w = g.matrix("attn_k_b.weight", d.head_k * d.kv_lora, heads);
    let absorbed = node(g, (FRESH, Op::MulMat), (F32, d.kv_lora, t, heads), &[w, q]);
    let absorbed = view(g, absorbed);
    g.expand(absorbed);
    let w = g.matrix("attn_kv_a_mqa.weight", d.h, d.kv_lora);
    let kv = node(g, (FRESH, Op::MulMat), (F32, d.kv_lora, t, 1), &[w, cur]);
    let kv = rms(
        g,
        kv,
        (F32, d.kv_lora, t, 1),
        ("attn_kv_a_norm.weight", d.kv_lora),
    );
    let kv = view(g, kv);
    g.expand(kv);
    let cache = g.external();
    let rows = view(g, kv);
    let stored = g.set_rows(cache, rows, inputs.k_idxs);
    g.expand(stored);
    let mask = view(g, mask);
    let out = mha(d, g, (absorbed, cache), mask);
    let w = g.matrix("attn_output.weight", heads * d.head_v, d.h);
    Some(node(g, (FRESH, Op::MulMat), (F32, d.h, t, 1), &[w, out]))
}

/// `build_attn_mha` over the latent cache (K, and V as its view) with the absorbed query:
/// flash attention, or the scores, their softmax and the product with V made contiguous;
/// then `wv_b` and the heads made contiguous.
fn mha(d: &Dims<'_>, g: &mut Graph, (q, cache): (usize, usize), mask: usize) -> usize {
    let (t, heads, r, cells) = (d.tokens, d.heads, d.kv_lora, d.cells);
    let q = view(g, q);
    let q = view(g, q);
    let k = view(g, cache);
    let kqv = if d.fa {
        let kp = view(g, k);
        let v = view(g, k);
        let vp = view(g, v);
        let out = node(
            g,
            (FRESH, Op::Other),
            (F32, r, heads, t),
            &[q, kp, vp, mask],
        );
        g.tensors[out].fa_heads = Some(FaHeads {
            k: r,
            v: r,
            gqa: heads,
            cells,
        });
        view(g, out)
    } else {
        let v = view(g, k);
        let v = view(g, v);
        let v = view(g, v);
        let (rows, planes) = (t / d.streams, heads * d.streams);
        let v = node(g, (FRESH, Op::Cont), (F16, cells, r, d.streams), &[v]);
        let kp = view(g, k);
        let scores = (F32, cells, rows, planes);
        let kq = node(g, (FRESH, Op::MulMat), scores, &[kp, q]);
        let kq = node(g, (INPLACE, Op::SoftMax), scores, &[kq, mask]);
        node(g, (FRESH, Op::MulMat), (F32, r, rows, planes), &[v, kq])
    };
    let w = g.matrix("attn_v_b.weight", r * d.head_v, heads);
    let out = node(g, (FRESH, Op::MulMat), (F32, d.head_v, t, heads), &[w, kqv]);
    let out = view(g, out);
    node(g, (FRESH, Op::Cont), (F32, d.head_v * heads, t, 1), &[out])
}

/// `build_kpool_select`: the tokens' indexer rows cached, the completed pools' keys pooled and
/// cached, every pool scored, the best pools' cells and the tail scattered into a mask.
fn kpool_select(d: &Dims<'_>, g: &mut Graph, inputs: &Inputs, (cur, qr): (usize, usize)) -> usize {
    let (t, id, kpool) = (d.tokens, d.g5n.indexer.head_dim, d.g5n.kpool);
    let w = g.matrix("indexer.attn_k.weight", d.h, id);
    let k = node(g, (FRESH, Op::MulMat), (F32, id, t, 1), &[w, cur]);
    let k = node(g, (FRESH, Op::Norm), (F32, id, t, 1), &[k]);
    let nw = g.vector("indexer.k_norm.weight", id);
    let k = node(g, (INPLACE, Op::Mul), (F32, id, t, 1), &[k, nw]);
    let nb = g.vector("indexer.k_norm.bias", id);
    let k = node(g, (INPLACE, Op::Add), (F32, id, t, 1), &[k, nb]);
    let w = g.matrix("indexer_compressor_gate.weight", d.h, id);
    let gate = node(g, (FRESH, Op::MulMat), (F32, id, t, 1), &[w, cur]);
    let kg = node(g, (FRESH, Op::Other), (F32, 2 * id, t, 1), &[k, gate]);
    let zero = leaf(g, (F32, id, t, 1));
    let zero = node(g, (INPLACE, Op::Other), (F32, id, t, 1), &[zero]);
    let packed = node(g, (FRESH, Op::Other), (F32, 3 * id, t, 1), &[kg, zero]);
    let packed = view(g, packed);
    let packed = view(g, packed);
    let cache = g.external();
    let stored = g.set_rows(cache, packed, inputs.idx_k_idxs);
    g.expand(stored);
    let pooled_new = pool_new(d, g, inputs, cache);
    let dest = view(g, cache);
    let written = g.set_rows(dest, pooled_new, inputs.new_pool_rep);
    g.expand(written);
    let top = top_pools(d, g, inputs, (cur, qr), dest);
    scatter(d, g, inputs, top, kpool)
}

/// The keys of the pools the batch completes: each pool's gathered keys weighted by a
/// softmax of its gates (plus the position bias) and summed.
fn pool_new(d: &Dims<'_>, g: &mut Graph, inputs: &Inputs, cache: usize) -> usize {
    let (id, kpool, n) = (d.g5n.indexer.head_dim, d.g5n.kpool, d.new_pools);
    let rows = view(g, cache);
    let ids = view(g, inputs.new_pool_idxs);
    let rows = node(
        g,
        (FRESH, Op::GetRows),
        (F32, 2 * id, kpool * n, 1),
        &[rows, ids],
    );
    let rows3 = view(g, rows);
    let gates = view(g, rows3);
    let ape = g.vector("indexer_compressor_ape.weight", id * kpool);
    let logits = node(g, (INPLACE, Op::Add), (F32, id, kpool, n), &[gates, ape]);
    let logits = view(g, logits);
    let flat: Ne = (F32, kpool, id * n, 1);
    let logits = node(g, (FRESH, Op::Cont), flat, &[logits]);
    let logits = view(g, logits);
    let probs = node(g, (INPLACE, Op::SoftMax), flat, &[logits]);
    let probs = view(g, probs);
    let keys = view(g, rows3);
    let keys = view(g, keys);
    let keys = node(g, (FRESH, Op::Cont), (F32, kpool, id, n), &[keys]);
    let weighted = node(g, (INPLACE, Op::Mul), flat, &[probs, keys]);
    let pooled = node(g, (FRESH, Op::SumRows), (F32, 1, id, n), &[weighted]);
    view(g, pooled)
}

/// The fused lightning indexer's scores over every pool, its top pools a token ordered by
/// descending score, as i32 (`indexer_top_k`).
fn top_pools(
    d: &Dims<'_>,
    g: &mut Graph,
    inputs: &Inputs,
    (cur, qr): (usize, usize),
    pooled_keys: usize,
) -> usize {
    let (t, ih, id) = (d.tokens, d.g5n.indexer.heads, d.g5n.indexer.head_dim);
    let top = d.pools.min(d.g5n.indexer.top_k / d.g5n.kpool);
    let w = g.matrix("indexer.attn_q_b.weight", d.q_lora, ih * id);
    let q = node(g, (FRESH, Op::MulMat), (F32, ih * id, t, 1), &[w, qr]);
    let q = view(g, q);
    let keys = node(
        g,
        (FRESH, Op::GetRows),
        (F32, id, d.pools, 1),
        &[pooled_keys, inputs.pool_cells],
    );
    let keys = view(g, keys);
    let w = g.matrix("indexer.proj.weight", d.h, ih);
    let weights = node(g, (FRESH, Op::MulMat), (F32, ih, t, 1), &[w, cur]);
    let weights = node(g, (INPLACE, Op::Scale), (F32, ih, t, 1), &[weights]);
    let srcs = [q, keys, weights, inputs.pool_mask];
    let scores = node(g, (FRESH, Op::Other), (F32, d.pools, t, 1), &srcs);
    let picked = node(g, (FRESH, Op::Other), (I32, top, t, 1), &[scores]);
    let picked_f = node(g, (FRESH, Op::Cpy), (F32, top, t, 1), &[picked]);
    let picked_f = view(g, picked_f);
    let scores3 = view(g, scores);
    let sel_score = node(
        g,
        (FRESH, Op::GetRows),
        (F32, 1, top, t),
        &[scores3, picked],
    );
    let sel_score = view(g, sel_score);
    let order = node(g, (FRESH, Op::ArgSort), (I32, top, t, 1), &[sel_score]);
    let ordered = node(
        g,
        (FRESH, Op::GetRows),
        (F32, 1, top, t),
        &[picked_f, order],
    );
    let ordered = view(g, ordered);
    let ordered = node(g, (FRESH, Op::Cont), (F32, top, t, 1), &[ordered]);
    node(g, (FRESH, Op::Cpy), (I32, top, t, 1), &[ordered])
}

/// The scatter mask: the chosen pools' cells (and the tail's) zeroed in a row of −∞ a token,
/// dead slots sent to dump rows past the cache, the causal mask added.
fn scatter(d: &Dims<'_>, g: &mut Graph, inputs: &Inputs, top: usize, kpool: u64) -> usize {
    let (t, n_sel, mt) = (d.tokens, d.selected, d.mask_type());
    let top = view(g, top);
    let cells = node(
        g,
        (FRESH, Op::GetRows),
        (I32, kpool, d.pools.min(d.g5n.indexer.top_k / kpool) * t, 1),
        &[inputs.pool_idxs, top],
    );
    let cells = view(g, cells);
    let sel_idx = node(
        g,
        (FRESH, Op::Other),
        (I32, n_sel, t, 1),
        &[cells, inputs.tail_idxs],
    );
    let first = view(g, sel_idx);
    let seed = node(g, (FRESH, Op::Cpy), (F32, 1, 1, 1), &[first]);
    let zero = node(g, (INPLACE, Op::Other), (F32, 1, 1, 1), &[seed]);
    let zeros = node(g, (FRESH, Op::Other), (F32, 1, n_sel, t), &[zero]);
    let zeros = view(g, zeros);
    let idx = node(g, (FRESH, Op::Cpy), (F32, n_sel, t, 1), &[sel_idx]);
    let dump = node(g, (FRESH, Op::Other), (F32, n_sel, 1, 1), &[]);
    let idx = node(g, (INPLACE, Op::Other), (F32, n_sel, t, 1), &[idx, dump]);
    let live = view(g, inputs.gather_mask);
    let live = node(g, (INPLACE, Op::Unary), (F32, n_sel, t, 1), &[live]);
    let idx = node(g, (INPLACE, Op::Mul), (F32, n_sel, t, 1), &[idx, live]);
    let idx = node(g, (INPLACE, Op::Add), (F32, n_sel, t, 1), &[idx, dump]);
    let idx = node(g, (FRESH, Op::Cpy), (I32, n_sel, t, 1), &[idx]);
    let idx = view(g, idx);
    let mask_seed = if d.fa {
        node(g, (FRESH, Op::Cpy), (F16, 1, 1, 1), &[seed])
    } else {
        seed
    };
    let mask_seed = node(g, (INPLACE, Op::Other), (mt, 1, 1, 1), &[mask_seed]);
    let all = node(
        g,
        (FRESH, Op::Other),
        (mt, 1, d.cells + n_sel, t),
        &[mask_seed],
    );
    let all = view(g, all);
    let set = g.set_rows(all, zeros, idx);
    let set = view(g, set);
    let causal = view(g, inputs.kq_mask);
    node(g, (INPLACE, Op::Add), (mt, d.cells, t, 1), &[set, causal])
}
