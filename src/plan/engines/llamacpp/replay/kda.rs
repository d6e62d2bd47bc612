//! Kimi Delta Attention (`kimi-linear`'s recurrent layers), as llama.cpp's `kimi-linear`
//! builder makes it with the fused gated-delta-net op its CPU backend runs.

use super::graph::*;
use super::recurrent::{convolution_input, gather_rows, read_states, StateInputs};
use crate::model::arch::{K3Layout, Ssm};

/// Which KDA: Kimi-Linear's (softplus decay, low-rank output gate), Kimi-K3's (bounded
/// decay, one full-rank gate) or GLM-5-next's (bounded decay, low-rank gate).
#[derive(Clone, Copy)]
pub(super) struct KdaKind {
    /// The decay is bounded below (`kda_gate_lower_bound`).
    pub(super) bounded: bool,
    /// The output gate is one full-rank projection (`ssm_g`).
    pub(super) full_gate: bool,
}

impl KdaKind {
    /// Kimi-Linear's (`None`) or Kimi-K3's.
    pub(super) fn kimi(k3: Option<K3Layout>) -> KdaKind {
        KdaKind {
            bounded: k3.is_some_and(|k| k.gate_lower_bound),
            full_gate: k3.is_some(),
        }
    }
}

/// One KDA mixer over `cur` (`tokens` tokens, an equal share of each of `seqs` sequences,
/// each with its own cached tails and state): the layer's cached convolution
/// tails read once; q, k and v each projected, joined to its tail (its last `d_conv − 1`
/// columns written back) and convolved on its own, then SiLU'd; the per-channel decay from
/// two low-rank projections (softplus of it plus its bias, times A per head) and β (a sigmoid
/// of its projection); the cached state; q and k L2-normed; the delta rule (its output beside
/// the final state, which is written back); the output made contiguous, RMS-normed per head
/// and gated by a sigmoid of two more low-rank projections, then projected out. Returns the
/// mixer's output (`model` bytes). `kind` says whether the decay is bounded and the gate
/// full-rank.
pub(super) fn kda(
    g: &mut Graph,
    cur: usize,
    (s, kind): (&Ssm, KdaKind),
    inputs: StateInputs,
    (tokens, seqs): (u64, u64),
    model: u64,
) -> Option<usize> {
    let f32 = |elems: u64| elems.checked_mul(4);
    let width = |n: u64| f32(n.checked_mul(tokens)?);
    let (head, heads, inner) = (s.state, s.dt_rank, s.inner);
    let past = s.conv_kernel.checked_sub(1)?;
    // The three convolutions' tails, one after another in a sequence's row (`n_embd_r`).
    let conv_state = f32(past.checked_mul(inner)?.checked_mul(3)?.checked_mul(seqs)?)?;
    // Each sequence's tail before its tokens.
    let conv_rows = past.checked_mul(seqs)?.checked_add(tokens)?;
    let conv_x_bytes = f32(conv_rows.checked_mul(inner)?)?;
    let state = f32(head.checked_mul(inner)?.checked_mul(seqs)?)?;
    let value = width(inner)?;
    // The op's output: every token's value rows, then each sequence's final state.
    let delta_out = f32(inner.checked_mul(tokens.checked_add(head.checked_mul(seqs)?)?)?)?;
    if [conv_state, conv_x_bytes, state, value, delta_out]
        .iter()
        .any(|&bytes| bytes > MOST)
    {
        return None;
    }
    let h = model / 4 / tokens.max(1);
    g.expand(cur);
    let (conv_all, ssm_all) = (g.external(), g.external());
    let conv = read_states(g, conv_all, inputs, |g, states, ids| {
        gather_rows(g, conv_state, (states, ids))
    });
    // q, k and v: each projection joined to its tail (the tail written back at once).
    let joined = |g: &mut Graph, name: &'static str| {
        let tail = g.view(conv, OTHER);
        let w = g.matrix(name, h, inner);
        let x = g.op(Kind::Fresh, value, OTHER, &[w, cur]);
        let x = g.view(x, OTHER);
        convolution_input(g, (tail, x), (conv_x_bytes, tokens / seqs.max(1)), conv_all)
    };
    let joined = [
        joined(g, "attn_q.weight"),
        joined(g, "attn_k.weight"),
        joined(g, "attn_v.weight"),
    ];
    let decay = kda_decay(g, (cur, h), (s, kind.bounded), value)?;
    let b = g.matrix("ssm_beta.weight", h, heads);
    let b = g.op(Kind::Fresh, width(heads)?, OTHER, &[b, cur]);
    let b = g.view(b, OTHER);
    let beta = g.op(Kind::InPlace, width(heads)?, OTHER, &[b]);
    g.tag(beta, Op::Unary);
    // The layer's input as the gate's projections read it later (two reshapes of it).
    let cur_3d = g.view(cur, MODEL);
    let cur_2d = g.view(cur_3d, MODEL);
    let cached = read_states(g, ssm_all, inputs, |g, states, ids| {
        gather_rows(g, state, (states, ids))
    });
    let cached = g.view(cached, OTHER);
    let names = [
        "ssm_conv1d_q.weight",
        "ssm_conv1d_k.weight",
        "ssm_conv1d_v.weight",
    ];
    let mut convolved = [0usize; 3];
    for (i, (conv_x, name)) in joined.into_iter().zip(names).enumerate() {
        let w = g.matrix(name, s.conv_kernel, inner);
        let x = g.op(Kind::Fresh, value, OTHER, &[conv_x, w]);
        g.tag(x, Op::SsmConv);
        let x = g.view(x, OTHER);
        let x = g.op(Kind::InPlace, value, OTHER, &[x]);
        g.tag(x, Op::Unary);
        let x = g.view(x, OTHER);
        // q and k: an RMS norm scaled to an L2 norm.
        convolved[i] = if i < 2 {
            let n = g.op(Kind::InPlace, value, OTHER, &[x]);
            g.tag(n, Op::RmsNorm);
            let n = g.op(Kind::InPlace, value, OTHER, &[n]);
            g.tag(n, Op::Scale)
        } else {
            x
        };
    }
    let out =
        super::recurrent::delta_rule(g, convolved, (decay, beta, cached), (ssm_all, delta_out));
    kda_output(g, (out, cur_2d), (s, kind.full_gate), (value, h), model)
}

