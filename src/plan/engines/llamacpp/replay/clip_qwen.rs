//! Qwen2.5-VL's image graph (`clip_graph_qwen2vl` in `tools/mtmd/models/qwen2vl.cpp`, which
//! builds Qwen2-VL's too: LayerNorms, a GELU MLP, no windows) at clip's warm-up image: both
//! patch kernels of the temporal pair added, the patches regrouped 2 × 2 and put in window
//! order, RMS-normed layers with M-RoPE, attention masked to windows but in every
//! `window_pattern`-th layer, a biased SwiGLU MLP, then the merger (an RMS norm, two biased
//! layers with a GELU between, over 2 × 2 patches a row) and the tokens put back in image order.

use super::clip_vit::*;
use super::graph::*;
use crate::model::{ProjectorKind, VisionTower};

/// The inputs the layers read.
#[derive(Clone, Copy)]
struct Inputs {
    positions: usize,
    /// The window mask (f16 for flash attention): `None` without windows.
    mask: Option<usize>,
}

pub(super) fn qwen25vl(t: &VisionTower, fa: bool) -> Option<Graph> {
    let (z, mut g, raw) = image_graph(t)?;
    let patches = z.patches;
    let cur = patch_embeddings(&mut g, t, &z, raw)?;
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
            g.cast(f32_mask, z.mask / 2)
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
pub(super) fn patch_embeddings(
    g: &mut Graph,
    t: &VisionTower,
    z: &Sizes,
    raw: usize,
) -> Option<usize> {
    let first = conv_2d(g, t, z, raw, "v.patch_embd.weight")?;
    let second = conv_2d(g, t, z, raw, "v.patch_embd.weight.1")?;
    let sum = g.op(Kind::InPlace, z.model, OTHER, &[first, second]);
    g.tag(sum, Op::Add);
    let permuted = g.view(sum, OTHER);
    Some(regroup(g, z, permuted))
}

/// One row a patch regrouped so that each 2 × 2 block's patches are adjacent: `x` made
/// contiguous, reshaped and permuted, made contiguous again.
pub(super) fn regroup(g: &mut Graph, z: &Sizes, x: usize) -> usize {
    let pairs = g.op(Kind::Fresh, z.model, OTHER, &[x]);
    g.tag(pairs, Op::Cont);
    let reshaped = g.view(pairs, OTHER);
    let permuted = g.view(reshaped, OTHER);
    let out = g.op(Kind::Fresh, z.model, MODEL, &[permuted]);
    g.tag(out, Op::Cont)
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
        rms(g, x, bytes, (Some(names.0), n))
    } else {
        layer_norm(g, x, (bytes, n), names)
    }
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
    let [q, k] = [g.view(q, Q3), g.view(k, K3)];
    let [q, k] = mrope(g, z, [q, k], inputs.positions);
    let v = g.view(v, OTHER);
    let mask = inputs.mask.filter(|_| !full);
    let attn = attend(g, z, [q, k, v], mask, fa);
    let sum = attn_out(g, t, z, attn, inp);
    let cur = norm(g, t, sum, (z.model, h), ("ln2.weight", "ln2.bias"));
    let ffn = (z.patches, h, t.ffn);
    let up = projection(g, cur, ("ffn_up.weight", "ffn_up.bias"), ffn, FFN);
    // Qwen2.5-VL's SwiGLU (the gate apart), Qwen2-VL's GELU in place.
    if t.kind == ProjectorKind::Qwen25Vl {
        let gate = projection(g, cur, ("ffn_gate.weight", "ffn_gate.bias"), ffn, FFN);
        let act = g.op(Kind::Fresh, z.ffn, FFN, &[gate, up]);
        g.tag(act, Op::Glu);
        down(g, t, z, act, sum)
    } else {
        gelu_down(g, t, z, up, sum)
    }
}

/// M-RoPE on the per-head reshapes of q and k: views, whose memory the reserve never reuses
/// in place, so each rotation is a fresh tensor.
pub(super) fn mrope(g: &mut Graph, z: &Sizes, [q, k]: [usize; 2], positions: usize) -> [usize; 2] {
    let q = g.op(Kind::InPlace, z.model, Q3, &[q, positions]);
    g.tag(q, Op::Rope);
    let k = g.op(Kind::InPlace, z.model, K3, &[k, positions]);
    [q, g.tag(k, Op::Rope)]
}

/// The merger: four patches a row through `mm.0` (biased), a GELU in place, `mm.2` (biased) to
/// the text model's width; with windows, the tokens gathered back into image order.
fn merger(g: &mut Graph, t: &VisionTower, z: &Sizes, cur: usize, windows: bool) -> usize {
    let rows = g.view(cur, LATENT);
    let mut out = merger_mlp(g, t, z, rows, MERGER);
    if windows {
        let tokens = z.patches / t.merge.saturating_mul(t.merge).max(1);
        let window_idx = g.input(tokens.saturating_mul(4));
        let rows = g.view(out, OTHER);
        let bytes = tokens.saturating_mul(t.projection_dim).saturating_mul(4);
        let gathered = g.op(Kind::Fresh, bytes, OTHER, &[rows, window_idx]);
        g.tag(gathered, Op::GetRows);
        out = g.view(gathered, OTHER);
    }
    g.expand(out);
    out
}

/// The main merger's two biased layers.
pub(super) const MERGER: [(&str, &str); 2] =
    [("mm.0.weight", "mm.0.bias"), ("mm.2.weight", "mm.2.bias")];

/// A merger's MLP over `rows` of the merged patches: the biased layer `names[0]`, a GELU in
/// place, the biased layer `names[1]` to the text model's width.
pub(super) fn merger_mlp(
    g: &mut Graph,
    t: &VisionTower,
    z: &Sizes,
    rows: usize,
    names: [(&'static str, &'static str); 2],
) -> usize {
    let merged = t.merge.saturating_mul(t.merge).max(1);
    let tokens = z.patches / merged;
    let wide = t.hidden.saturating_mul(merged);
    let up = projection(g, rows, names[0], (tokens, wide, wide), LATENT);
    let act = g.op(Kind::InPlace, z.model, LATENT, &[up]);
    g.tag(act, Op::Unary);
    projection(g, act, names[1], (tokens, wide, t.projection_dim), OTHER)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Qwen2.5-VL-7B's tower as its mmproj reads: 1280 wide, 32 layers of 16 heads, windows
    /// but in every 8th layer, at clip's 1288 px warm-up image (92 × 92 patches).
    fn qwen25vl_7b() -> VisionTower {
        VisionTower {
            image_size: 1288,
            patch_size: 14,
            hidden: 1280,
            ffn: 3420,
            layers: 32,
            heads: 16,
            projection_dim: 3584,
            merge: 2,
            window_pattern: 8,
            ..blank(ProjectorKind::Qwen25Vl)
        }
    }

    // llama.cpp b11312's clip on the CPU (tests/fixtures/llamacpp-mmproj/
    // qwen2.5-vl-7b-mmproj-shape.json): 704.79 MiB with flash attention, 4,871.57 without, to
    // the byte (mtmd_get_memory_usage less the weights).
    #[test]
    fn qwen25vl_buffers_are_clips() {
        let buffers = cpu_buffers(qwen25vl, &qwen25vl_7b());
        assert_eq!(buffers, [Some(739_025_728), Some(5_108_210_240)]);
    }
}
