//! A projector's image graph: llama.cpp's clip (`tools/mtmd`) reserves its compute buffer for
//! one image of the tower's own size at warm-up (`clip_image_batch` of `warmup_image_size`),
//! through the same graph allocator as the text graph. Gemma 3's graph (`clip_graph_siglip`):
//! the patch convolution (`ggml_conv_2d`: an im2col, then a product), the learned positions,
//! `build_vit`'s pre-norm layers over every patch at once with no mask, the post-layernorm,
//! then the patches average-pooled, RMS-normed and projected to the text model's width.

use super::graph::*;
use crate::model::{ProjectorKind, VisionTower};

/// Bytes of the tensors the tower's layers make.
struct Sizes {
    /// One f32 row of the tower's width per patch.
    model: u64,
    ffn: u64,
    /// Every head's scores over every patch (f32).
    scores: u64,
    /// K or V in f16, flash attention's copies.
    half: u64,
}

/// The compute buffer clip reserves for `t` in a buffer placed by `rules`, with or without
/// flash attention; `None` for a projector whose graph is not modelled, or shapes no device
/// could hold.
pub(crate) fn clip_compute_buffer(
    t: &VisionTower,
    flash_attention: bool,
    rules: BufferRules,
) -> Option<u64> {
    match t.kind {
        ProjectorKind::Gemma3 => Some(super::gallocr::reserve(&gemma3(t, flash_attention)?, rules)),
        ProjectorKind::Qwen2Vl | ProjectorKind::Qwen25Vl => Some(super::gallocr::reserve(
            &super::clip_qwen::qwen25vl(t, flash_attention)?,
            rules,
        )),
        ProjectorKind::Qwen3Vl => Some(super::gallocr::reserve(
            &super::clip_qwen3::qwen3vl(t, flash_attention)?,
            rules,
        )),
        ProjectorKind::Gemma4V => Some(super::gallocr::reserve(
            &super::clip_gemma4::gemma4v(t, flash_attention)?,
            rules,
        )),
        ProjectorKind::Other(_) => None,
    }
}

fn gemma3(t: &VisionTower, fa: bool) -> Option<Graph> {
    let side = t.image_size / t.patch_size;
    let patches = side.checked_mul(side)?;
    let width = |n: u64| n.checked_mul(patches)?.checked_mul(4);
    let z = Sizes {
        model: width(t.hidden)?,
        ffn: width(t.ffn)?,
        scores: width(patches.checked_mul(t.heads)?)?,
        half: width(t.hidden)? / 2,
    };
    if [z.model, z.ffn, z.scores].iter().any(|&b| b > MOST) {
        return None;
    }
    let mut g = Graph {
        rows: patches,
        ..Graph::default()
    };
    let mut cur = patch_embeddings(&mut g, t, &z, patches)?;
    let pos = g.matrix("v.position_embd.weight", patches, t.hidden);
    cur = g.op(Kind::InPlace, z.model, MODEL, &[cur, pos]);
    g.tag(cur, Op::Add);
    cur = g.view(cur, MODEL);
    for l in 0..t.layers {
        g.part = Part::Layer(l);
        cur = layer(&mut g, t, &z, cur, fa);
    }
    g.part = Part::Output;
    cur = layer_norm(
        &mut g,
        cur,
        z.model,
        t.hidden,
        ("v.post_ln.weight", "v.post_ln.bias"),
    );
    let cur = g.view(cur, MODEL);
    pool_and_project(&mut g, t, &z, cur);
    Some(g)
}

