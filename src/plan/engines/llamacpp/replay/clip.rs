//! A projector's image graph: llama.cpp's clip (`tools/mtmd`) reserves its compute buffer for
//! one image of the tower's own size at warm-up (`clip_image_batch` of `warmup_image_size`),
//! through the same graph allocator as the text graph. Gemma 3's graph (`clip_graph_siglip`):
//! the patch convolution (`ggml_conv_2d`: an im2col, then a product), the learned positions,
//! `build_vit`'s pre-norm layers over every patch at once with no mask, the post-layernorm,
//! then the patches average-pooled, RMS-normed and projected to the text model's width.

use super::clip_vit::*;
use super::graph::*;
use crate::model::{ProjectorKind, VisionTower};

/// The compute buffer clip reserves for `t` in a buffer placed by `rules`, with or without
/// flash attention; `None` for a projector whose graph is not modelled, or shapes no device
/// could hold.
pub(crate) fn clip_compute_buffer(
    t: &VisionTower,
    flash_attention: bool,
    rules: BufferRules,
) -> Option<u64> {
    let build: fn(&VisionTower, bool) -> Option<Graph> = match t.kind {
        ProjectorKind::Gemma3 => gemma3,
        ProjectorKind::Qwen2Vl | ProjectorKind::Qwen25Vl => super::clip_qwen::qwen25vl,
        ProjectorKind::Qwen3Vl => super::clip_qwen3::qwen3vl,
        ProjectorKind::Gemma4V => super::clip_gemma4::gemma4v,
        ProjectorKind::Other(_) => return None,
    };
    Some(super::gallocr::reserve(&build(t, flash_attention)?, rules))
}

/// Gemma 3's graph (`clip_graph_siglip`) at its own image size.
fn gemma3(t: &VisionTower, fa: bool) -> Option<Graph> {
    let (z, mut g, raw) = image_graph(t)?;
    let conv = conv_2d(&mut g, t, &z, raw, "v.patch_embd.weight")?;
    let cur = patch_rows(&mut g, &z, conv);
    let bias = g.vector("v.patch_embd.bias", t.hidden);
    let cur = add(&mut g, &z, cur, bias);
    let pos = g.matrix("v.position_embd.weight", z.patches, t.hidden);
    let cur = add(&mut g, &z, cur, pos);
    let mut cur = g.view(cur, MODEL);
    for l in 0..t.layers {
        g.part = Part::Layer(l);
        cur = layer(&mut g, t, &z, cur, fa);
    }
    g.part = Part::Output;
    let post = ("v.post_ln.weight", "v.post_ln.bias");
    cur = layer_norm(&mut g, cur, (z.model, t.hidden), post);
    let cur = g.view(cur, MODEL);
    pool_and_project(&mut g, t, &z, cur);
    Some(g)
}

/// One of `build_vit`'s layers: norm, attention over every patch, residual, norm, a biased
/// GELU MLP, residual.
fn layer(g: &mut Graph, t: &VisionTower, z: &Sizes, inp: usize, fa: bool) -> usize {
    let h = t.hidden;
    let square = (z.patches, h, h);
    let cur = layer_norm(g, inp, (z.model, h), ("ln1.weight", "ln1.bias"));
    let q = projection(g, cur, ("attn_q.weight", "attn_q.bias"), square, MODEL);
    let k = projection(g, cur, ("attn_k.weight", "attn_k.bias"), square, MODEL);
    let v = projection(g, cur, ("attn_v.weight", "attn_v.bias"), square, MODEL);
    let [q, k, v] = [g.view(q, Q3), g.view(k, K3), g.view(v, OTHER)];
    let attn = attend(g, z, [q, k, v], None, fa);
    let sum = attn_out(g, t, z, attn, inp);
    let cur = layer_norm(g, sum, (z.model, h), ("ln2.weight", "ln2.bias"));
    // The up projection's layout is the model's where the MLP is as wide as the tower.
    let layout = if t.ffn == h { MODEL } else { FFN };
    let names = ("ffn_up.weight", "ffn_up.bias");
    let up = projection(g, cur, names, (z.patches, h, t.ffn), layout);
    gelu_down(g, t, z, up, sum)
}

/// Gemma 3's projector: the patches average-pooled `merge` × `merge`, an RMS norm and its
/// weight in place, then the product with a contiguous copy of the transposed input
/// projection (the copy is the graph's, made for every image).
fn pool_and_project(g: &mut Graph, t: &VisionTower, z: &Sizes, cur: usize) -> usize {
    let side = t.image_size / t.patch_size / t.merge.max(1);
    let tokens = side.saturating_mul(side);
    let pooled_bytes = tokens.saturating_mul(t.hidden).saturating_mul(4);
    let cur = avg_pool(g, z, cur, pooled_bytes);
    let normed = g.op(Kind::InPlace, pooled_bytes, LATENT, &[cur]);
    g.tag(normed, Op::RmsNorm);
    let w = g.vector("mm.soft_emb_norm.weight", t.hidden);
    let normed = g.op(Kind::InPlace, pooled_bytes, LATENT, &[normed, w]);
    let proj = g.matrix("mm.input_projection.weight", t.hidden, t.projection_dim);
    let proj_t = g.view(proj, OTHER);
    let copy_bytes = t
        .hidden
        .saturating_mul(t.projection_dim)
        .saturating_mul(t.input_projection_elem_bytes);
    let copy = g.op(Kind::Fresh, copy_bytes, OTHER, &[proj_t]);
    g.tag(copy, Op::Cont);
    let out_bytes = tokens.saturating_mul(t.projection_dim).saturating_mul(4);
    let out = g.op(Kind::Fresh, out_bytes, OTHER, &[copy, normed]);
    g.tag(out, Op::MulMat);
    g.tensors[out].output = true;
    g.expand(out);
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn siglip_896() -> VisionTower {
        VisionTower {
            image_size: 896,
            patch_size: 14,
            hidden: 1152,
            ffn: 4304,
            layers: 27,
            heads: 16,
            projection_dim: 2560,
            merge: 4,
            positions: 4096,
            ..blank(ProjectorKind::Gemma3)
        }
    }

    // llama.cpp b11312's clip on the CPU (tests/fixtures/llamacpp-mmproj/
    // gemma-3-4b-mmproj-shape.json): 121.25 MiB with flash attention, 1132.00 without, to
    // the byte (mtmd_get_memory_usage less the weights).
    #[test]
    fn gemma3_siglip_buffers_are_clips() {
        let t = siglip_896();
        let buffers = [true, false].map(|fa| clip_compute_buffer(&t, fa, BufferRules::CPU));
        assert_eq!(buffers, [Some(127_139_840), Some(1_186_988_032)]);
        let other = VisionTower {
            kind: ProjectorKind::Other("pixtral".into()),
            ..t
        };
        assert_eq!(clip_compute_buffer(&other, true, BufferRules::CPU), None);
    }
}