/// KDA's per-channel decay from `cur`: f_b(f_a(x)) plus its bias, softplus, times A (per
/// head); or, `bounded` (Kimi-K3's gate lower bound), times A, negated through a sigmoid and
/// scaled by the bound. `value` bytes.
fn kda_decay(
    g: &mut Graph,
    (cur, h): (usize, u64),
    (s, bounded): (&Ssm, bool),
    value: u64,
) -> Option<usize> {
    let (head, inner) = (s.state, s.inner);
    // Tokens: `value` is an f32 row of `inner` a token.
    let rows = value / inner.max(1) / 4;
    let w_a = g.matrix("ssm_f_a.weight", h, head);
    let f_a = g.op(
        Kind::Fresh,
        head.checked_mul(rows)?.checked_mul(4)?,
        OTHER,
        &[w_a, cur],
    );
    let w_b = g.matrix("ssm_f_b.weight", head, inner);
    let decay = g.op(Kind::Fresh, value, INNER, &[w_b, f_a]);
    let bias = g.vector("ssm_dt.bias", inner);
    let decay = g.op(Kind::InPlace, value, INNER, &[decay, bias]);
    let a = g.vector("ssm_a", s.dt_rank);
    if bounded {
        let decay = g.view(decay, OTHER);
        let decay = g.op(Kind::InPlace, value, OTHER, &[decay, a]);
        g.tag(decay, Op::Mul);
        let decay = g.op(Kind::InPlace, value, OTHER, &[decay]);
        g.tag(decay, Op::Scale);
        let decay = g.op(Kind::InPlace, value, OTHER, &[decay]);
        g.tag(decay, Op::Unary);
        let decay = g.op(Kind::InPlace, value, OTHER, &[decay]);
        g.tag(decay, Op::Scale);
        return Some(g.view(decay, OTHER));
    }
    let decay = g.op(Kind::InPlace, value, INNER, &[decay]);
    g.tag(decay, Op::Unary);
    let decay = g.view(decay, OTHER);
    let decay = g.op(Kind::InPlace, value, OTHER, &[decay, a]);
    g.tag(decay, Op::Mul);
    Some(g.view(decay, OTHER))
}

/// KDA's output from the delta rule's result `out`: the tokens' rows made contiguous, RMS-normed
/// per head, gated by a sigmoid of g_b(g_a(x)) (from `cur_2d`, the layer's input; `full_gate`:
/// Kimi-K3's one projection), made contiguous again and projected out.
fn kda_output(
    g: &mut Graph,
    (out, cur_2d): (usize, usize),
    (s, full_gate): (&Ssm, bool),
    (value, h): (u64, u64),
    model: u64,
) -> Option<usize> {
    let (head, inner) = (s.state, s.inner);
    // Tokens: `value` is an f32 row of `inner` a token.
    let rows = value / inner.max(1) / 4;
    let y = g.view(out, OTHER);
    let y = g.op(Kind::Fresh, value, OTHER, &[y]);
    g.tag(y, Op::Cont);
    let y = g.view(y, OTHER);
    let y = g.op(Kind::InPlace, value, OTHER, &[y]);
    g.tag(y, Op::RmsNorm);
    let w_norm = g.vector("ssm_norm.weight", head);
    let y = g.op(Kind::InPlace, value, OTHER, &[y, w_norm]);
    let gate = if full_gate {
        let w_g = g.matrix("ssm_g.weight", h, inner);
        g.op(Kind::Fresh, value, INNER, &[w_g, cur_2d])
    } else {
        let w_ga = g.matrix("ssm_g_a.weight", h, head);
        let g_a = g.op(
            Kind::Fresh,
            head.checked_mul(rows)?.checked_mul(4)?,
            OTHER,
            &[w_ga, cur_2d],
        );
        let w_gb = g.matrix("ssm_g_b.weight", head, inner);
        g.op(Kind::Fresh, value, INNER, &[w_gb, g_a])
    };
    let gate = g.view(gate, OTHER);
    let gate = g.op(Kind::InPlace, value, OTHER, &[gate]);
    g.tag(gate, Op::Unary);
    let y = g.op(Kind::InPlace, value, OTHER, &[y, gate]);
    g.tag(y, Op::Mul);
    let y = g.op(Kind::Fresh, value, INNER, &[y]);
    g.tag(y, Op::Cont);
    let w_out = g.matrix("attn_output.weight", inner, h);
    Some(g.op(Kind::Fresh, model, MODEL, &[w_out, y]))
}
