//! Qwen2.5-VL's image graph (`clip_graph_qwen2vl` in `tools/mtmd/models/qwen2vl.cpp`, which
//! builds Qwen2-VL's too: LayerNorms, a GELU MLP, no windows) at clip's warm-up image: both patch kernels of the temporal pair added, the patches regrouped 2 × 2 and
//! put in window order, RMS-normed layers with M-RoPE, attention masked to windows but in every
//! `window_pattern`-th layer, a biased SwiGLU MLP, then the merger (an RMS norm, two biased
//! layers with a GELU between, over 2 × 2 patches a row) and the tokens put back in image order.

use super::graph::*;
use crate::model::{ProjectorKind, VisionTower};

/// Bytes of the tensors the tower's layers make.
pub(super) struct Sizes {
    pub(super) patches: u64,
    /// One f32 row of the tower's width per patch.
    pub(super) model: u64,
    pub(super) ffn: u64,
    /// Every head's scores over every patch (f32).
    pub(super) scores: u64,
    /// The window mask over every pair of patches, f32.
    pub(super) mask: u64,
}

impl Sizes {
    /// `t`'s sizes at its warm-up image; `None` for shapes no device could hold.
    pub(super) fn of(t: &VisionTower) -> Option<Sizes> {
        let side = t.image_size / t.patch_size;
        let patches = side.checked_mul(side)?;
        let width = |n: u64| n.checked_mul(patches)?.checked_mul(4);
        let z = Sizes {
            patches,
            model: width(t.hidden)?,
            ffn: width(t.ffn)?,
            scores: width(patches.checked_mul(t.heads)?)?,
            mask: width(patches)?,
        };
        let within = [z.model, z.ffn, z.scores, z.mask]
            .iter()
            .all(|&b| b <= MOST);
        within.then_some(z)
    }
}

/// The inputs the layers read.
#[derive(Clone, Copy)]
struct Inputs {
    positions: usize,
    /// The window mask (f16 for flash attention): `None` without windows.
    mask: Option<usize>,
}

pub(super) fn qwen25vl(t: &VisionTower, fa: bool) -> Option<Graph> {
    let z = Sizes::of(t)?;
    let patches = z.patches;
    let mut g = Graph {
        rows: patches,
        ..Graph::default()
    };
    let cur = patch_embeddings(&mut g, t, &z)?;
    // M-RoPE's four positions a patch (i32).
    let positions = g.input(patches.checked_mul(16)?);
    let windows = t.window_pattern > 0;
    let mut mask = None;
    let mut inp = cur;
    if windows {
        let inv_window_idx = g.input(patches);
        let f32_mask = g.input(z.mask);
        // The f16 copy flash attention reads, made once for every windowed layer.
        mask = Some(if fa {
            let m = g.op(Kind::Fresh, z.mask / 2, OTHER, &[f32_mask]);
            g.tag(m, Op::Cpy)
        } else {
            f32_mask
        });
        // Four patches (a merged token) a row, gathered in window order.
        let rows = g.view(cur, OTHER);
        let gathered = g.op(Kind::Fresh, z.model, OTHER, &[rows, inv_window_idx]);
        g.tag(gathered, Op::GetRows);
        inp = g.view(gathered, MODEL);
    }
    let inputs = Inputs { positions, mask };
    for l in 0..t.layers {
        g.part = Part::Layer(l);
        let full = !windows || (l + 1) % t.window_pattern == 0;
        inp = layer(&mut g, t, &z, inp, (inputs, full, fa));
    }
    g.part = Part::Output;
    let post = ("v.post_ln.weight", "v.post_ln.bias");
    let normed = norm(&mut g, t, inp, (z.model, t.hidden), post);
    merger(&mut g, t, &z, normed, windows);
    Some(g)
}

