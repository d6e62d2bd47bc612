//! The recurrent mixers' graphs: Mamba and Mamba-2 (`build_mamba_layer`, `build_mamba2_layer`)
//! and Qwen3-Next's Gated DeltaNet, with the state reads and writes around them.

use super::graph::*;
use crate::model::arch::{Ssm, SsmKind};

/// The recurrent state's graph inputs: which cached state each sequence reads (one sequence
/// here), and the rows past them (none).
#[derive(Debug, Clone, Copy)]
pub(super) struct StateInputs {
    pub(super) main: usize,
    pub(super) extra: usize,
}

/// `build_rs`: the states of one layer's cache `all` cleared where new, read by `rows` (a `get_rows`, or Mamba's scan), and the rows of
/// sequences not in the batch copied back (none here).
pub(super) fn read_states(
    g: &mut Graph,
    all: usize,
    inputs: StateInputs,
    rows: impl FnOnce(&mut Graph, usize, usize) -> usize,
) -> usize {
    let states = g.view(all, OTHER);
    let zero = g.view(states, OTHER);
    // ggml_scale_inplace on the cache: an op the scheduler places with the cache (so it ends
    // a device's run of ops), though it takes no memory.
    let cleared = g.write(zero, &[zero]);
    g.tag(cleared, Op::Scale);
    g.expand(cleared);
    let out = rows(g, states, inputs.main);
    g.expand(out);
    let extra = g.op(Kind::Fresh, 0, OTHER, &[states, inputs.extra]);
    g.tag(extra, Op::GetRows);
    let dest = g.view(all, OTHER);
    let copied = g.copy(extra, dest);
    g.expand(copied);
    out
}

/// `ggml_get_rows`: the rows of `states` that `ids` name, `bytes` of them.
pub(super) fn gather_rows(g: &mut Graph, bytes: u64, (states, ids): (usize, usize)) -> usize {
    let rows = g.op(Kind::Fresh, bytes, OTHER, &[states, ids]);
    g.tag(rows, Op::GetRows)
}

/// The convolution's input: the cached columns beside the new inputs (transposed), its last
/// `d_conv − 1` columns copied back into the layer's cache `conv_all`.
pub(super) fn convolution_input(
    g: &mut Graph,
    (cached, new): (usize, usize),
    (bytes, tokens): (u64, u64),
    conv_all: usize,
) -> usize {
    let transposed = g.view(new, OTHER);
    let conv_x = g.op(Kind::Fresh, bytes, OTHER, &[cached, transposed]);
    // Each channel's last columns: ggml_nbytes stops at the last channel's, short of its
    // `tokens` new columns.
    let last = g.view_spanning(
        conv_x,
        OTHER,
        bytes.saturating_sub(tokens.saturating_mul(4)),
    );
    let dest = g.view(conv_all, OTHER);
    let saved = g.copy(last, dest);
    g.expand(saved);
    conv_x
}

