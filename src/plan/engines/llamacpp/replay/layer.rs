//! The graph's inputs, one decoder layer, and the output head: the order llama.cpp's builders
//! make their nodes in, which is what the allocator sees.

use super::attention::{attention_block, rotation_size};
use super::ffn::{ffn_block, routed};
use super::graph::*;
use super::inputs::{IndexerInputs, Rotations};
use super::kda::{kda, KdaKind};
use super::recurrent::{delta_net, mamba, StateInputs};
use super::{norm, Builder, CacheInputs, Ctx, Lazy, Shape};
use super::{ATTN_NORM, ATTN_NORM_2, FFN_NORM, OUTPUT_NORM, POST_ATTN_NORM, POST_FFN_NORM};
use crate::model::arch::{Mlp, SsmKind};

/// Each cache's inputs: the rows K and V are written to (without flash attention the V cache
/// is transposed and written element by element) and the KQ mask over its cells; a model with
/// sliding-window layers has a second cache, and a second set. Then each cache's rotations of
/// a quantized cache (absorbed latent attention, a K-only cache, rotates nothing).
fn cache_inputs(
    g: &mut Graph,
    s: &Shape<'_>,
    kv: u64,
    (mask, scores): ((u64, u64), (u64, u64)),
) -> Option<(CacheInputs, CacheInputs)> {
    let (tokens, fa) = (s.tokens, s.flash_attention);
    let mut one = |mask: u64, scores: u64, cells: u64| -> Option<CacheInputs> {
        Some(CacheInputs {
            k_idxs: g.input(tokens.checked_mul(8)?),
            v_idxs: g.input(if fa {
                tokens.checked_mul(8)?
            } else {
                kv.checked_mul(2)?
            }),
            mask: g.input(mask),
            scores,
            cells,
            rotations: Rotations::default(),
            indexer: None,
        })
    };
    let mut full = one(mask.0, scores.0, s.kv_cells)?;
    let mut swa = one(mask.1, scores.1, s.swa_cells)?;
    if let Some(d) = s.b.dsa {
        full.indexer = Some(IndexerInputs::new(g, tokens, s.kv_cells, d.head_dim)?);
    }
    let (k_head, v_head) = match s.b.mla {
        Some(d) if d.absorbed => (0, 0),
        Some(d) => (d.nope + d.rope, d.v),
        None => (s.arch.head_dim, s.arch.head_dim),
    };
    // Gemma 4's full cache holds heads of the full layers' size.
    let full_head = s.arch.full_attention.map(|f| f.head_dim);
    for (cache, full_cache) in [(&mut full, true), (&mut swa, false)] {
        let (k_head, v_head) = match full_head {
            Some(d) if full_cache => (d, d),
            _ => (k_head, v_head),
        };
        let mut rotation = |head: u64, k: bool| {
            let n = rotation_size(s.kv_type, head, k)?;
            Some(g.input(n.checked_mul(n)?.checked_mul(4)?))
        };
        cache.rotations = Rotations {
            k: rotation(k_head, true),
            v: rotation(v_head, false),
        };
    }
    Some((full, swa))
}