/// `build_inp_with_temporal_merge` for a still image: the image through both 2-D patch kernels
/// (`ggml_conv_2d` each: an f16 im2col, a product, made contiguous), added, then the patches
/// regrouped so that each 2 × 2 block's are adjacent (two more contiguous copies).
pub(super) fn patch_embeddings(g: &mut Graph, t: &VisionTower, z: &Sizes) -> Option<usize> {
    let pixels = t.image_size.checked_mul(t.image_size)?;
    let raw = g.input(pixels.checked_mul(3 * 4)?);
    let kernel_elems = t.patch_size.checked_mul(t.patch_size)?.checked_mul(3)?;
    let elem = if t.patch_bf16 { 4 } else { 2 };
    let unrolled = kernel_elems.checked_mul(z.patches)?.checked_mul(elem)?;
    let conv = |g: &mut Graph, name: &'static str| {
        let kernel = g.matrix(name, kernel_elems, t.hidden);
        let im2col = g.op(Kind::Fresh, unrolled, OTHER, &[kernel, raw]);
        g.tag(im2col, Op::Other);
        let rows = g.view(im2col, OTHER);
        let kernel_2d = g.view(kernel, OTHER);
        let product = g.op(Kind::Fresh, z.model, OTHER, &[rows, kernel_2d]);
        g.tag(product, Op::MulMat);
        let shaped = g.view(product, OTHER);
        let permuted = g.view(shaped, OTHER);
        let out = g.op(Kind::Fresh, z.model, OTHER, &[permuted]);
        g.tag(out, Op::Cont)
    };
    let first = conv(g, "v.patch_embd.weight");
    let second = conv(g, "v.patch_embd.weight.1");
    let sum = g.op(Kind::InPlace, z.model, OTHER, &[first, second]);
    g.tag(sum, Op::Add);
    let permuted = g.view(sum, OTHER);
    let pairs = g.op(Kind::Fresh, z.model, OTHER, &[permuted]);
    g.tag(pairs, Op::Cont);
    let reshaped = g.view(pairs, OTHER);
    let permuted = g.view(reshaped, OTHER);
    let out = g.op(Kind::Fresh, z.model, MODEL, &[permuted]);
    Some(g.tag(out, Op::Cont))
}

/// `build_norm` with `NORM_TYPE_RMS`: the norm, then its weight (no bias).
fn rms_norm(g: &mut Graph, x: usize, bytes: u64, weight: &'static str, n: u64) -> usize {
    let t = g.op(Kind::InPlace, bytes, MODEL, &[x]);
    g.tag(t, Op::RmsNorm);
    let w = g.vector(weight, n);
    g.op(Kind::InPlace, bytes, MODEL, &[t, w])
}

/// `build_norm` with `NORM_TYPE_NORMAL` of `bytes` over `n` values a row (`ggml_norm`, never in
/// place), then its weight and bias.
pub(super) fn layer_norm(
    g: &mut Graph,
    x: usize,
    (bytes, n): (u64, u64),
    (weight, bias): (&'static str, &'static str),
) -> usize {
    let t = g.op(Kind::Fresh, bytes, MODEL, &[x]);
    g.tag(t, Op::Norm);
    let w = g.vector(weight, n);
    let t = g.op(Kind::InPlace, bytes, MODEL, &[t, w]);
    let b = g.vector(bias, n);
    g.op(Kind::InPlace, bytes, MODEL, &[t, b])
}

/// The tower's norm: Qwen2.5-VL's RMS norms, Qwen2-VL's LayerNorms (`(weight, bias)`).
fn norm(
    g: &mut Graph,
    t: &VisionTower,
    x: usize,
    (bytes, n): (u64, u64),
    names: (&'static str, &'static str),
) -> usize {
    if t.kind == ProjectorKind::Qwen25Vl {
        rms_norm(g, x, bytes, names.0, n)
    } else {
        layer_norm(g, x, (bytes, n), names)
    }
}

/// A biased projection of `x` (`rows` of `h` values) to `n` values a row, in `layout`.
pub(super) fn projection(
    g: &mut Graph,
    x: usize,
    (w, b): (&'static str, &'static str),
    (rows, h, n): (u64, u64, u64),
    layout: u64,
) -> usize {
    let bytes = n.saturating_mul(rows).saturating_mul(4);
    let w = g.matrix(w, h, n);
    let t = g.op(Kind::Fresh, bytes, layout, &[w, x]);
    let b = g.vector(b, n);
    g.op(Kind::InPlace, bytes, layout, &[t, b])
}

