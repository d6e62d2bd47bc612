//! Gemma 4's attention (llama.cpp's `gemma4` builder): the full layers' heads of their own size
//! and count, V RMS-normed without a weight (in the full layers V is the K projection itself, two
//! views of one product), no scale op on the query; and each layer's output multiplied by its
//! scalar.

use super::attention::{
    attend, attend_cached, caches, f16_copies, metal_scratch, AttentionStep, Unrotated,
};
use super::ffn::{dense, experts_over, router_logits};
use super::graph::*;
use super::{norm, CacheInputs, Ctx, NormNames, FFN_NORM, K_NORM, POST_FFN_NORM, Q_NORM};
use crate::model::ModelArch;

/// The architecture as a full layer sees it: its head size and KV heads in place of the sliding
/// layers'; `None` without full layers of their own.
pub(super) fn full_layers(arch: &ModelArch) -> Option<ModelArch> {
    let f = arch.full_attention?;
    Some(ModelArch {
        head_dim: f.head_dim,
        num_kv_heads: f.kv_heads,
        ..arch.clone()
    })
}

/// `c`'s sizes at `full`'s widths (from [`full_layers`]).
pub(super) fn full_ctx<'b>(c: &Ctx<'b>, full: &'b ModelArch) -> Option<Ctx<'b>> {
    let q_dim = full.num_heads.checked_mul(full.head_dim)?;
    let kv_dim = full.num_kv_heads.checked_mul(full.head_dim)?;
    Some(Ctx {
        arch: full,
        q_dim,
        kv_dim,
        query: c.width(q_dim)?,
        kv: c.width(kv_dim)?,
        ..*c
    })
}

/// One layer's attention before its output projection: Q, K and V projected (V is K's product
/// where the layer has no V projection), q and k normed with their weights, V without, RoPE on
/// q and k, then `build_attn` over the layer's cache (a KV-sharing layer's Q alone, over the
/// cache it reads).
pub(super) fn grouped(
    c: &Ctx<'_>,
    g: &mut Graph,
    cur: usize,
    layer: u64,
    inputs: CacheInputs,
) -> Option<usize> {
    let arch = c.arch;
    let (h, head) = (arch.hidden_size, arch.head_dim);
    let (query, kv) = (c.query, c.kv);
    let k_eq_v = arch
        .full_attention
        .is_some_and(|f| f.k_eq_v && !arch.is_sliding_layer(layer));
    let wq = g.matrix("attn_q.weight", h, c.q_dim);
    let q = g.op(Kind::Fresh, query, QUERY, &[wq, cur]);
    let q = g.view(q, Q3);
    let q = norm(c, g, q, (query, Q3), (Q_NORM, head));
    let q = g.op(Kind::InPlace, query, Q3, &[q, c.pos]);
    g.tag(q, Op::Rope);
    let step = AttentionStep {
        k_idxs: inputs.k_idxs,
        v_idxs: inputs.v_idxs,
        mask: inputs.mask,
        scores: inputs.scores,
        out: query,
        v_copy: None,
        flash_attention: c.flash_attention,
        f16_copies: f16_copies(c, inputs.cells, c.kv_dim, c.kv_dim),
        heads: FaHeads::grouped(arch, inputs.cells),
        metal: metal_scratch(
            c,
            inputs.cells,
            (arch.num_heads, arch.num_kv_heads),
            (head, head),
        ),
        paired: true,
        rotations: inputs.rotations,
        unrotated: Unrotated {
            bytes: [query, kv, kv],
            contiguous: [true; 3],
        },
    };
    // Without flash attention the V cache's rows are as wide as the widest layer's.
    let v_width = match c.flash_attention {
        true => c.kv_dim,
        false => arch.widest_v(),
    };
    // A KV-sharing layer (E2B, E4B) reads the caches of an earlier layer of its kind, which
    // live with that layer.
    if let Some(source) = arch.kv_source(layer) {
        let part = std::mem::replace(&mut g.part, Part::Layer(source));
        let caches = caches(c, g, inputs.cells, (c.kv_dim, v_width));
        g.part = part;
        return Some(attend_cached(g, q, caches, &step));
    }
    let wk = g.matrix("attn_k.weight", h, c.kv_dim);
    let k = g.op(Kind::Fresh, kv, KV, &[wk, cur]);
    let v = if k_eq_v {
        k
    } else {
        let wv = g.matrix("attn_v.weight", h, c.kv_dim);
        g.op(Kind::Fresh, kv, KV, &[wv, cur])
    };
    let k = g.view(k, K3);
    let v = g.view(v, K3);
    let k = norm(c, g, k, (kv, K3), (K_NORM, head));
    let v = g.op(Kind::InPlace, kv, K3, &[v]);
    g.tag(v, Op::RmsNorm);
    let k = g.op(Kind::InPlace, kv, K3, &[k, c.pos]);
    g.tag(k, Op::Rope);
    let caches = caches(c, g, inputs.cells, (c.kv_dim, v_width));
    Some(attend(g, [q, k, v], caches, &step))
}

