//! An encoder's graph: llama.cpp's `bert` builder (which also builds `nomic-bert` and
//! `jina-bert-v2`), attention
//! over the micro-batch itself with no KV cache (`build_attn_inp_no_cache`), then
//! `build_pooling` as the model's pooling type asks.

use super::graph::*;
use super::Shape;
use crate::model::arch::{Encoder, Mlp, Pooling};

/// Bytes a token of the tensors the encoder's layers make.
struct Sizes {
    tokens: u64,
    seqs: u64,
    model: u64,
    query: u64,
    kv: u64,
    ffn: u64,
    scores: u64,
    mask: u64,
}

/// The whole graph of `s`'s micro-batch over `seqs` sequences (llama.cpp reserves with
/// `n_seq_max` of them, the tokens rounded up to a multiple), pooled; `None` for shapes no
/// device could hold.
pub(super) fn whole(s: Shape<'_>, e: Encoder, seqs: u64) -> Option<Graph> {
    let arch = s.arch;
    let seqs = seqs.max(1);
    let tokens = s.tokens.div_ceil(seqs).checked_mul(seqs)?;
    let width = |n: u64| n.checked_mul(tokens)?.checked_mul(4);
    let z = Sizes {
        tokens,
        seqs,
        model: width(arch.hidden_size)?,
        query: width(arch.num_heads.checked_mul(arch.head_dim)?)?,
        kv: width(arch.num_kv_heads.checked_mul(arch.head_dim)?)?,
        ffn: width(arch.intermediate_size)?,
        scores: width(tokens.checked_mul(arch.num_heads)?)?,
        mask: tokens
            .checked_mul(tokens)?
            .checked_mul(if s.flash_attention { 2 } else { 4 })?,
    };
    if [z.model, z.query, z.kv, z.ffn, z.scores, z.mask]
        .iter()
        .any(|&b| b > MOST)
    {
        return None;
    }
    let mut g = Graph {
        rows: tokens,
        ..Graph::default()
    };
    let ids = tokens.checked_mul(4)?;
    let h = arch.hidden_size;
    // Positions (not in jina-bert-v2, whose ALiBi needs none) are made first but used first by
    // the learned position rows or the first RoPE.
    let pos = (e.positions > 0 || e.rope).then(|| g.input(ids));
    let tok_embd = g.table("token_embd.weight", arch.vocab_size, h);
    let tokens_in = g.input(ids);
    let embd = g.op(Kind::Fresh, z.model, MODEL, &[tok_embd, tokens_in]);
    let embd_in = g.input(z.model);
    g.expand(embd);
    g.expand(embd_in);
    let mut inp = embd;
    if e.token_types > 0 {
        let types = g.table("token_types.weight", e.token_types, h);
        // The first row of the table: what a split on another backend copies.
        let row0 = g.view_spanning(types, OTHER, arch.hidden_size.checked_mul(4)?);
        inp = g.op(Kind::InPlace, z.model, MODEL, &[inp, row0]);
        g.tag(inp, Op::Add);
    }
    if let Some(pos) = pos.filter(|_| e.positions > 0) {
        let pos_embd = g.table("position_embd.weight", e.positions, h);
        let rows = g.op(Kind::Fresh, z.model, MODEL, &[pos_embd, pos]);
        inp = g.op(Kind::InPlace, z.model, MODEL, &[rows, inp]);
        g.tag(inp, Op::Add);
    }
    // llama.cpp keeps the embeddings' norm with the first layer's weights.
    g.part = Part::Layer(0);
    inp = layer_norm(&mut g, inp, (z.model, h), LayerNorm::Embeddings);
    let mask = g.input(z.mask);
    let out_ids = g.input(ids);
    let inputs = Inputs { pos, mask, out_ids };
    for l in 0..arch.num_layers {
        g.part = Part::Layer(l);
        let last = l + 1 == arch.num_layers;
        inp = layer(&mut g, s, &e, &z, inputs, inp, last)?;
    }
    g.part = Part::Output;
    g.tensors[inp].output = true;
    g.expand(inp);
    pool(&mut g, &e, &z, inp);
    Some(g)
}

#[derive(Clone, Copy)]
struct Inputs {
    pos: Option<usize>,
    mask: usize,
    out_ids: usize,
}

/// Which of an encoder's LayerNorms: its weight's and bias's names.
#[derive(Clone, Copy)]
enum LayerNorm {
    Embeddings,
    AttentionOut,
    Second,
    LayerOut,
}