/// One Mamba mixer over `cur` (`tokens` tokens, one sequence), as llama.cpp's
/// `build_mamba_layer` (v1) and `build_mamba2_layer` build it: the in-projection (v1: x and z;
/// v2: z, x/B/C and Δ in one), the convolution over the cached and new inputs (its last
/// `d_conv − 1` columns written back), Δ, B and C (v1: projected from x, normed for Jamba and
/// FalconMamba; v2: views of the convolution's output and the projection), the selective scan
/// from the cached state (its final state written back), the skip term, the z gate, Mamba-2's
/// grouped norm where the model has one, and the out-projection. Returns the mixer's output.
pub(super) fn mamba(
    g: &mut Graph,
    cur: usize,
    s: &Ssm,
    inputs: StateInputs,
    tokens: u64,
    model: u64,
) -> Option<usize> {
    let v2 = s.kind == SsmKind::Mamba2;
    let f32 = |elems: u64| elems.checked_mul(4);
    let width = |n: u64| f32(n.checked_mul(tokens)?);
    let channels = u64::try_from(s.conv_channels()).ok()?;
    let past = s.conv_kernel - 1;
    let scan_out = f32(s
        .inner
        .checked_mul(tokens)?
        .checked_add(s.state.checked_mul(s.inner)?)?)?;
    let (conv_all, ssm_all) = (g.external(), g.external());
    let conv_state = f32(past.checked_mul(channels)?)?;
    // Mamba-2's in-projection (z, x/B/C and Δ), the widest per-token tensor of either kind.
    let in_proj = width(channels.checked_add(s.inner)?.checked_add(s.dt_rank)?)?;
    let conv_x_bytes = f32(past.checked_add(tokens)?.checked_mul(channels)?)?;
    if [conv_state, in_proj, conv_x_bytes, scan_out]
        .iter()
        .any(|&bytes| bytes > MOST)
    {
        return None;
    }
    let conv = read_states(g, conv_all, inputs, |g, states, ids| {
        gather_rows(g, conv_state, (states, ids))
    });
    let conv = g.view(conv, OTHER);
    let h = model / 4 / tokens.max(1);
    let in_n = if v2 {
        channels.saturating_add(s.inner).saturating_add(s.dt_rank)
    } else {
        s.inner.saturating_mul(2)
    };
    let w_in = g.matrix("ssm_in.weight", h, in_n);
    // The projection's z, the convolution's input, and (Mamba-2) Δ.
    let (z, conv_in, dt) = if v2 {
        let zx = g.op(Kind::Fresh, in_proj, OTHER, &[w_in, cur]);
        let zx = g.view(zx, OTHER);
        let (z, xbc, dt) = (g.view(zx, OTHER), g.view(zx, OTHER), g.view(zx, OTHER));
        (z, xbc, Some(dt))
    } else {
        let cur = g.view(cur, OTHER);
        let xz = g.op(
            Kind::Fresh,
            width(s.inner.checked_mul(2)?)?,
            OTHER,
            &[w_in, cur],
        );
        let x = g.view(xz, OTHER);
        (g.view(xz, OTHER), x, None)
    };
    let conv_x = convolution_input(g, (conv, conv_in), (conv_x_bytes, tokens), conv_all);
    let w_conv = g.matrix("ssm_conv1d.weight", s.conv_kernel, channels);
    let b = g.vector("ssm_conv1d.bias", channels);
    let conv_out = width(channels)?;
    let layout = if v2 { OTHER } else { INNER };
    let x = g.op(Kind::Fresh, conv_out, layout, &[conv_x, w_conv]);
    g.tag(x, Op::SsmConv);
    let x = g.op(Kind::InPlace, conv_out, layout, &[x, b]);
    let x = g.op(Kind::InPlace, conv_out, layout, &[x]);
    g.tag(x, Op::Unary);
    let (scan_x, dt, bs, cs) = match dt {
        Some(dt) => {
            let (scan_x, bs, cs) = mamba2_scan_views(g, s, (x, channels), tokens)?;
            let heads = width(s.dt_rank)?;
            let dt = g.op(Kind::Fresh, heads, OTHER, &[dt]);
            let b = g.vector("ssm_dt.bias", s.dt_rank);
            (scan_x, g.op(Kind::InPlace, heads, OTHER, &[dt, b]), bs, cs)
        }
        None => mamba1_scan_inputs(g, s, x, tokens)?,
    };
    let a = if v2 {
        g.vector("ssm_a", s.dt_rank)
    } else {
        g.vector("ssm_a", s.state.saturating_mul(s.inner))
    };
    let y_ssm = read_states(g, ssm_all, inputs, |g, states, ids| {
        let ssm = g.view(states, OTHER);
        let y = g.op(
            Kind::Fresh,
            scan_out,
            OTHER,
            &[ssm, scan_x, dt, a, bs, cs, ids],
        );
        // One row: the tokens' outputs and the final states packed (`ggml_ssm_scan`).
        g.tensors[y].rows = 1;
        y
    });
    let last_state = g.view(y_ssm, OTHER);
    let dest = g.view(ssm_all, OTHER);
    let saved = g.copy(last_state, dest);
    g.expand(saved);
    mamba_output(g, s, (y_ssm, x, scan_x, z), tokens, model)
}