/// The graph's inputs in llama.cpp's order (token ids, their embeddings, positions, each
/// cache's row indices and mask, the output rows, the recurrent states' copy indices), and
/// what the layers read; with the token embeddings' node. `None` for a shape whose tensors
/// would pass 256 TiB, or a router layout llama.cpp refuses.
pub(super) fn inputs<'a>(g: &mut Graph, s: Shape<'a>) -> Option<(Ctx<'a>, usize)> {
    let (arch, tokens, fa) = (s.arch, s.tokens, s.flash_attention);
    let f32 = |elems: u64| elems.checked_mul(4);
    let width = |n: u64| f32(n.checked_mul(tokens)?);
    let q_dim = arch.num_heads.checked_mul(arch.head_dim)?;
    let kv_dim = arch.num_kv_heads.checked_mul(arch.head_dim)?;
    let (model, query, kv) = (width(arch.hidden_size)?, width(q_dim)?, width(kv_dim)?);
    let (ffn, logits) = (width(arch.intermediate_size)?, width(arch.vocab_size)?);
    let scores = |cells: u64| f32(cells.checked_mul(tokens)?.checked_mul(arch.num_heads)?);
    let scores = (scores(s.kv_cells)?, scores(s.swa_cells)?);
    let mask = |cells: u64| {
        cells
            .checked_mul(tokens)?
            .checked_mul(if fa { 2 } else { 4 })
    };
    let mask = (mask(s.kv_cells)?, mask(s.swa_cells)?);
    if [
        model, query, kv, ffn, logits, scores.0, scores.1, mask.0, mask.1,
    ]
    .iter()
    .any(|&bytes| bytes > MOST)
    {
        return None;
    }
    let moe = match &arch.moe {
        None => None,
        Some(m) => Some(routed(arch, m, &width)?),
    };
    let ids = tokens.checked_mul(4)?;
    g.rows = tokens;
    let tok_embd = g.table("token_embd.weight", arch.vocab_size, arch.hidden_size);
    let tokens_in = g.input(ids);
    let embd = g.op(Kind::Fresh, model, MODEL, &[tok_embd, tokens_in]);
    // The embeddings input (for a batch given as vectors) is reserved beside the token path
    // and has no consumer in a token batch, so it stays allocated for the whole graph.
    let embd_in = g.input(model);
    g.expand(embd);
    g.expand(embd_in);
    // Multimodal RoPE (Qwen3.5's interleaved sections) takes four positions a token.
    let pos = g.input(if s.b.qwen35 { ids.checked_mul(4)? } else { ids });
    // Without flash attention V is written element by element, as many as the widest layer's
    // V row (Gemma 4's layers differ).
    let v_elems = match arch.full_attention {
        Some(_) => width(arch.widest_v())?,
        None => kv,
    };
    let (full, swa) = cache_inputs(g, &s, v_elems, (mask, scores))?;
    let out_ids = g.input(s.outputs.checked_mul(4)?);
    // The recurrent states' copy indices: one i32 per sequence, the rows past the batch's
    // sequences (none) a second view.
    let state_inputs = s.b.recurrent.map(|_| {
        let copy = g.input(4);
        // The batch's sequence, and the (here no) others whose states are copied back.
        let extra = g.view_spanning(copy, OTHER, 0);
        StateInputs {
            main: g.view(copy, OTHER),
            extra,
        }
    });
    let c = Ctx {
        arch,
        b: s.b,
        plain: arch.mlp == Mlp::Plain,
        tokens,
        streams: s.seqs,
        outputs: s.outputs,
        flash_attention: fa,
        kv_type: s.kv_type,
        kv_cells: s.kv_cells,
        q_dim,
        kv_dim,
        model,
        query,
        kv,
        ffn,
        logits,
        ids,
        pos,
        out_ids,
        full,
        swa,
        state_inputs,
        moe,
        per_layer: None,
    };
    Some((c, embd))
}

/// A recurrent layer's mixer: Kimi's delta attention, the gated DeltaNet or Mamba.
fn recurrent_mixer(
    c: &Ctx<'_>,
    g: &mut Graph,
    cur: usize,
    s: &crate::model::Ssm,
    states: StateInputs,
) -> Option<usize> {
    let (b, arch, model) = (c.b, c.arch, c.model);
    match s.kind {
        SsmKind::Kda => kda(
            g,
            cur,
            (s, KdaKind::kimi(b.k3)),
            states,
            (c.tokens, 1),
            model,
        ),
        SsmKind::GatedDeltaNet => delta_net(
            g,
            cur,
            s,
            states,
            c.tokens,
            (model, arch.joint_qkvz, b.qwen35),
        ),
        _ => mamba(g, cur, s, states, c.tokens, model),
    }
}

/// A layer's attention: Gemma 4's own, MiniMax-M3's sparse layers under flash attention
/// (without it, its dense fallback), else the common one, each then through its output.
fn attention_half(
    c: &Ctx<'_>,
    g: &mut Graph,
    lazy: &mut Lazy,
    (cur, layer): (usize, u64),
    inputs: CacheInputs,
) -> Option<usize> {
    let b = c.b;
    let msa = b.msa.is_some() && c.flash_attention && c.arch.is_msa_layer(layer);
    if b.gemma4 && b.mla.is_none() {
        let attended = super::gemma4::grouped(c, g, cur, layer, inputs)?;
        super::attention::attention_out(c, g, cur, attended)
    } else if msa && b.mla.is_none() {
        let attended = super::msa::sparse(c, g, lazy, cur, inputs)?;
        super::attention::attention_out(c, g, cur, attended)
    } else {
        attention_block(c, g, lazy, cur, layer, inputs)
    }
}