impl LayerNorm {
    fn names(self) -> (&'static str, &'static str) {
        match self {
            LayerNorm::Embeddings => ("token_embd_norm.weight", "token_embd_norm.bias"),
            LayerNorm::AttentionOut => ("attn_output_norm.weight", "attn_output_norm.bias"),
            LayerNorm::Second => ("attn_norm_2.weight", "attn_norm_2.bias"),
            LayerNorm::LayerOut => ("layer_output_norm.weight", "layer_output_norm.bias"),
        }
    }
}

/// LayerNorm of `bytes` over `n` values a row, with its weight and bias (`ggml_norm` never
/// runs in place).
fn layer_norm(g: &mut Graph, x: usize, (bytes, n): (u64, u64), which: LayerNorm) -> usize {
    let (weight, bias) = which.names();
    let t = g.op(Kind::Fresh, bytes, MODEL, &[x]);
    let w = g.vector(weight, n);
    let t = g.op(Kind::InPlace, bytes, MODEL, &[t, w]);
    let b = g.vector(bias, n);
    g.op(Kind::InPlace, bytes, MODEL, &[t, b])
}

/// One post-norm layer: attention, the residual and a norm, the feed-forward block, the
/// residual and a norm; the last layer gathers the output rows before its first residual.
fn layer(
    g: &mut Graph,
    s: Shape<'_>,
    e: &Encoder,
    z: &Sizes,
    inputs: Inputs,
    inp: usize,
    last: bool,
) -> Option<usize> {
    let arch = s.arch;
    let [q, k, v] = project(g, s, e, z, inp, inputs.pos);
    // Over the batch's own K and V: the cells are its tokens.
    let fa = s.flash_attention.then(|| FaHeads::grouped(arch, z.tokens));
    let mut cur = attend(g, z, [q, k, v], inputs.mask, fa);
    let h = arch.hidden_size;
    let wo = g.matrix("attn_output.weight", arch.num_heads * arch.head_dim, h);
    cur = g.op(Kind::Fresh, z.model, MODEL, &[wo, cur]);
    if matches!(
        arch.attention,
        crate::model::arch::Attention::Standard { o_bias: true, .. }
    ) {
        let b = g.vector("attn_output.bias", h);
        cur = g.op(Kind::InPlace, z.model, MODEL, &[cur, b]);
    }
    let mut residual = inp;
    if last {
        cur = g.op(Kind::Fresh, z.model, MODEL, &[cur, inputs.out_ids]);
        g.tag(cur, Op::GetRows);
        residual = g.op(Kind::Fresh, z.model, MODEL, &[residual, inputs.out_ids]);
        g.tag(residual, Op::GetRows);
    }
    cur = g.op(Kind::InPlace, z.model, MODEL, &[cur, residual]);
    g.tag(cur, Op::Add);
    let width = (z.model, h);
    let mut ffn_inp = layer_norm(g, cur, width, LayerNorm::AttentionOut);
    if e.norm_2 {
        let again = g.op(Kind::InPlace, z.model, MODEL, &[ffn_inp, residual]);
        g.tag(again, Op::Add);
        ffn_inp = layer_norm(g, again, width, LayerNorm::Second);
    }
    let out = ffn(g, arch, e, z, ffn_inp)?;
    let sum = g.op(Kind::InPlace, z.model, MODEL, &[out, ffn_inp]);
    g.tag(sum, Op::Add);
    Some(layer_norm(g, sum, width, LayerNorm::LayerOut))
}

