//! Kimi-K3's graph (llama.cpp's `kimi-k3` builder): Kimi-Linear's KDA and latent-attention
//! layers ([`super::kda`], [`super::attention`]) under cross-layer residual attention, with
//! SiTU feed-forward blocks and routed experts in a latent space. The layer loop is its own:
//! each block reads a mix of the banked residual streams, and the output rows are gathered
//! only after the last mix.

use super::attention::attention_block;
use super::ffn::{dense, experts_over, router_logits};
use super::graph::*;
use super::kda::{kda, KdaKind};
use super::{norm, Ctx, Lazy, ATTN_NORM, FFN_NORM, OUTPUT_NORM};
use crate::model::arch::K3Layout;

/// The residual streams banked so far (`[n_embd, n_ckpt, n_tokens]`, grown by a concat a
/// bank) and how many.
#[derive(Clone, Copy)]
struct Bank {
    stack: usize,
    count: u64,
}

/// Every layer and the output head over the embeddings `embd`.
pub(super) fn layers_and_output(
    c: &Ctx<'_>,
    g: &mut Graph,
    lazy: &mut Lazy,
    embd: usize,
    k3: K3Layout,
) -> Option<()> {
    let arch = c.arch;
    let mut bank: Option<Bank> = None;
    let mut inp = embd;
    for l in 0..arch.num_layers {
        g.part = Part::Layer(l);
        inp = layer(c, g, lazy, (inp, l), (&mut bank, k3))?;
    }
    g.part = Part::Output;
    let mixed = mix(c, g, inp, bank, "output_res_score")?;
    output(c, g, mixed)
}

/// One layer over its input `prefix` (the residual stream): the mixer on a norm of the mixed
/// stream, the stream banked first on the block's boundary layers and then restarted from the
/// mixer's output, the feed-forward block on a norm of the mix again, and its residual add.
fn layer(
    c: &Ctx<'_>,
    g: &mut Graph,
    lazy: &mut Lazy,
    (prefix, l): (usize, u64),
    (bank, k3): (&mut Option<Bank>, K3Layout),
) -> Option<usize> {
    let (arch, model, h) = (c.arch, c.model, c.arch.hidden_size);
    let cur = mix(c, g, prefix, *bank, "attn_res_score")?;
    let banked = k3.res_block > 0 && l % k3.res_block == 0;
    if banked {
        // The raw layer input, as one more checkpoint.
        let ckpt = g.view(prefix, OTHER);
        g.tag(ckpt, Op::Reshape);
        *bank = Some(match *bank {
            None => Bank {
                stack: ckpt,
                count: 1,
            },
            Some(b) => {
                let count = b.count + 1;
                let bytes = c.width(h.checked_mul(count)?)?;
                let stack = g.op(Kind::Fresh, bytes, OTHER, &[b.stack, ckpt]);
                Bank {
                    stack: g.tag(stack, Op::Other),
                    count,
                }
            }
        });
    }
    let cur = norm(c, g, cur, (model, MODEL), (ATTN_NORM, h));
    g.expand(cur);
    let mixed = match c.b.recurrent.zip(c.state_inputs) {
        Some((s, states)) if arch.is_recurrent_layer(l) => kda(
            g,
            cur,
            (&s, KdaKind::kimi(Some(k3))),
            states,
            (c.tokens, 1),
            model,
        )?,
        _ => attention_block(c, g, lazy, cur, l, c.full)?,
    };
    let prefix = if banked {
        mixed
    } else {
        let sum = g.op(Kind::InPlace, model, MODEL, &[prefix, mixed]);
        g.tag(sum, Op::Add)
    };
    let cur = mix(c, g, prefix, *bank, "ffn_res_score")?;
    let cur = norm(c, g, cur, (model, MODEL), (FFN_NORM, h));
    let out = match c.moe.filter(|_| arch.is_moe_layer(l)) {
        Some(m) => latent_experts(c, g, cur, &m, k3)?,
        None => dense(c, g, cur, (c.ffn, arch.intermediate_size), false),
    };
    let sum = g.op(Kind::InPlace, model, MODEL, &[prefix, out]);
    Some(g.tag(sum, Op::Add))
}