/// One layer: an RMS norm, q/k/v with M-RoPE on q and k, attention (masked to windows unless
/// `full`), its biased output, the residual, an RMS norm, the biased SwiGLU MLP, the residual.
fn layer(
    g: &mut Graph,
    t: &VisionTower,
    z: &Sizes,
    inp: usize,
    (inputs, full, fa): (Inputs, bool, bool),
) -> usize {
    let h = t.hidden;
    let shape = (z.patches, h, h);
    let cur = norm(g, t, inp, (z.model, h), ("ln1.weight", "ln1.bias"));
    let q = projection(g, cur, ("attn_q.weight", "attn_q.bias"), shape, MODEL);
    let k = projection(g, cur, ("attn_k.weight", "attn_k.bias"), shape, MODEL);
    let v = projection(g, cur, ("attn_v.weight", "attn_v.bias"), shape, MODEL);
    // RoPE reads q and k through their per-head reshapes: views, whose memory the reserve
    // never reuses in place, so each rotation is a fresh tensor.
    let [q, k] = [g.view(q, Q3), g.view(k, K3)];
    let q = g.op(Kind::InPlace, z.model, Q3, &[q, inputs.positions]);
    g.tag(q, Op::Rope);
    let k = g.op(Kind::InPlace, z.model, K3, &[k, inputs.positions]);
    g.tag(k, Op::Rope);
    let v = g.view(v, OTHER);
    let mask = inputs.mask.filter(|_| !full);
    let attn = attend(g, z, [q, k, v], mask, fa);
    let out = projection(g, attn, ("attn_out.weight", "attn_out.bias"), shape, MODEL);
    let sum = g.op(Kind::InPlace, z.model, MODEL, &[out, inp]);
    g.tag(sum, Op::Add);
    let cur = norm(g, t, sum, (z.model, h), ("ln2.weight", "ln2.bias"));
    let ffn = (z.patches, h, t.ffn);
    let up = projection(g, cur, ("ffn_up.weight", "ffn_up.bias"), ffn, FFN);
    // Qwen2.5-VL's SwiGLU (the gate apart), Qwen2-VL's GELU in place.
    let act = if t.kind == ProjectorKind::Qwen25Vl {
        let gate = projection(g, cur, ("ffn_gate.weight", "ffn_gate.bias"), ffn, FFN);
        let act = g.op(Kind::Fresh, z.ffn, FFN, &[gate, up]);
        g.tag(act, Op::Glu)
    } else {
        let act = g.op(Kind::InPlace, z.ffn, FFN, &[up]);
        g.tag(act, Op::Unary)
    };
    let down = projection(
        g,
        act,
        ("ffn_down.weight", "ffn_down.bias"),
        (z.patches, t.ffn, h),
        MODEL,
    );
    let out = g.op(Kind::InPlace, z.model, MODEL, &[sum, down]);
    g.tag(out, Op::Add)
}

