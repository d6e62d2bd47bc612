//! Gemma 4's image graph (`clip_graph_gemma4v` in `tools/mtmd/models/gemma4v.cpp`) at clip's
//! warm-up image of 16 × 16 pooled tokens: the pixels rescaled in place, the patch convolution,
//! the x and y position rows added, `build_vit`'s RMS-normed layers (q and k normed per head
//! and rotated twice in place, V RMS-normed, norms after attention and after the gated MLP, a
//! scalar a layer), then the average pool, a scale, an RMS norm and the input projection. Every
//! product is Gemma4ClippableLinear's: its input and output clamped (in place where ggml can).

use super::clip_vit::*;
use super::graph::*;
use crate::model::VisionTower;

pub(super) fn gemma4v(t: &VisionTower, fa: bool) -> Option<Graph> {
    let (z, mut g, raw) = image_graph(t)?;
    // `ggml_scale_bias` may overwrite the image it reads: an input's own layout.
    let scaled = g.op(Kind::InPlace, g.tensors[raw].bytes, INPUT_LAYOUT, &[raw]);
    g.tag(scaled, Op::Scale);
    // No bias on the patches.
    let conv = conv_2d(&mut g, t, &z, scaled, "v.patch_embd.weight")?;
    let mut cur = patch_rows(&mut g, &z, conv);
    // The patches' x and y (i32), each looking up its own table's rows.
    let pos = [
        g.input(z.patches.checked_mul(4)?),
        g.input(z.patches.checked_mul(4)?),
    ];
    for ids in pos {
        let table = g.table("v.position_embd.weight", t.positions, t.hidden);
        let rows = g.view(table, OTHER);
        let emb = g.op(Kind::Fresh, z.model, MODEL, &[rows, ids]);
        g.tag(emb, Op::GetRows);
        cur = add(&mut g, &z, cur, emb);
    }
    let mut inp = g.view(cur, MODEL);
    for l in 0..t.layers {
        g.part = Part::Layer(l);
        inp = layer(&mut g, t, &z, inp, (pos, fa));
    }
    g.part = Part::Output;
    pool_and_project(&mut g, t, &z, inp);
    Some(g)
}

/// Gemma4ClippableLinear: `x` clamped, the product with `w` (`h` to `n` values a row of
/// `rows`), the output clamped; each clamp in place where its parent allows.
fn clipped(
    g: &mut Graph,
    x: usize,
    w: &'static str,
    (rows, h, n): (u64, u64, u64),
    layout: (u64, u64),
) -> usize {
    let in_bytes = h.saturating_mul(rows).saturating_mul(4);
    let bytes = n.saturating_mul(rows).saturating_mul(4);
    let clamped = g.op(Kind::InPlace, in_bytes, layout.0, &[x]);
    g.tag(clamped, Op::Clamp);
    let w = g.matrix(w, h, n);
    let out = g.op(Kind::Fresh, bytes, layout.1, &[w, clamped]);
    let out = g.op(Kind::InPlace, bytes, layout.1, &[out]);
    g.tag(out, Op::Clamp)
}