/// The feed-forward block: GELU between (maybe biased) projections; a gated one (SwiGLU in
/// nomic-bert, GEGLU in jina-bert-v2) with the gate apart; or jina-bert-v2's older GEGLU with
/// the gate inside `ffn_up`, halved by the activation.
fn ffn(
    g: &mut Graph,
    arch: &crate::model::ModelArch,
    e: &Encoder,
    z: &Sizes,
    x: usize,
) -> Option<usize> {
    let fused = arch.fused_projections;
    let up_bytes = if fused { z.ffn.checked_mul(2)? } else { z.ffn };
    let layout = if fused { OTHER } else { FFN };
    let (h, n) = (arch.hidden_size, arch.intermediate_size);
    let up_n = if fused { n.checked_mul(2)? } else { n };
    let wu = g.ffn_weight(FfnClass::Up, ("ffn_up.weight", h.checked_mul(up_n)?, true));
    let mut up = g.op(Kind::Fresh, up_bytes, layout, &[wu, x]);
    if e.up_bias {
        let b = g.ffn_weight(FfnClass::Up, ("ffn_up.bias", up_n, false));
        up = g.op(Kind::InPlace, up_bytes, layout, &[up, b]);
    }
    let act = if fused {
        let act = g.op(Kind::Fresh, z.ffn, FFN, &[up]);
        g.tag(act, Op::Unary)
    } else if arch.mlp == Mlp::Plain {
        let act = g.op(Kind::InPlace, z.ffn, FFN, &[up]);
        g.tag(act, Op::Unary)
    } else {
        let wg = g.ffn_weight(FfnClass::Gate, ("ffn_gate.weight", h.checked_mul(n)?, true));
        let gate = g.op(Kind::Fresh, z.ffn, FFN, &[wg, x]);
        g.op(Kind::Fresh, z.ffn, FFN, &[gate, up])
    };
    let wd = g.ffn_weight(FfnClass::Down, ("ffn_down.weight", n.checked_mul(h)?, true));
    let mut down = g.op(Kind::Fresh, z.model, MODEL, &[wd, act]);
    if e.down_bias {
        let b = g.ffn_weight(FfnClass::Down, ("ffn_down.bias", h, false));
        down = g.op(Kind::InPlace, z.model, MODEL, &[down, b]);
    }
    Some(down)
}

/// A projection's weight and bias names and its outputs.
type Projection = (&'static str, &'static str, u64);

/// Q, K and V as 3-D views: three biased projections (BERT, jina-bert-v2) or views of one
/// (nomic-bert), then q/k norms and RoPE where the model has them.
fn project(
    g: &mut Graph,
    s: Shape<'_>,
    e: &Encoder,
    z: &Sizes,
    cur: usize,
    pos: Option<usize>,
) -> [usize; 3] {
    let biased = matches!(
        s.arch.attention,
        crate::model::arch::Attention::Standard { qkv_bias: true, .. }
    );
    let arch = s.arch;
    let h = arch.hidden_size;
    let (q_dim, kv_dim) = (
        arch.num_heads.saturating_mul(arch.head_dim),
        arch.num_kv_heads.saturating_mul(arch.head_dim),
    );
    let projection = |g: &mut Graph, bytes: u64, layout: u64, (name, bias, n): Projection| {
        let w = g.matrix(name, h, n);
        let mut t = g.op(Kind::Fresh, bytes, layout, &[w, cur]);
        if biased {
            let b = g.vector(bias, n);
            t = g.op(Kind::InPlace, bytes, layout, &[t, b]);
        }
        t
    };
    let (q, k, v) = if e.fused_qkv {
        let qkv_n = q_dim.saturating_add(kv_dim.saturating_mul(2));
        let qkv = projection(
            g,
            z.query + 2 * z.kv,
            OTHER,
            ("attn_qkv.weight", "attn_qkv.bias", qkv_n),
        );
        (g.view(qkv, Q3), g.view(qkv, K3), g.view(qkv, OTHER))
    } else {
        let q = projection(g, z.query, QUERY, ("attn_q.weight", "attn_q.bias", q_dim));
        let k = projection(g, z.kv, KV, ("attn_k.weight", "attn_k.bias", kv_dim));
        let v = projection(g, z.kv, KV, ("attn_v.weight", "attn_v.bias", kv_dim));
        (g.view(q, Q3), g.view(k, K3), g.view(v, OTHER))
    };
    // jina-bert-v2's LayerNorms over the whole width of Q and K (2-D views, normed, viewed back).
    let (q, k) = if e.qk_norm {
        let normed = |g: &mut Graph, x: usize, bytes: u64, layout: u64, (w, b, n): Projection| {
            let flat = g.view(x, OTHER);
            let t = g.op(Kind::Fresh, bytes, OTHER, &[flat]);
            let w = g.vector(w, n);
            let t = g.op(Kind::InPlace, bytes, OTHER, &[t, w]);
            let b = g.vector(b, n);
            let t = g.op(Kind::InPlace, bytes, OTHER, &[t, b]);
            g.view(t, layout)
        };
        (
            normed(
                g,
                q,
                z.query,
                Q3,
                ("attn_q_norm.weight", "attn_q_norm.bias", q_dim),
            ),
            normed(
                g,
                k,
                z.kv,
                K3,
                ("attn_k_norm.weight", "attn_k_norm.bias", kv_dim),
            ),
        )
    } else {
        (q, k)
    };
    match pos.filter(|_| e.rope) {
        Some(pos) => [
            {
                let q = g.op(Kind::InPlace, z.query, Q3, &[q, pos]);
                g.tag(q, Op::Rope)
            },
            {
                let k = g.op(Kind::InPlace, z.kv, K3, &[k, pos]);
                g.tag(k, Op::Rope)
            },
            v,
        ],
        None => [q, k, v],
    }
}