/// `build_inp`: the image, its patches unrolled (`im2col`, f16 unless the kernel is bf16), the
/// product with the kernel, made contiguous twice over (conv_2d's permute, then the
/// transpose to one row a patch), and the patch bias.
fn patch_embeddings(g: &mut Graph, t: &VisionTower, z: &Sizes, patches: u64) -> Option<usize> {
    let pixels = t.image_size.checked_mul(t.image_size)?;
    let raw = g.input(pixels.checked_mul(3 * 4)?);
    let kernel_elems = t.patch_size.checked_mul(t.patch_size)?.checked_mul(3)?;
    let kernel = g.matrix("v.patch_embd.weight", kernel_elems, t.hidden);
    let elem = if t.patch_bf16 { 4 } else { 2 };
    let unrolled = kernel_elems.checked_mul(patches)?.checked_mul(elem)?;
    let im2col = g.op(Kind::Fresh, unrolled, OTHER, &[kernel, raw]);
    g.tag(im2col, Op::Other);
    let rows = g.view(im2col, OTHER);
    let kernel_2d = g.view(kernel, OTHER);
    let product = g.op(Kind::Fresh, z.model, OTHER, &[rows, kernel_2d]);
    g.tag(product, Op::MulMat);
    let shaped = g.view(product, OTHER);
    let permuted = g.view(shaped, OTHER);
    let conv = g.op(Kind::Fresh, z.model, OTHER, &[permuted]);
    g.tag(conv, Op::Cont);
    let flat = g.view(conv, OTHER);
    let transposed = g.view(flat, OTHER);
    let cur = g.op(Kind::Fresh, z.model, MODEL, &[transposed]);
    g.tag(cur, Op::Cont);
    let bias = g.vector("v.patch_embd.bias", t.hidden);
    let cur = g.op(Kind::InPlace, z.model, MODEL, &[cur, bias]);
    Some(g.tag(cur, Op::Add))
}

/// `build_norm` with `NORM_TYPE_NORMAL`: `ggml_norm` (never in place), its weight and bias.
fn layer_norm(
    g: &mut Graph,
    x: usize,
    bytes: u64,
    n: u64,
    (weight, bias): (&'static str, &'static str),
) -> usize {
    let t = g.op(Kind::Fresh, bytes, MODEL, &[x]);
    g.tag(t, Op::Norm);
    let w = g.vector(weight, n);
    let t = g.op(Kind::InPlace, bytes, MODEL, &[t, w]);
    let b = g.vector(bias, n);
    g.op(Kind::InPlace, bytes, MODEL, &[t, b])
}

/// A biased projection of `x` to `n` values a patch.
fn projection(
    g: &mut Graph,
    x: usize,
    (w, b): (&'static str, &'static str),
    h: u64,
    n: u64,
) -> usize {
    let bytes = n.saturating_mul(g.rows).saturating_mul(4);
    let layout = if n == h { MODEL } else { FFN };
    let w = g.matrix(w, h, n);
    let t = g.op(Kind::Fresh, bytes, layout, &[w, x]);
    let b = g.vector(b, n);
    g.op(Kind::InPlace, bytes, layout, &[t, b])
}

/// One of `build_vit`'s layers: norm, attention over every patch, residual, norm, a biased
/// GELU MLP, residual.
fn layer(g: &mut Graph, t: &VisionTower, z: &Sizes, inp: usize, fa: bool) -> usize {
    let h = t.hidden;
    let cur = layer_norm(g, inp, z.model, h, ("ln1.weight", "ln1.bias"));
    let q = projection(g, cur, ("attn_q.weight", "attn_q.bias"), h, h);
    let k = projection(g, cur, ("attn_k.weight", "attn_k.bias"), h, h);
    let v = projection(g, cur, ("attn_v.weight", "attn_v.bias"), h, h);
    let [q, k, v] = [g.view(q, Q3), g.view(k, K3), g.view(v, OTHER)];
    let attn = attend(g, z, [q, k, v], fa);
    let out = projection(g, attn, ("attn_out.weight", "attn_out.bias"), h, h);
    let sum = g.op(Kind::InPlace, z.model, MODEL, &[out, inp]);
    g.tag(sum, Op::Add);
    let cur = layer_norm(g, sum, z.model, h, ("ln2.weight", "ln2.bias"));
    let up = projection(g, cur, ("ffn_up.weight", "ffn_up.bias"), h, t.ffn);
    let act = g.op(Kind::InPlace, z.ffn, FFN, &[up]);
    g.tag(act, Op::Unary);
    let wd = g.matrix("ffn_down.weight", t.ffn, h);
    let down = g.op(Kind::Fresh, z.model, MODEL, &[wd, act]);
    let b = g.vector("ffn_down.bias", h);
    let down = g.op(Kind::InPlace, z.model, MODEL, &[down, b]);
    let out = g.op(Kind::InPlace, z.model, MODEL, &[sum, down]);
    g.tag(out, Op::Add)
}

