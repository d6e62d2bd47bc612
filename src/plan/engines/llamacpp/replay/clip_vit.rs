//! What clip's image towers (`tools/mtmd`: Gemma 3's and 4's, Qwen2-, 2.5- and 3-VL's) build
//! alike, so that each tower's file holds only its own graph: the sizes at the warm-up image,
//! `ggml_conv_2d` over the patches, the norms and biased projections of `build_norm` and
//! `build_mm`, clip's `build_attn` and the residual around its output, the GELU MLP's tail and
//! the average pool of the Gemma towers.

use super::graph::*;
use crate::model::VisionTower;

/// Bytes of the tensors the tower's layers make.
pub(super) struct Sizes {
    pub(super) patches: u64,
    /// One f32 row of the tower's width per patch.
    pub(super) model: u64,
    pub(super) ffn: u64,
    /// Every head's scores over every patch (f32).
    pub(super) scores: u64,
    /// A mask over every pair of patches, f32.
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

/// The start of every tower's graph: its sizes, a graph over its patches, and the warm-up
/// image it reads (f32 RGB); `None` for shapes no device could hold.
pub(super) fn image_graph(t: &VisionTower) -> Option<(Sizes, Graph, usize)> {
    let z = Sizes::of(t)?;
    let mut g = Graph {
        rows: z.patches,
        ..Graph::default()
    };
    let pixels = t.image_size.checked_mul(t.image_size)?;
    let raw = g.input(pixels.checked_mul(3 * 4)?);
    Some((z, g, raw))
}

/// `ggml_conv_2d` of `image` with the patch kernel `kernel`: the image's patches unrolled
/// (`im2col`, f16 unless the kernel is bf16), the product with the kernel, made contiguous.
pub(super) fn conv_2d(
    g: &mut Graph,
    t: &VisionTower,
    z: &Sizes,
    image: usize,
    kernel: &'static str,
) -> Option<usize> {
    let kernel_elems = t.patch_size.checked_mul(t.patch_size)?.checked_mul(3)?;
    let elem = if t.patch_bf16 { 4 } else { 2 };
    let unrolled = kernel_elems.checked_mul(z.patches)?.checked_mul(elem)?;
    let kernel = g.matrix(kernel, kernel_elems, t.hidden);
    let im2col = g.op(Kind::Fresh, unrolled, OTHER, &[kernel, image]);
    g.tag(im2col, Op::Other);
    let rows = g.view(im2col, OTHER);
    let kernel_2d = g.view(kernel, OTHER);
    let product = g.op(Kind::Fresh, z.model, OTHER, &[rows, kernel_2d]);
    g.tag(product, Op::MulMat);
    let shaped = g.view(product, OTHER);
    let permuted = g.view(shaped, OTHER);
    let conv = g.op(Kind::Fresh, z.model, OTHER, &[permuted]);
    Some(g.tag(conv, Op::Cont))
}

/// The convolution's output as one row a patch: flattened, transposed, made contiguous.
pub(super) fn patch_rows(g: &mut Graph, z: &Sizes, conv: usize) -> usize {
    let flat = g.view(conv, OTHER);
    let transposed = g.view(flat, OTHER);
    let out = g.op(Kind::Fresh, z.model, MODEL, &[transposed]);
    g.tag(out, Op::Cont)
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

/// `build_norm` with `NORM_TYPE_RMS`: the norm (in place where it may), then its weight of `n`
/// values, where it has one.
pub(super) fn rms(
    g: &mut Graph,
    x: usize,
    bytes: u64,
    (weight, n): (Option<&'static str>, u64),
) -> usize {
    let mut t = g.op(Kind::InPlace, bytes, MODEL, &[x]);
    g.tag(t, Op::RmsNorm);
    if let Some(weight) = weight {
        let w = g.vector(weight, n);
        t = g.op(Kind::InPlace, bytes, MODEL, &[t, w]);
    }
    t
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

/// clip's `build_attn`: q, k and v ordered into the graph first; flash attention over f16
/// copies of K and V (and of the mask, again, where a layer has one), or the scores with V
/// made contiguous, the softmax in place, their product made contiguous.
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
    let vp = g.view(v, OTHER);
    if fa {
        let k16 = g.cast(kp, z.model / 2);
        let v16 = g.cast(vp, z.model / 2);
        let mut srcs = vec![qp, k16, v16];
        srcs.extend(mask.map(|m| g.cast(m, z.mask / 2)));
        let o = g.op(Kind::Fresh, z.model, OTHER, &srcs);
        g.tag(o, Op::Other);
        g.view(o, MODEL)
    } else {
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

/// `a + b` over one row of the tower's width a patch, in place: a residual.
pub(super) fn add(g: &mut Graph, z: &Sizes, a: usize, b: usize) -> usize {
    let sum = g.op(Kind::InPlace, z.model, MODEL, &[a, b]);
    g.tag(sum, Op::Add)
}

/// Attention's biased output projection `attn_out`, added to the layer's input `inp`.
pub(super) fn attn_out(
    g: &mut Graph,
    t: &VisionTower,
    z: &Sizes,
    attn: usize,
    inp: usize,
) -> usize {
    let shape = (z.patches, t.hidden, t.hidden);
    let out = projection(g, attn, ("attn_out.weight", "attn_out.bias"), shape, MODEL);
    add(g, z, out, inp)
}

/// The MLP's tail from its up projection `up`: a GELU in place, the biased `ffn_down`, the
/// residual with `sum`.
pub(super) fn gelu_down(g: &mut Graph, t: &VisionTower, z: &Sizes, up: usize, sum: usize) -> usize {
    let act = g.op(Kind::InPlace, z.ffn, FFN, &[up]);
    g.tag(act, Op::Unary);
    down(g, t, z, act, sum)
}

/// The biased `ffn_down` of the activation `act`, then the residual with `sum`.
pub(super) fn down(g: &mut Graph, t: &VisionTower, z: &Sizes, act: usize, sum: usize) -> usize {
    let names = ("ffn_down.weight", "ffn_down.bias");
    let down = projection(g, act, names, (z.patches, t.ffn, t.hidden), MODEL);
    add(g, z, sum, down)
}

/// The Gemma towers' average pool: the patches as an image again (transposed, made
/// contiguous), pooled to `pooled_bytes` (f32), then one row a token (transposed, contiguous).
pub(super) fn avg_pool(g: &mut Graph, z: &Sizes, cur: usize, pooled_bytes: u64) -> usize {
    let transposed = g.view(cur, OTHER);
    let image = g.op(Kind::Fresh, z.model, OTHER, &[transposed]);
    g.tag(image, Op::Cont);
    let pooled = g.op(Kind::Fresh, pooled_bytes, OTHER, &[image]);
    g.tag(pooled, Op::Other);
    let flat = g.view(pooled, OTHER);
    let rows = g.view(flat, OTHER);
    let cur = g.op(Kind::Fresh, pooled_bytes, LATENT, &[rows]);
    g.tag(cur, Op::Cont)
}

/// A tower of `kind` with every size 0, no windows, positions or deepstack, and an f16 input
/// projection: what a test fills in.
#[cfg(test)]
pub(super) fn blank(kind: crate::model::ProjectorKind) -> VisionTower {
    VisionTower {
        kind,
        image_size: 0,
        patch_size: 0,
        hidden: 0,
        ffn: 0,
        layers: 0,
        heads: 0,
        projection_dim: 0,
        merge: 0,
        window_pattern: 0,
        positions: 0,
        deepstack: Vec::new(),
        patch_bf16: false,
        input_projection_elem_bytes: 2,
    }
}

/// The compute buffers clip reserves on the CPU for the graph `build` makes of `t`, with and
/// without flash attention.
#[cfg(test)]
pub(super) fn cpu_buffers(
    build: fn(&VisionTower, bool) -> Option<Graph>,
    t: &VisionTower,
) -> [Option<u64>; 2] {
    [true, false].map(|fa| {
        let g = build(t, fa)?;
        Some(super::gallocr::reserve(&g, BufferRules::CPU))
    })
}
