//! Qwen3-VL's image graph (`clip_graph_qwen3vl` in `tools/mtmd/models/qwen3vl.cpp`, Qwen3.5's
//! tower too) at clip's warm-up image: the patch kernels of the temporal pair added and biased,
//! the learned positions interpolated to the image and regrouped as the patches are, LayerNormed
//! layers of a fused qkv with M-RoPE over every patch, a biased GELU MLP; then the merger, and
//! after it each deepstack merger over its layer's output, kept until then, all concatenated.

use super::clip_qwen::{merger_mlp, mrope, patch_embeddings, regroup, MERGER};
use super::clip_vit::*;
use super::graph::*;
use crate::model::VisionTower;

pub(super) fn qwen3vl(t: &VisionTower, fa: bool) -> Option<Graph> {
    let (z, mut g, raw) = image_graph(t)?;
    let cur = patch_embeddings(&mut g, t, &z, raw)?;
    let bias = g.vector("v.patch_embd.bias", t.hidden);
    let cur = add(&mut g, &z, cur, bias);
    let pos = learned_positions(&mut g, t, &z)?;
    let mut inp = add(&mut g, &z, cur, pos);
    // M-RoPE's four positions a patch (i32).
    let positions = g.input(z.patches.checked_mul(16)?);
    let mut features = Vec::new();
    for l in 0..t.layers {
        g.part = Part::Layer(l);
        inp = layer(&mut g, t, &z, inp, (positions, fa));
        if t.deepstack.contains(&l) {
            features.push(inp);
        }
    }
    g.part = Part::Output;
    let normed = layer_norm(
        &mut g,
        inp,
        (z.model, t.hidden),
        ("v.post_ln.weight", "v.post_ln.bias"),
    );
    let mut out = merger(&mut g, t, &z, normed, Merger::Main);
    // Each deepstack merger is reached only from the concatenation at the end: ggml orders it
    // there, so its layer's output stays allocated until then.
    let mut stacked: Option<usize> = None;
    for x in features {
        let feat = merger(&mut g, t, &z, x, Merger::Deepstack);
        stacked = Some(match stacked {
            None => feat,
            Some(s) => concat(&mut g, s, feat),
        });
    }
    if let Some(s) = stacked {
        out = concat(&mut g, out, s);
    }
    g.expand(out);
    Some(g)
}

/// `resize_position_embeddings` (bilinear, corners aligned) where the table's side differs from
/// the image's patches a side (the table viewed as an image, interpolated, made contiguous as
/// one row a patch), then regrouped 2 × 2 as the patches are (two more contiguous copies).
fn learned_positions(g: &mut Graph, t: &VisionTower, z: &Sizes) -> Option<usize> {
    let table = g.matrix("v.position_embd.weight", t.positions, t.hidden);
    let side = t.image_size / t.patch_size;
    let mut pos = table;
    if t.positions != side.checked_mul(side)? {
        let image = g.view(table, OTHER);
        let permuted = g.view(image, OTHER);
        let scaled = g.op(Kind::Fresh, z.model, OTHER, &[permuted]);
        g.tag(scaled, Op::Other);
        let back = g.view(scaled, OTHER);
        pos = g.op(Kind::Fresh, z.model, OTHER, &[back]);
        g.tag(pos, Op::Cont);
    }
    Some(regroup(g, z, pos))
}

/// One layer: a LayerNorm, the fused biased qkv viewed as q, k and v, M-RoPE on q and k (fresh
/// tensors: their parents are views), attention over every patch, its biased output, the
/// residual, a LayerNorm, the biased GELU MLP, the residual.
fn layer(
    g: &mut Graph,
    t: &VisionTower,
    z: &Sizes,
    inp: usize,
    (positions, fa): (usize, bool),
) -> usize {
    let h = t.hidden;
    let cur = layer_norm(g, inp, (z.model, h), ("ln1.weight", "ln1.bias"));
    let qkv = projection(
        g,
        cur,
        ("attn_qkv.weight", "attn_qkv.bias"),
        (z.patches, h, h.saturating_mul(3)),
        OTHER,
    );
    let [q, k, v] = [g.view(qkv, Q3), g.view(qkv, K3), g.view(qkv, OTHER)];
    let [q, k] = mrope(g, z, [q, k], positions);
    let attn = attend(g, z, [q, k, v], None, fa);
    let sum = attn_out(g, t, z, attn, inp);
    let cur = layer_norm(g, sum, (z.model, h), ("ln2.weight", "ln2.bias"));
    let up = projection(
        g,
        cur,
        ("ffn_up.weight", "ffn_up.bias"),
        (z.patches, h, t.ffn),
        FFN,
    );
    gelu_down(g, t, z, up, sum)
}

/// Which merger: the main one (after the post-layernorm, over 4 patches a row) or a deepstack
/// one (its own LayerNorm over the merged row first).
#[derive(Clone, Copy)]
enum Merger {
    Main,
    Deepstack,
}

/// Four patches a row through a biased layer, a GELU in place, a biased layer to the text
/// model's width.
fn merger(g: &mut Graph, t: &VisionTower, z: &Sizes, x: usize, which: Merger) -> usize {
    let mut rows = g.view(x, LATENT);
    let names = match which {
        Merger::Main => MERGER,
        Merger::Deepstack => {
            let wide = t
                .hidden
                .saturating_mul(t.merge.saturating_mul(t.merge).max(1));
            let norm = ("v.deepstack.norm.weight", "v.deepstack.norm.bias");
            rows = layer_norm(g, rows, (z.model, wide), norm);
            [
                ("v.deepstack.fc1.weight", "v.deepstack.fc1.bias"),
                ("v.deepstack.fc2.weight", "v.deepstack.fc2.bias"),
            ]
        }
    };
    merger_mlp(g, t, z, rows, names)
}

/// `ggml_concat` along the rows' values: a fresh tensor of both.
fn concat(g: &mut Graph, a: usize, b: usize) -> usize {
    let bytes = g.tensors[a].bytes.saturating_add(g.tensors[b].bytes);
    let t = g.op(Kind::Fresh, bytes, OTHER, &[a, b]);
    g.tag(t, Op::Other)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::model::ProjectorKind;

    /// Qwen3-VL's tower as transformers' Qwen3VLVisionConfig defaults it: 1152 wide, 27 layers
    /// of 16 heads, 48 × 48 learned positions, deepstack mergers after layers 8, 16 and 24, at
    /// clip's 1472 px warm-up image (92 × 92 patches of 16).
    fn qwen3vl() -> VisionTower {
        VisionTower {
            image_size: 1472,
            patch_size: 16,
            hidden: 1152,
            ffn: 4304,
            layers: 27,
            heads: 16,
            projection_dim: 3584,
            merge: 2,
            positions: 2304,
            deepstack: vec![8, 16, 24],
            ..blank(ProjectorKind::Qwen3Vl)
        }
    }

    // llama.cpp b11312's clip on the CPU (tests/fixtures/llamacpp-mmproj/
    // qwen3-vl-mmproj-shape.json): 359.68 MiB with flash attention, 4,769.39 without, to the
    // byte (mtmd_get_memory_usage less the weights).
    #[test]
    fn qwen3vl_buffers_are_clips() {
        let buffers = cpu_buffers(super::qwen3vl, &qwen3vl());
        assert_eq!(buffers, [Some(377_155_840), Some(5_001_072_896)]);
    }
}