/// One decoder layer over `inp`, its output: the mixer (attention, a recurrent mixer, or a
/// layer that is one feed-forward block), the residual, then the feed-forward block and its
/// residual, each as the architecture orders and norms them.
pub(super) fn layer(
    c: &Ctx<'_>,
    g: &mut Graph,
    lazy: &mut Lazy,
    inp: usize,
    layer: u64,
) -> Option<usize> {
    let (arch, b, model, out_ids) = (c.arch, c.b, c.model, c.out_ids);
    let inputs = if arch.is_sliding_layer(layer) {
        c.swa
    } else {
        c.full
    };
    let residual = inp;
    let h = arch.hidden_size;
    let normed = norm(c, g, inp, (model, MODEL), (ATTN_NORM, h));
    // Falcon-40B's layout attends on a second norm of the layer's input.
    let cur = if b.falcon && arch.norms_per_layer == 2 {
        norm(c, g, inp, (model, MODEL), (ATTN_NORM_2, h))
    } else {
        normed
    };
    let mixer = b
        .recurrent
        .zip(c.state_inputs)
        .filter(|_| arch.is_recurrent_layer(layer));
    let mut cur = if let Some((s, states)) = mixer.filter(|_| !b.parallel) {
        recurrent_mixer(c, g, cur, &s, states)?
    } else if b.one_block && !arch.has_attention(layer) {
        ffn_block(c, g, cur, layer)?
    } else {
        attention_half(c, g, lazy, (cur, layer), inputs)?
    };
    if b.cohere || b.falcon || (b.neox && arch.parallel_attention) {
        return side_by_side(c, g, (residual, normed, cur), layer);
    }
    if let Some((s, states)) = mixer.filter(|_| b.parallel) {
        let first = normed;
        let normed = norm(c, g, residual, (model, MODEL), (ATTN_NORM, h));
        // A second norm of the input, multiplied by the same weight tensor (one copy of it
        // serves both where ggml offloads the multiplies).
        g.tensors[normed].srcs[1] = g.tensors[first].srcs[1];
        let mixed = mamba(g, normed, &s, states, c.tokens, model)?;
        cur = g.op(Kind::InPlace, model, MODEL, &[cur, mixed]);
        g.tag(cur, Op::Add);
    }
    let last = layer + 1 == arch.num_layers;
    let mut residual = residual;
    // From the gather of the output rows on, the last layer's tensors have those rows only.
    let gathered = if last { c.gathered()? } else { *c };
    let mut c = c;
    if last && !b.oss && !b.nextn && !b.parallel {
        c = &gathered;
        let model = c.model;
        g.rows = c.tokens;
        cur = g.op(Kind::Fresh, model, MODEL, &[cur, out_ids]);
        g.tag(cur, Op::GetRows);
        residual = g.op(Kind::Fresh, model, MODEL, &[residual, out_ids]);
        g.tag(residual, Op::GetRows);
    }
    let model = c.model;
    // Granite scales each block's output before its residual add.
    if arch.granite_scales.residual {
        cur = g.op(Kind::InPlace, model, MODEL, &[cur]);
        g.tag(cur, Op::Scale);
    }
    let post_norms = b.gemma && arch.norms_per_layer == 4;
    if post_norms {
        cur = norm(c, g, cur, (model, MODEL), (POST_ATTN_NORM, h));
    }
    let mut ffn_inp = if b.residual_first {
        g.op(Kind::InPlace, model, MODEL, &[residual, cur])
    } else {
        g.op(Kind::InPlace, model, MODEL, &[cur, residual])
    };
    g.tag(ffn_inp, Op::Add);
    if b.one_block {
        return Some(ffn_inp);
    }
    if last && b.parallel {
        c = &gathered;
        g.rows = c.tokens;
        ffn_inp = g.op(Kind::Fresh, c.model, MODEL, &[ffn_inp, out_ids]);
        g.tag(ffn_inp, Op::GetRows);
    }
    let out = if b.gemma4 && c.arch.is_moe_layer(layer) {
        super::gemma4::moe_half(c, g, ffn_inp)?
    } else {
        feed_forward_half(c, g, (ffn_inp, layer), post_norms)?
    };
    let out = match c.per_layer {
        Some(inputs) => super::gemma4::per_layer_input(c, g, out, inputs)?,
        None => out,
    };
    Some(match b.gemma4 {
        true => super::gemma4::output_scale(c, g, out),
        false => out,
    })
}