/// clip's `build_attn`: q, k and v ordered into the graph first; flash attention over f16
/// copies of K and V (and of the mask, again, in a windowed layer), or the scores with V made
/// contiguous, the softmax in place, their product made contiguous.
pub(super) fn attend(
    g: &mut Graph,
    z: &Sizes,
    [q, k, v]: [usize; 3],
    mask: Option<usize>,
    fa: bool,
) -> usize {
    g.expand(q);
    g.expand(k);
    g.expand(v);
    let qp = g.view(q, OTHER);
    let kp = g.view(k, OTHER);
    if fa {
        let vp = g.view(v, OTHER);
        let k16 = g.op(Kind::Fresh, z.model / 2, OTHER, &[kp]);
        g.tag(k16, Op::Cpy);
        let v16 = g.op(Kind::Fresh, z.model / 2, OTHER, &[vp]);
        g.tag(v16, Op::Cpy);
        let mut srcs = vec![qp, k16, v16];
        if let Some(m) = mask {
            let m16 = g.op(Kind::Fresh, z.mask / 2, OTHER, &[m]);
            srcs.push(g.tag(m16, Op::Cpy));
        }
        let o = g.op(Kind::Fresh, z.model, OTHER, &srcs);
        g.tag(o, Op::Other);
        g.view(o, MODEL)
    } else {
        let vp = g.view(v, OTHER);
        let v_cont = g.op(Kind::Fresh, z.model, OTHER, &[vp]);
        g.tag(v_cont, Op::Cont);
        let kq = g.op(Kind::Fresh, z.scores, SCORES, &[kp, qp]);
        g.tag(kq, Op::MulMat);
        let srcs: Vec<usize> = std::iter::once(kq).chain(mask).collect();
        let kq = g.op(Kind::InPlace, z.scores, SCORES, &srcs);
        g.tag(kq, Op::SoftMax);
        let kqv = g.op(Kind::Fresh, z.model, OTHER, &[v_cont, kq]);
        g.tag(kqv, Op::MulMat);
        let permuted = g.view(kqv, OTHER);
        let cont = g.op(Kind::Fresh, z.model, MODEL, &[permuted]);
        g.tag(cont, Op::Cont)
    }
}

/// The merger: four patches a row through `mm.0` (biased), a GELU in place, `mm.2` (biased) to
/// the text model's width; with windows, the tokens gathered back into image order.
fn merger(g: &mut Graph, t: &VisionTower, z: &Sizes, cur: usize, windows: bool) -> usize {
    let merged = t.merge.saturating_mul(t.merge).max(1);
    let tokens = z.patches / merged;
    let wide = t.hidden.saturating_mul(merged);
    let rows = g.view(cur, LATENT);
    let up = projection(
        g,
        rows,
        ("mm.0.weight", "mm.0.bias"),
        (tokens, wide, wide),
        LATENT,
    );
    let act = g.op(Kind::InPlace, z.model, LATENT, &[up]);
    g.tag(act, Op::Unary);
    let dim = t.projection_dim;
    let mut out = projection(
        g,
        act,
        ("mm.2.weight", "mm.2.bias"),
        (tokens, wide, dim),
        OTHER,
    );
    if windows {
        let window_idx = g.input(tokens.saturating_mul(4));
        let rows = g.view(out, OTHER);
        let bytes = tokens.saturating_mul(dim).saturating_mul(4);
        let gathered = g.op(Kind::Fresh, bytes, OTHER, &[rows, window_idx]);
        g.tag(gathered, Op::GetRows);
        out = g.view(gathered, OTHER);
    }
    g.expand(out);
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::super::clip_compute_buffer;
    use super::*;

    /// Qwen2.5-VL-7B's tower as its mmproj reads: 1280 wide, 32 layers of 16 heads, windows
    /// but in every 8th layer, at clip's 1288 px warm-up image (92 × 92 patches).
    fn qwen25vl_7b() -> VisionTower {
        VisionTower {
            kind: ProjectorKind::Qwen25Vl,
            image_size: 1288,
            patch_size: 14,
            hidden: 1280,
            ffn: 3420,
            layers: 32,
            heads: 16,
            projection_dim: 3584,
            merge: 2,
            window_pattern: 8,
            positions: 0,
            deepstack: Vec::new(),
            patch_bf16: false,
            input_projection_elem_bytes: 2,
        }
    }

    // llama.cpp b11312's clip on the CPU (tests/fixtures/llamacpp-mmproj/
    // qwen2.5-vl-7b-mmproj-shape.json): 704.79 MiB with flash attention, 4,871.57 without, to
    // the byte (mtmd_get_memory_usage less the weights).
    #[test]
    fn qwen25vl_buffers_are_clips() {
        let t = qwen25vl_7b();
        assert_eq!(
            clip_compute_buffer(&t, true, BufferRules::CPU),
            Some(739_025_728)
        );
        assert_eq!(
            clip_compute_buffer(&t, false, BufferRules::CPU),
            Some(5_108_210_240)
        );
    }
}