/// clip's `build_attn` without a mask: flash attention over f16 copies of K and V, or the
/// scores, their softmax in place, and V made contiguous for the product.
fn attend(g: &mut Graph, z: &Sizes, [q, k, v]: [usize; 3], fa: bool) -> usize {
    g.expand(q);
    g.expand(k);
    g.expand(v);
    let qp = g.view(q, OTHER);
    let kp = g.view(k, OTHER);
    if fa {
        let vp = g.view(v, OTHER);
        let k16 = g.op(Kind::Fresh, z.half, OTHER, &[kp]);
        g.tag(k16, Op::Cpy);
        let v16 = g.op(Kind::Fresh, z.half, OTHER, &[vp]);
        g.tag(v16, Op::Cpy);
        let o = g.op(Kind::Fresh, z.model, OTHER, &[qp, k16, v16]);
        g.view(o, MODEL)
    } else {
        let vp = g.view(v, OTHER);
        let v_cont = g.op(Kind::Fresh, z.model, OTHER, &[vp]);
        g.tag(v_cont, Op::Cont);
        let kq = g.op(Kind::Fresh, z.scores, SCORES, &[kp, qp]);
        g.tag(kq, Op::MulMat);
        let kq = g.op(Kind::InPlace, z.scores, SCORES, &[kq]);
        g.tag(kq, Op::SoftMax);
        let kqv = g.op(Kind::Fresh, z.model, OTHER, &[v_cont, kq]);
        g.tag(kqv, Op::MulMat);
        let permuted = g.view(kqv, OTHER);
        let cont = g.op(Kind::Fresh, z.model, MODEL, &[permuted]);
        g.tag(cont, Op::Cont)
    }
}

/// Gemma 3's projector: the patches as an image again (transposed, made contiguous), an
/// average pool of `merge` × `merge`, back to one row a token (transposed, contiguous), an RMS
/// norm and its weight in place, then the product with a contiguous copy of the transposed
/// input projection (the copy is the graph's, made for every image).
fn pool_and_project(g: &mut Graph, t: &VisionTower, z: &Sizes, cur: usize) -> usize {
    let transposed = g.view(cur, OTHER);
    let image = g.op(Kind::Fresh, z.model, OTHER, &[transposed]);
    g.tag(image, Op::Cont);
    let side = t.image_size / t.patch_size / t.merge.max(1);
    let tokens = side.saturating_mul(side);
    let pooled_bytes = tokens.saturating_mul(t.hidden).saturating_mul(4);
    let pooled = g.op(Kind::Fresh, pooled_bytes, OTHER, &[image]);
    g.tag(pooled, Op::Other);
    let flat = g.view(pooled, OTHER);
    let rows = g.view(flat, OTHER);
    let cur = g.op(Kind::Fresh, pooled_bytes, LATENT, &[rows]);
    g.tag(cur, Op::Cont);
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
            kind: ProjectorKind::Gemma3,
            image_size: 896,
            patch_size: 14,
            hidden: 1152,
            ffn: 4304,
            layers: 27,
            heads: 16,
            projection_dim: 2560,
            merge: 4,
            window_pattern: 0,
            positions: 4096,
            deepstack: Vec::new(),
            patch_bf16: false,
            input_projection_elem_bytes: 2,
        }
    }

    // llama.cpp b11312's clip on the CPU (tests/fixtures/llamacpp-mmproj/
    // gemma-3-4b-mmproj-shape.json): 121.25 MiB with flash attention, 1132.00 without, to
    // the byte (mtmd_get_memory_usage less the weights).
    #[test]
    fn gemma3_siglip_buffers_are_clips() {
        let t = siglip_896();
        assert_eq!(
            clip_compute_buffer(&t, true, BufferRules::CPU),
            Some(127_139_840)
        );
        assert_eq!(
            clip_compute_buffer(&t, false, BufferRules::CPU),
            Some(1_186_988_032)
        );
        let other = VisionTower {
            kind: ProjectorKind::Other("pixtral".into()),
            ..t
        };
        assert_eq!(clip_compute_buffer(&other, true, BufferRules::CPU), None);
    }
}