/// `build_attn` without a cache: K and V are this batch's own (cast to f16 for flash
/// attention; V made contiguous and transposed for the scores' product otherwise).
fn attend(
    g: &mut Graph,
    z: &Sizes,
    [q, k, v]: [usize; 3],
    mask: usize,
    fa: Option<FaHeads>,
) -> usize {
    g.expand(q);
    g.expand(k);
    g.expand(v);
    let q4 = g.view(q, OTHER);
    let qp = g.view(q4, OTHER);
    let kp = g.view(k, OTHER);
    let vp = g.view(v, OTHER);
    let out = if let Some(heads) = fa {
        let k16 = g.cast(kp, z.kv / 2);
        let v16 = g.cast(vp, z.kv / 2);
        let o = g.op(Kind::Fresh, z.query, OTHER, &[qp, k16, v16, mask]);
        g.tensors[o].fa_heads = Some(heads);
        g.view(o, QUERY)
    } else {
        let kq = g.op(Kind::Fresh, z.scores, SCORES, &[kp, qp]);
        g.tag(kq, Op::MulMat);
        let kq = g.op(Kind::InPlace, z.scores, SCORES, &[kq, mask]);
        g.tag(kq, Op::SoftMax);
        let vt = g.view(vp, OTHER);
        let v_cont = g.op(Kind::Fresh, z.kv, OTHER, &[vt]);
        let kqv = g.op(Kind::Fresh, z.query, OTHER, &[v_cont, kq]);
        g.tag(kqv, Op::MulMat);
        let permuted = g.view(kqv, OTHER);
        g.op(Kind::Fresh, z.query, QUERY, &[permuted])
    };
    g.expand(out);
    out
}

/// `build_pooling` over the last layer's output `inp`: each sequence's mean (a product with
/// the mean matrix of `tokens × seqs`), its first or last row, or a reranker's head over its
/// first row.
fn pool(g: &mut Graph, e: &Encoder, z: &Sizes, inp: usize) {
    let pooled_bytes = |n: u64| n.saturating_mul(z.seqs).saturating_mul(4);
    let hidden = z.model / z.tokens / 4;
    let mut cur = match e.pooling {
        Pooling::None => inp,
        Pooling::Mean => {
            let mean = g.input(z.tokens.saturating_mul(z.seqs).saturating_mul(4));
            let t = g.view(inp, OTHER);
            let cont = g.op(Kind::Fresh, z.model, OTHER, &[t]);
            let pooled = g.op(Kind::Fresh, pooled_bytes(hidden), OTHER, &[cont, mean]);
            g.tag(pooled, Op::MulMat)
        }
        Pooling::Cls | Pooling::Last | Pooling::Rank => {
            let rows = g.input(pooled_bytes(1));
            let pooled = g.op(Kind::Fresh, pooled_bytes(hidden), OTHER, &[inp, rows]);
            g.tag(pooled, Op::GetRows)
        }
    };
    if let Some(c) = e.classifier.filter(|_| e.pooling == Pooling::Rank) {
        if c.dense > 0 {
            let w = g.matrix("cls.weight", hidden, c.dense);
            cur = g.op(Kind::Fresh, pooled_bytes(c.dense), OTHER, &[w, cur]);
            let b = g.vector("cls.bias", c.dense);
            cur = g.op(Kind::InPlace, pooled_bytes(c.dense), OTHER, &[cur, b]);
            cur = g.op(Kind::InPlace, pooled_bytes(c.dense), OTHER, &[cur]);
            g.tag(cur, Op::Unary);
        }
        if c.outputs > 0 {
            let w = g.matrix("cls.output.weight", c.dense.max(hidden), c.outputs);
            cur = g.op(Kind::Fresh, pooled_bytes(c.outputs), OTHER, &[w, cur]);
            let b = g.vector("cls.output.bias", c.outputs);
            cur = g.op(Kind::InPlace, pooled_bytes(c.outputs), OTHER, &[cur, b]);
        }
    }
    g.tensors[cur].output = true;
    g.expand(cur);
}
