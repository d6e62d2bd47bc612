//! Graph nodes with ggml's shapes, for the builders whose in-place reuse depends on them
//! (DeepSeek-V4's and GLM-5-next's): every tensor's layout is its element type and
//! dimensions, which is what ggml's allocator compares before it reuses a source's memory.

use super::graph::*;

/// `(type size, ne0, ne1, ne2)`: a tensor's shape as ggml's in-place check compares it.
pub(super) type Ne = (u64, u64, u64, u64);

pub(super) const F32: u64 = 4;
pub(super) const F16: u64 = 2;
pub(super) const I32: u64 = 4;

fn layout_of((size, a, b, c): Ne) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (size, a, b, c).hash(&mut h);
    // Clear of the small layout tags the other builders use.
    h.finish() | (1 << 63)
}

/// An op of `kind` and `op` with output shape `ne` over `srcs`.
pub(super) fn node(g: &mut Graph, (kind, op): (Kind, Op), ne: Ne, srcs: &[usize]) -> usize {
    let bytes =
        ne.0.saturating_mul(ne.1)
            .saturating_mul(ne.2)
            .saturating_mul(ne.3);
    let t = g.op(kind, bytes, layout_of(ne), srcs);
    g.tag(t, op)
}

/// A view, reshape or permutation of `src` (no memory of its own).
pub(super) fn view(g: &mut Graph, src: usize) -> usize {
    let v = g.view(src, OTHER);
    g.tag(v, Op::Reshape)
}

/// A leaf the allocator places (an input, or a tensor ggml fills in the graph), of shape `ne`:
/// ggml may compute its sole consumer in its memory.
pub(super) fn leaf(g: &mut Graph, ne: Ne) -> usize {
    let bytes =
        ne.0.saturating_mul(ne.1)
            .saturating_mul(ne.2)
            .saturating_mul(ne.3);
    let t = g.input(bytes);
    g.tensors[t].layout = layout_of(ne);
    t
}

pub(super) const FRESH: Kind = Kind::Fresh;
pub(super) const INPLACE: Kind = Kind::InPlace;

/// RMS norm over `x` of shape `ne`, then its weight `name` (of `n` values).
pub(super) fn rms(g: &mut Graph, x: usize, ne: Ne, (name, n): (&'static str, u64)) -> usize {
    let t = node(g, (INPLACE, Op::RmsNorm), ne, &[x]);
    let w = g.vector(name, n);
    node(g, (INPLACE, Op::Mul), ne, &[t, w])
}