/// Mamba-2's x, B and C: views of the convolution's output `x` (`channels` wide a token), each
/// striding over whole rows, so that ggml_nbytes (what a copy to another backend holds) spans
/// the rows before the last whole and the last one's part.
fn mamba2_scan_views(
    g: &mut Graph,
    s: &Ssm,
    (x, channels): (usize, u64),
    tokens: u64,
) -> Option<(usize, usize, usize)> {
    let before_last = tokens.saturating_sub(1).checked_mul(channels)?;
    let groups = s.groups.checked_mul(s.state)?;
    let mut span = |part: u64| -> Option<usize> {
        let bytes = before_last.checked_add(part)?.checked_mul(4)?;
        Some(g.view_spanning(x, OTHER, bytes))
    };
    Some((span(s.inner)?, span(groups)?, span(groups)?))
}

/// Mamba-1's scan inputs from the convolution's output `x`: Δ, B and C projected from it (each
/// normed in Jamba and FalconMamba), and Δ projected up to the inner width and biased.
fn mamba1_scan_inputs(
    g: &mut Graph,
    s: &Ssm,
    x: usize,
    tokens: u64,
) -> Option<(usize, usize, usize, usize)> {
    let width = |n: u64| n.checked_mul(tokens)?.checked_mul(4);
    let inner = width(s.inner)?;
    let w_x = g.matrix(
        "ssm_x.weight",
        s.inner,
        s.dt_rank.saturating_add(s.state.saturating_mul(2)),
    );
    let dt_b_c = width(s.dt_rank.checked_add(s.state.checked_mul(2)?)?)?;
    let x_db = g.op(Kind::Fresh, dt_b_c, OTHER, &[w_x, x]);
    let (dt, bs, cs) = (
        g.view(x_db, OTHER),
        g.view(x_db, OTHER),
        g.view(x_db, OTHER),
    );
    // Jamba's norms carry weights, FalconMamba's do not; either way each is a tensor of its own
    // (a view's memory is never reused in place).
    let weighted = s.kind == SsmKind::JambaMamba;
    let (dt, bs, cs) = if weighted || s.norm {
        let norm = |g: &mut Graph, t: usize, bytes: u64, (name, n): (&'static str, u64)| {
            let t = g.op(Kind::InPlace, bytes, OTHER, &[t]);
            if !weighted {
                return t;
            }
            let w = g.vector(name, n);
            g.op(Kind::InPlace, bytes, OTHER, &[t, w])
        };
        let state = width(s.state)?;
        (
            norm(g, dt, width(s.dt_rank)?, ("ssm_dt_norm.weight", s.dt_rank)),
            norm(g, bs, state, ("ssm_b_norm.weight", s.state)),
            norm(g, cs, state, ("ssm_c_norm.weight", s.state)),
        )
    } else {
        (g.op(Kind::Fresh, width(s.dt_rank)?, OTHER, &[dt]), bs, cs)
    };
    let w_dt = g.matrix("ssm_dt.weight", s.dt_rank, s.inner);
    let b = g.vector("ssm_dt.bias", s.inner);
    let dt = g.op(Kind::Fresh, inner, INNER, &[w_dt, dt]);
    let dt = g.op(Kind::InPlace, inner, INNER, &[dt, b]);
    Some((g.view(x, OTHER), dt, bs, cs))
}