/// The layer's output multiplied by its scalar (`layer_output_scale`).
pub(super) fn output_scale(c: &Ctx<'_>, g: &mut Graph, out: usize) -> usize {
    let w = g.vector("layer_output_scale.weight", 1);
    let t = g.op(Kind::InPlace, c.model, MODEL, &[out, w]);
    g.tag(t, Op::Mul)
}

const PRE_FFN_NORM_2: NormNames = ("pre_ffw_norm_2.weight", "pre_ffw_norm_2.bias");
const POST_FFN_NORM_1: NormNames = ("post_ffw_norm_1.weight", "post_ffw_norm_1.bias");
const POST_FFN_NORM_2: NormNames = ("post_ffw_norm_2.weight", "post_ffw_norm_2.bias");

/// A mixture-of-experts layer's feed-forward half over `ffn_inp` (26B-A4B): the dense MLP on
/// its norm and post-norm, beside the experts on theirs, routed by logits over a weightless norm
/// of `ffn_inp` scaled by `1/√width` and a weight; their sum post-normed, then the residual.
pub(super) fn moe_half(c: &Ctx<'_>, g: &mut Graph, ffn_inp: usize) -> Option<usize> {
    let (model, h) = (c.model, c.arch.hidden_size);
    let m = c.moe?;
    let (n, e) = c
        .arch
        .moe
        .as_ref()
        .map(|m| (m.shared_intermediate, m.experts))?;
    let mlp = norm(c, g, ffn_inp, (model, MODEL), (FFN_NORM, h));
    let mlp = dense(c, g, mlp, (m.shared, n), false);
    let mlp = norm(c, g, mlp, (model, MODEL), (POST_FFN_NORM_1, h));
    let moe = norm(c, g, ffn_inp, (model, MODEL), (PRE_FFN_NORM_2, h));
    let x = g.op(Kind::InPlace, model, MODEL, &[ffn_inp]);
    g.tag(x, Op::RmsNorm);
    let x = g.op(Kind::InPlace, model, MODEL, &[x]);
    g.tag(x, Op::Scale);
    let s = g.ffn_weight(FfnClass::Gate, ("ffn_gate_inp.scale", h, false));
    let x = g.op(Kind::InPlace, model, MODEL, &[x, s]);
    let logits = router_logits(g, x, m.router, (h, e));
    let moe = experts_over(c, g, moe, &m, Some(logits));
    let moe = norm(c, g, moe, (model, MODEL), (POST_FFN_NORM_2, h));
    let sum = g.op(Kind::InPlace, model, MODEL, &[mlp, moe]);
    g.tag(sum, Op::Add);
    let out = norm(c, g, sum, (model, MODEL), (POST_FFN_NORM, h));
    let out = g.op(Kind::InPlace, model, MODEL, &[out, ffn_inp]);
    Some(g.tag(out, Op::Add))
}

/// A per-layer embedding's norm (the projection's) and each layer's norm after its per-layer
/// input.
const PER_LAYER_PROJ_NORM: NormNames = ("per_layer_proj_norm.weight", "per_layer_proj_norm.bias");
const PER_LAYER_POST_NORM: NormNames = ("post_norm.weight", "post_norm.bias");