/// A layer's feed-forward half over `ffn_inp` (its input plus the attention's output): the
/// norm, the block, Gemma's post-norm or Granite's scale, and the residual add.
fn feed_forward_half(
    c: &Ctx<'_>,
    g: &mut Graph,
    (ffn_inp, layer): (usize, u64),
    post_norms: bool,
) -> Option<usize> {
    let (b, model, h) = (c.b, c.model, c.arch.hidden_size);
    let cur = norm(c, g, ffn_inp, (model, MODEL), (FFN_NORM, h));
    let out = ffn_block(c, g, cur, layer)?;
    let out = if post_norms {
        norm(c, g, out, (model, MODEL), (POST_FFN_NORM, h))
    } else if c.arch.granite_scales.residual {
        let scaled = g.op(Kind::InPlace, model, MODEL, &[out]);
        g.tag(scaled, Op::Scale)
    } else {
        out
    };
    // Phi-3 adds the residual first, so the add may take the residual's memory.
    let sum = if b.fused || b.residual_first {
        g.op(Kind::InPlace, model, MODEL, &[ffn_inp, out])
    } else {
        g.op(Kind::InPlace, model, MODEL, &[out, ffn_inp])
    };
    Some(g.tag(sum, Op::Add))
}

/// The feed-forward block beside attention: on the same normed input (Command R7B, Falcon) or
/// on a norm of its own of the gathered input (GPT-NeoX's parallel residual). The layer's
/// output is that block's plus the residual and attention's (Falcon adds attention's first,
/// the others the residual), so attention's output projection runs before the feed-forward
/// block.
fn side_by_side(
    c: &Ctx<'_>,
    g: &mut Graph,
    (residual, normed, attended): (usize, usize, usize),
    layer: u64,
) -> Option<usize> {
    let last = layer + 1 == c.arch.num_layers;
    // The last layer's tensors from the gather of the output rows on have those rows only.
    let gathered = if last { c.gathered()? } else { *c };
    let c = &gathered;
    let (model, out_ids) = (c.model, c.out_ids);
    g.rows = c.tokens;
    let Builder { falcon, neox, .. } = c.b;
    let rows = |g: &mut Graph, x: usize| {
        if last {
            let rows = g.op(Kind::Fresh, model, MODEL, &[x, out_ids]);
            g.tag(rows, Op::GetRows)
        } else {
            x
        }
    };
    let attn_out = rows(g, attended);
    let residual = rows(g, residual);
    let normed = if neox {
        norm(
            c,
            g,
            residual,
            (model, MODEL),
            (FFN_NORM, c.arch.hidden_size),
        )
    } else {
        rows(g, normed)
    };
    let out = ffn_block(c, g, normed, layer)?;
    let (first, second) = if falcon {
        (attn_out, residual)
    } else {
        (residual, attn_out)
    };
    let sum = g.op(Kind::InPlace, model, MODEL, &[out, first]);
    g.tag(sum, Op::Add);
    let sum = g.op(Kind::InPlace, model, MODEL, &[sum, second]);
    Some(g.tag(sum, Op::Add))
}

/// The output head after the last layer: the final norm and the logits, each an output of the
/// graph (gpt-oss keeps the last hidden state, and Nemotron-H and Qwen3-Next the final norm over
/// every token, as outputs of their own, the output rows gathered after them).
pub(super) fn output(c: &Ctx<'_>, g: &mut Graph, inp: usize) -> Option<()> {
    // After the last layer (or the gather here) only the output rows are left; Nemotron-H's
    // and Qwen3-Next's final norm is over every token before it.
    let full = c;
    let c = &c.gathered()?;
    let (model, out_ids) = (c.model, c.out_ids);
    let mut inp = inp;
    if c.b.oss {
        g.tensors[inp].output = true;
        inp = g.op(Kind::Fresh, model, MODEL, &[inp, out_ids]);
        g.tag(inp, Op::GetRows);
    }
    let h = c.arch.hidden_size;
    let mut result_norm = if c.b.nextn {
        norm(full, g, inp, (full.model, MODEL), (OUTPUT_NORM, h))
    } else {
        g.rows = c.tokens;
        norm(c, g, inp, (model, MODEL), (OUTPUT_NORM, h))
    };
    if c.b.nextn {
        g.tensors[result_norm].output = true;
        result_norm = g.op(Kind::Fresh, model, MODEL, &[result_norm, out_ids]);
        g.tag(result_norm, Op::GetRows);
    }
    g.tensors[result_norm].output = true;
    g.rows = c.tokens;
    let lm_head = g.matrix("output.weight", h, c.arch.vocab_size);
    let mut result = g.op(Kind::Fresh, c.logits, OTHER, &[lm_head, result_norm]);
    if c.arch.granite_scales.logits {
        result = g.op(Kind::InPlace, c.logits, OTHER, &[result]);
        g.tag(result, Op::Scale);
    }
    g.tensors[result].output = true;
    g.expand(result);
    Some(())
}