/// The mixer's output from the scan `y_ssm`: the skip (D) connection, the z gate, Mamba-2's
/// grouped norm, and the out-projection.
fn mamba_output(
    g: &mut Graph,
    s: &Ssm,
    (y_ssm, x, scan_x, z): (usize, usize, usize, usize),
    tokens: u64,
    model: u64,
) -> Option<usize> {
    let v2 = s.kind == SsmKind::Mamba2;
    let inner = s.inner.checked_mul(tokens)?.checked_mul(4)?;
    // The tokens' outputs, ahead of the final states in the scan's result.
    let y = g.view_spanning(y_ssm, INNER, inner);
    let d = g.vector("ssm_d", if v2 { s.dt_rank } else { s.inner });
    // Mamba scales its own x (in place); Mamba-2 a view of the convolution's output.
    let skip_of = if v2 { scan_x } else { x };
    let skip = g.op(Kind::InPlace, inner, INNER, &[skip_of, d]);
    let y = g.op(Kind::InPlace, inner, INNER, &[y, skip]);
    g.tag(y, Op::Add);
    let z = g.op(Kind::Fresh, inner, INNER, &[z]);
    let mut y = g.op(Kind::Fresh, inner, INNER, &[z, y]);
    if v2 && s.norm {
        let grouped = g.view(y, OTHER);
        let n = g.op(Kind::InPlace, inner, INNER, &[grouped]);
        g.tag(n, Op::RmsNorm);
        let w = g.vector("ssm_norm.weight", s.inner);
        y = g.op(Kind::InPlace, inner, INNER, &[n, w]);
    }
    let w_out = g.matrix("ssm_out.weight", s.inner, model / 4 / tokens.max(1));
    if v2 {
        let y = g.view(y, OTHER);
        Some(g.op(Kind::Fresh, model, MODEL, &[w_out, y]))
    } else {
        let out = g.op(Kind::Fresh, model, MODEL, &[w_out, y]);
        Some(g.view(out, MODEL))
    }
}

/// One gated DeltaNet mixer over `cur` (`tokens` tokens, one sequence), as llama.cpp's
/// `qwen3next` builder makes it with the fused gated-delta-net op its CPU backend runs: q, k
/// and v (and the output gate z) projected, either by one matrix whose parts are copied out
/// (`joint`, older GGUFs) or by two; β and α projected, β's sigmoid and α's softplus-scaled
/// decay; the convolution over the cached and new inputs (its last `d_conv − 1` columns
/// written back) and its SiLU; q and k L2-normed, repeated to the value heads where there are
/// fewer (Qwen3-Next; Qwen3.5's `apart` layout has β and α projected apart and lets the fused op
/// broadcast q and k); the delta rule from the cached state (its output beside the final state, which is
/// written back); the gated norm with z, and the out-projection.
pub(super) fn delta_net(
    g: &mut Graph,
    cur: usize,
    s: &Ssm,
    inputs: StateInputs,
    tokens: u64,
    (model, joint, apart): (u64, bool, bool),
) -> Option<usize> {
    let f32 = |elems: u64| elems.checked_mul(4);
    let width = |n: u64| f32(n.checked_mul(tokens)?);
    let (head, key_heads, value_heads) = (s.state, s.groups, s.dt_rank);
    let key = width(head.checked_mul(key_heads)?)?;
    let value = width(s.inner)?;
    let channels = head
        .checked_mul(key_heads)?
        .checked_mul(2)?
        .checked_add(s.inner)?;
    let past = s.conv_kernel - 1;
    let conv_state = f32(past.checked_mul(channels)?)?;
    let conv_x_bytes = f32(past.checked_add(tokens)?.checked_mul(channels)?)?;
    let repeated = width(head.checked_mul(value_heads)?)?;
    let state = f32(head.checked_mul(s.inner)?)?;
    // The op's output: every token's value rows, then the final state.
    let delta_out = f32(s.inner.checked_mul(tokens.checked_add(head)?)?)?;
    let qkvz = width(channels.checked_add(s.inner)?)?;
    if [conv_x_bytes, qkvz, delta_out, state, repeated]
        .iter()
        .any(|&bytes| bytes > MOST)
    {
        return None;
    }
    // The builder expands the layer's normed input before anything else (the Mamba builders
    // read their states first).
    g.expand(cur);
    let (conv_all, ssm_all) = (g.external(), g.external());
    let conv = read_states(g, conv_all, inputs, |g, states, ids| {
        gather_rows(g, conv_state, (states, ids))
    });
    let conv = g.view(conv, OTHER);
    let h = model / 4 / tokens.max(1);
    let (mixed, z) = delta_projections(
        g,
        (cur, h),
        joint,
        (key, value, width(channels)?),
        (channels, s.inner),
    )?;
    let heads = (width(value_heads)?, value_heads);
    let (beta, decay) = if apart {
        delta_gates_apart(g, (cur, h), heads)
    } else {
        delta_gates(g, (cur, h), heads, width(value_heads.checked_mul(2)?)?)
    };
    let conv_x = convolution_input(g, (conv, mixed), (conv_x_bytes, tokens), conv_all);
    let cached = read_states(g, ssm_all, inputs, |g, states, ids| {
        gather_rows(g, state, (states, ids))
    });
    let cached = g.view(cached, OTHER);
    let w_conv = g.matrix("ssm_conv1d.weight", s.conv_kernel, channels);
    let x = g.op(Kind::Fresh, width(channels)?, OTHER, &[conv_x, w_conv]);
    g.tag(x, Op::SsmConv);
    let x = g.op(Kind::InPlace, width(channels)?, OTHER, &[x]);
    g.tag(x, Op::Unary);
    // q and k: an RMS norm scaled to an L2 norm, then repeated to the value heads.
    let mut normed = || -> Option<usize> {
        let part = g.view(x, OTHER);
        let n = g.op(Kind::Fresh, key, OTHER, &[part]);
        g.tag(n, Op::RmsNorm);
        let n = g.op(Kind::InPlace, key, OTHER, &[n]);
        g.tag(n, Op::Scale);
        if key_heads == value_heads || apart {
            return Some(n);
        }
        let n = g.view(n, OTHER);
        let r = g.op(Kind::Fresh, repeated, OTHER, &[n]);
        Some(g.view(r, OTHER))
    };
    let (q, k) = (normed()?, normed()?);
    let v = g.view(x, OTHER);
    let out = delta_rule(g, [q, k, v], (decay, beta, cached), (ssm_all, delta_out));
    Some(gated_output(
        g,
        s,
        (out, z),
        (value, value_heads),
        (h, model),
    ))
}