// Layouts of the per-layer inputs for the in-place check: all layers' values a token (as
// looked up and projected), the same split a layer ([width, layers, tokens]), permuted layer
// by layer ([width, tokens, layers]), and one layer's ([width, tokens]).
const PLE_ROWS: u64 = 17;
const PLE_SPLIT: u64 = 18;
const PLE_PERMUTED: u64 = 19;
const PLE_BY_LAYER: u64 = 20;
const PLE_LAYER: u64 = 21;

/// E2B's and E4B's per-layer inputs (`build_inp_per_layer`, `project_per_layer_inputs`): every
/// layer's rows of the per-layer table for the batch's tokens (their own input), scaled, made
/// in the graph at once; the model's embeddings `inp_embd` projected to them, scaled, normed,
/// added and scaled, then made contiguous layer by layer, which each layer reads a slice of.
/// `None` inside for a model without per-layer embeddings.
pub(super) fn per_layer_inputs(
    c: &Ctx<'_>,
    g: &mut Graph,
    inp_embd: usize,
) -> Option<Option<usize>> {
    let Some(p) = c.arch.edge.map(|e| e.per_layer_input).filter(|&p| p > 0) else {
        return Some(None);
    };
    let (h, layers) = (c.arch.hidden_size, c.arch.num_layers);
    let n = p.checked_mul(layers)?;
    let all = c.width(n)?;
    let table = g.table("per_layer_token_embd.weight", c.arch.vocab_size, n);
    let tokens = g.input(c.ids);
    let rows = g.op(Kind::Fresh, all, PLE_ROWS, &[table, tokens]);
    let split = g.view(rows, PLE_SPLIT);
    let looked_up = g.op(Kind::InPlace, all, PLE_SPLIT, &[split]);
    g.tag(looked_up, Op::Scale);
    g.expand(looked_up);
    // The projection and its norm are the first layer's weights.
    let part = std::mem::replace(&mut g.part, Part::Layer(0));
    let w = g.matrix("per_layer_model_proj.weight", h, n);
    let projected = g.op(Kind::Fresh, all, PLE_ROWS, &[w, inp_embd]);
    let projected = g.op(Kind::InPlace, all, PLE_ROWS, &[projected]);
    g.tag(projected, Op::Scale);
    let projected = g.view(projected, PLE_SPLIT);
    let projected = norm(c, g, projected, (all, PLE_SPLIT), (PER_LAYER_PROJ_NORM, p));
    g.part = part;
    let sum = g.op(Kind::InPlace, all, PLE_SPLIT, &[projected, looked_up]);
    g.tag(sum, Op::Add);
    let sum = g.op(Kind::InPlace, all, PLE_SPLIT, &[sum]);
    g.tag(sum, Op::Scale);
    let permuted = g.view(sum, PLE_PERMUTED);
    let by_layer = g.op(Kind::Fresh, all, PLE_BY_LAYER, &[permuted]);
    Some(Some(g.tag(by_layer, Op::Cont)))
}

/// A layer's per-layer input over its output `pe_in` (E2B, E4B): a gate down to the per-layer
/// width, GELU, times the layer's slice of `inputs`, projected back up and normed, then added
/// to `pe_in`.
pub(super) fn per_layer_input(
    c: &Ctx<'_>,
    g: &mut Graph,
    pe_in: usize,
    inputs: usize,
) -> Option<usize> {
    let p = c.arch.edge.map(|e| e.per_layer_input)?;
    let (h, model) = (c.arch.hidden_size, c.model);
    let row = c.width(p)?;
    let w = g.matrix("inp_gate.weight", h, p);
    let gate = g.op(Kind::Fresh, row, PLE_LAYER, &[w, pe_in]);
    let gate = g.op(Kind::InPlace, row, PLE_LAYER, &[gate]);
    g.tag(gate, Op::Unary);
    let slice = g.view_spanning(inputs, PLE_LAYER, row);
    let gated = g.op(Kind::InPlace, row, PLE_LAYER, &[gate, slice]);
    g.tag(gated, Op::Mul);
    let w = g.matrix("proj.weight", p, h);
    let up = g.op(Kind::Fresh, model, MODEL, &[w, gated]);
    let up = norm(c, g, up, (model, MODEL), (PER_LAYER_POST_NORM, h));
    let sum = g.op(Kind::InPlace, model, MODEL, &[pe_in, up]);
    Some(g.tag(sum, Op::Add))
}