/// One of `build_vit`'s layers as Gemma 4 has it.
fn layer(
    g: &mut Graph,
    t: &VisionTower,
    z: &Sizes,
    inp: usize,
    (pos, fa): ([usize; 2], bool),
) -> usize {
    let h = t.hidden;
    let d = h / t.heads.max(1);
    let square = (z.patches, h, h);
    let cur = rms(g, inp, z.model, (Some("ln1.weight"), h));
    let mut qk = [0; 2];
    for (i, (w, norm)) in [
        ("attn_q.weight", "attn_q_norm.weight"),
        ("attn_k.weight", "attn_k_norm.weight"),
    ]
    .into_iter()
    .enumerate()
    {
        let x = clipped(g, cur, w, square, (MODEL, MODEL));
        let heads = g.view(x, Q3);
        let normed = rms(g, heads, z.model, (Some(norm), d));
        let mut r = normed;
        for p in pos {
            r = g.op(Kind::InPlace, z.model, MODEL, &[r, p]);
            g.tag(r, Op::Rope);
        }
        qk[i] = r;
    }
    let v = clipped(g, cur, "attn_v.weight", square, (MODEL, MODEL));
    let v = g.view(v, OTHER);
    let v = rms(g, v, z.model, (None, d));
    let attn = attend(g, z, [qk[0], qk[1], v], None, fa);
    let out = clipped(g, attn, "attn_out.weight", square, (MODEL, MODEL));
    let out = rms(g, out, z.model, (Some("attn_post_norm.weight"), h));
    let sum = add(g, z, out, inp);
    let cur = rms(g, sum, z.model, (Some("ln2.weight"), h));
    let wide = (z.patches, h, t.ffn);
    let gate = clipped(g, cur, "ffn_gate.weight", wide, (MODEL, FFN));
    let up = clipped(g, cur, "ffn_up.weight", wide, (MODEL, FFN));
    let act = g.op(Kind::Fresh, z.ffn, FFN, &[gate, up]);
    g.tag(act, Op::Glu);
    let down = clipped(
        g,
        act,
        "ffn_down.weight",
        (z.patches, t.ffn, h),
        (FFN, MODEL),
    );
    let down = rms(g, down, z.model, (Some("ffn_post_norm.weight"), h));
    let out = add(g, z, sum, down);
    let scale = g.vector("out_scale.weight", 1);
    g.op(Kind::InPlace, z.model, MODEL, &[out, scale])
}

/// Gemma4VisionPooler and the embedder: the patches as an image (a transposed contiguous
/// copy), average-pooled `merge` × `merge`, one row a token again (transposed, contiguous),
/// scaled and RMS-normed in place, then the clipped input projection.
fn pool_and_project(g: &mut Graph, t: &VisionTower, z: &Sizes, cur: usize) {
    let merged = t.merge.saturating_mul(t.merge).max(1);
    let tokens = z.patches / merged;
    let pooled_bytes = tokens.saturating_mul(t.hidden).saturating_mul(4);
    let cur = avg_pool(g, z, cur, pooled_bytes);
    let scaled = g.op(Kind::InPlace, pooled_bytes, LATENT, &[cur]);
    g.tag(scaled, Op::Scale);
    let normed = g.op(Kind::InPlace, pooled_bytes, LATENT, &[scaled]);
    g.tag(normed, Op::RmsNorm);
    let shape = (tokens, t.hidden, t.projection_dim);
    let out = clipped(
        g,
        normed,
        "mm.input_projection.weight",
        shape,
        (LATENT, OTHER),
    );
    g.expand(out);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::model::ProjectorKind;

    /// Gemma 4's tower as transformers' Gemma4VisionConfig defaults it: 768 wide, 16 layers of
    /// 12 heads, pooled 3 × 3, at clip's 768 px warm-up image (48 × 48 patches of 16).
    fn gemma4v_default() -> VisionTower {
        VisionTower {
            image_size: 768,
            patch_size: 16,
            hidden: 768,
            ffn: 3072,
            layers: 16,
            heads: 12,
            projection_dim: 2304,
            merge: 3,
            positions: 10240,
            ..blank(ProjectorKind::Gemma4V)
        }
    }

    // llama.cpp b11312's clip on the CPU (tests/fixtures/llamacpp-mmproj/
    // gemma-4-vision-mmproj-shape.json): 101.27 MiB with flash attention, 276.77 without, to
    // the byte (mtmd_get_memory_usage less the weights).
    #[test]
    fn gemma4v_buffers_are_clips() {
        let buffers = cpu_buffers(gemma4v, &gemma4v_default());
        assert_eq!(buffers, [Some(106_186_752), Some(290_211_840)]);
    }
}