/// The fused gated-delta-net op over q, k and v with its decay, β and cached state: every
/// token's output and the final state packed in one row of `bytes`, the state written back to
/// `ssm_all` (Qwen3-Next's and Qwen3.5's gated DeltaNet, Kimi-Linear's KDA).
pub(super) fn delta_rule(
    g: &mut Graph,
    qkv: [usize; 3],
    (decay, beta, cached): (usize, usize, usize),
    (ssm_all, bytes): (usize, u64),
) -> usize {
    let [q, k, v] = qkv;
    let out = g.op(Kind::Fresh, bytes, OTHER, &[q, k, v, decay, beta, cached]);
    g.tensors[out].rows = 1;
    let last_state = g.view(out, OTHER);
    let dest = g.view(ssm_all, OTHER);
    let saved = g.copy(last_state, dest);
    g.expand(saved);
    out
}

/// Gated DeltaNet's output: the delta rule's tokens normed per head, gated by SiLU(z), and
/// projected out (`value` bytes wide over `heads` value heads, back to `h` × `model`).
fn gated_output(
    g: &mut Graph,
    s: &Ssm,
    (out, z): (usize, usize),
    (value, heads): (u64, u64),
    (h, model): (u64, u64),
) -> usize {
    let y = g.view(out, OTHER);
    let y = g.op(Kind::Fresh, value, INNER, &[y]);
    g.tag(y, Op::RmsNorm);
    let w_norm = g.vector("ssm_norm.weight", s.inner / heads.max(1));
    let y = g.op(Kind::InPlace, value, INNER, &[y, w_norm]);
    let z = g.view(z, OTHER);
    let z = g.op(Kind::Fresh, value, INNER, &[z]);
    g.tag(z, Op::Unary);
    let y = g.op(Kind::InPlace, value, INNER, &[y, z]);
    g.tag(y, Op::Mul);
    let y = g.view(y, OTHER);
    let w_out = g.matrix("ssm_out.weight", s.inner, h);
    let out = g.op(Kind::Fresh, model, MODEL, &[w_out, y]);
    g.view(out, MODEL)
}