/// `res_mix`: the stream `cur` mixed with the banked ones by a softmax over their scores (each
/// checkpoint's and the stream's RMS norm times the learned `score` vector, summed); the
/// stream as it is while nothing is banked.
fn mix(
    c: &Ctx<'_>,
    g: &mut Graph,
    cur: usize,
    bank: Option<Bank>,
    score: &'static str,
) -> Option<usize> {
    let Some(b) = bank else {
        return Some(cur);
    };
    let (model, h) = (c.model, c.arch.hidden_size);
    let stack_bytes = c.width(h.checked_mul(b.count)?)?;
    let (one, each) = (c.width(1)?, c.width(b.count)?);
    let w = g.vector(score, h);
    let sc_src = g.op(Kind::InPlace, stack_bytes, OTHER, &[b.stack]);
    g.tag(sc_src, Op::RmsNorm);
    let sc_src = g.op(Kind::InPlace, stack_bytes, OTHER, &[sc_src, w]);
    g.tag(sc_src, Op::Mul);
    let sc_src = g.op(Kind::Fresh, each, OTHER, &[sc_src]);
    g.tag(sc_src, Op::SumRows);
    let sc_src = g.view(sc_src, OTHER);
    g.tag(sc_src, Op::Reshape);
    let sc_cur = g.op(Kind::InPlace, model, MODEL, &[cur]);
    g.tag(sc_cur, Op::RmsNorm);
    let sc_cur = g.op(Kind::InPlace, model, MODEL, &[sc_cur, w]);
    g.tag(sc_cur, Op::Mul);
    let sc_cur = g.op(Kind::Fresh, one, SUMS, &[sc_cur]);
    g.tag(sc_cur, Op::SumRows);
    let all = c.width(b.count + 1)?;
    let scores = g.op(Kind::Fresh, all, OTHER, &[sc_src, sc_cur]);
    g.tag(scores, Op::Other);
    let probs = g.op(Kind::InPlace, all, OTHER, &[scores]);
    g.tag(probs, Op::SoftMax);
    let p_src = g.view(probs, OTHER);
    let p_src = g.op(Kind::Fresh, each, OTHER, &[p_src]);
    g.tag(p_src, Op::Cont);
    let p_cur = g.view(probs, OTHER);
    let p_cur = g.op(Kind::Fresh, one, SUMS, &[p_cur]);
    g.tag(p_cur, Op::Cont);
    let out = g.op(Kind::Fresh, model, MODEL, &[b.stack, p_src]);
    g.tag(out, Op::Other);
    let weighted = g.op(Kind::InPlace, model, MODEL, &[cur, p_cur]);
    g.tag(weighted, Op::Mul);
    let sum = g.op(Kind::InPlace, model, MODEL, &[out, weighted]);
    Some(g.tag(sum, Op::Add))
}

/// `build_latent_moe`: the experts' input projected down to the latent width, the router's
/// logits from the full-width input, the experts (SiTU) in the latent space, their sum normed
/// and projected back up; then the shared expert on the full-width input, added.
fn latent_experts(
    c: &Ctx<'_>,
    g: &mut Graph,
    cur: usize,
    m: &super::Routed,
    k3: K3Layout,
) -> Option<usize> {
    let (arch, model, h) = (c.arch, c.model, c.arch.hidden_size);
    let latent = arch.expert_width();
    let routed_in = if k3.latent > 0 {
        let w = g.matrix("ffn_routed_down.weight", h, latent);
        g.op(Kind::Fresh, m.sum, OTHER, &[w, cur])
    } else {
        cur
    };
    let experts = arch.moe.as_ref().map_or(0, |m| m.experts);
    let logits = router_logits(g, cur, m.router, (h, experts));
    let mut out = experts_over(c, g, routed_in, m, Some(logits));
    if k3.latent_norm {
        let n = g.op(Kind::InPlace, m.sum, OTHER, &[out]);
        g.tag(n, Op::RmsNorm);
        let w = g.vector("ffn_routed_norm.weight", latent);
        out = g.op(Kind::InPlace, m.sum, OTHER, &[n, w]);
    }
    if k3.latent > 0 {
        let w = g.matrix("ffn_routed_up.weight", latent, h);
        out = g.op(Kind::Fresh, model, MODEL, &[w, out]);
    }
    if m.shared == 0 {
        return Some(out);
    }
    let n = arch.moe.as_ref().map_or(0, |m| m.shared_intermediate);
    let shared = dense(c, g, cur, (m.shared, n), true);
    let sum = g.op(Kind::InPlace, model, MODEL, &[out, shared]);
    Some(g.tag(sum, Op::Add))
}

/// The output head: the last mix's output rows gathered, the final norm (an output), the
/// logits.
fn output(c: &Ctx<'_>, g: &mut Graph, mixed: usize) -> Option<()> {
    let c = &c.gathered()?;
    let (model, h) = (c.model, c.arch.hidden_size);
    g.rows = c.tokens;
    let rows = g.op(Kind::Fresh, model, MODEL, &[mixed, c.out_ids]);
    g.tag(rows, Op::GetRows);
    let result_norm = norm(c, g, rows, (model, MODEL), (OUTPUT_NORM, h));
    g.tensors[result_norm].output = true;
    let lm_head = g.matrix("output.weight", h, c.arch.vocab_size);
    let result = g.op(Kind::Fresh, c.logits, OTHER, &[lm_head, result_norm]);
    g.tensors[result].output = true;
    g.expand(result);
    Some(())
}