/// Gated DeltaNet's projections of `cur`: the mixed q/k/v (from one joint q/k/v/z projection
/// whose parts are copied out and joined, or from a q/k/v projection beside z's own), and z.
fn delta_projections(
    g: &mut Graph,
    (cur, h): (usize, u64),
    joint: bool,
    (key, value, mixed_bytes): (u64, u64, u64),
    (channels, inner): (u64, u64),
) -> Option<(usize, usize)> {
    Some(if joint {
        let w = g.matrix("ssm_in.weight", h, channels.saturating_add(inner));
        let qkvz = g.op(
            Kind::Fresh,
            mixed_bytes.checked_add(value)?,
            OTHER,
            &[w, cur],
        );
        let parts = g.view(qkvz, OTHER);
        let mut copy = |bytes: u64| {
            let part = g.view(parts, OTHER);
            g.op(Kind::Fresh, bytes, OTHER, &[part])
        };
        let (q, k) = (copy(key), copy(key));
        let v = copy(value);
        let z = copy(value);
        let qk = g.op(Kind::Fresh, key.checked_mul(2)?, OTHER, &[q, k]);
        (g.op(Kind::Fresh, mixed_bytes, OTHER, &[qk, v]), z)
    } else {
        let w = g.matrix("attn_qkv.weight", h, channels);
        let wz = g.matrix("attn_gate.weight", h, inner);
        let qkv = g.op(Kind::Fresh, mixed_bytes, OTHER, &[w, cur]);
        (
            g.view(qkv, OTHER),
            g.op(Kind::Fresh, value, OTHER, &[wz, cur]),
        )
    })
}

/// Gated DeltaNet's per-head gates from `cur`: β (a sigmoid of b) and the decay (a softplus of
/// a plus its bias, times −exp(A_log)), `heads` bytes each, from one projection of `ba` bytes.
fn delta_gates(
    g: &mut Graph,
    (cur, h): (usize, u64),
    (heads, n): (u64, u64),
    ba: u64,
) -> (usize, usize) {
    let w_ba = g.matrix("ssm_ba.weight", h, n.saturating_mul(2));
    let ba = g.op(Kind::Fresh, ba, OTHER, &[w_ba, cur]);
    let ba = g.view(ba, OTHER);
    let (b, a) = (g.view(ba, OTHER), g.view(ba, OTHER));
    let b = g.op(Kind::Fresh, heads, OTHER, &[b]);
    let beta = g.op(Kind::InPlace, heads, OTHER, &[b]);
    g.tag(beta, Op::Unary);
    let alpha = g.op(Kind::Fresh, heads, OTHER, &[a]);
    let dt_bias = g.vector("ssm_dt.bias", n);
    let alpha = g.op(Kind::InPlace, heads, OTHER, &[alpha, dt_bias]);
    let alpha = g.op(Kind::InPlace, heads, OTHER, &[alpha]);
    g.tag(alpha, Op::Unary);
    let a_log = g.vector("ssm_a", n);
    let decay = g.op(Kind::InPlace, heads, OTHER, &[alpha, a_log]);
    (g.view(beta, OTHER), g.view(decay, OTHER))
}

/// Qwen3.5's gated DeltaNet gates: β (a sigmoid of its own projection) and the decay (a softplus
/// of α's projection plus its bias, times −exp(A_log)), `heads` bytes each.
fn delta_gates_apart(
    g: &mut Graph,
    (cur, h): (usize, u64),
    (heads, n): (u64, u64),
) -> (usize, usize) {
    let w_beta = g.matrix("ssm_beta.weight", h, n);
    let b = g.op(Kind::Fresh, heads, OTHER, &[w_beta, cur]);
    let b = g.view(b, OTHER);
    let beta = g.op(Kind::InPlace, heads, OTHER, &[b]);
    g.tag(beta, Op::Unary);
    let w_alpha = g.matrix("ssm_alpha.weight", h, n);
    let a = g.op(Kind::Fresh, heads, OTHER, &[w_alpha, cur]);
    let a = g.view(a, OTHER);
    let dt_bias = g.vector("ssm_dt.bias", n);
    let alpha = g.op(Kind::InPlace, heads, OTHER, &[a, dt_bias]);
    let alpha = g.op(Kind::InPlace, heads, OTHER, &[alpha]);
    g.tag(alpha, Op::Unary);
    let a_log = g.vector("ssm_a", n);
    let decay = g.op(Kind::InPlace, heads, OTHER, &[alpha, a_log]);
    (beta, g.view(decay, OTHER))
}
