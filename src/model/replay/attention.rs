//! `build_attn`: Q, K and V written to their caches, then flash attention or the scores,
//! their softmax and the weighted sum of V.

use super::graph::*;

/// One KV cache's graph inputs, and the scores its layers compute without flash attention.
#[derive(Debug, Clone, Copy)]
pub(super) struct CacheInputs {
    pub(super) k_idxs: usize,
    pub(super) v_idxs: usize,
    pub(super) mask: usize,
    pub(super) scores: u64,
}

/// What one layer's attention reads besides Q, K and V.
pub(super) struct AttentionStep {
    pub(super) k_idxs: usize,
    pub(super) v_idxs: usize,
    pub(super) mask: usize,
    /// Bytes of the scores without flash attention.
    pub(super) scores: u64,
    /// Bytes of the attention output.
    pub(super) out: u64,
    /// Bytes of V copied out contiguous before the transposed cache takes it, where V is a view
    /// that is not.
    pub(super) v_copy: Option<u64>,
    pub(super) flash_attention: bool,
}

/// `build_attn` over a K and a V cache: Q, V and K evaluated in that order, K and V written to
/// their caches, then flash attention, or the scores, their softmax and the weighted sum of V
/// made contiguous. Returns the attention output.
pub(super) fn attend(
    g: &mut Graph,
    [q, k, v]: [usize; 3],
    (k_cache, v_cache): (usize, usize),
    a: &AttentionStep,
) -> usize {
    g.expand(q);
    g.expand(v);
    g.expand(k);
    let k_rows = g.view(k, OTHER);
    let stored = g.set_rows(k_cache, k_rows, a.k_idxs);
    g.expand(stored);
    let stored = if a.flash_attention {
        let v_rows = g.view(v, OTHER);
        g.set_rows(v_cache, v_rows, a.v_idxs)
    } else {
        let v_2d = match a.v_copy {
            Some(bytes) => g.op(Kind::Fresh, bytes, OTHER, &[v]),
            None => g.view(v, OTHER),
        };
        let v_elems = g.view(v_2d, OTHER);
        let cache_elems = g.view(v_cache, OTHER);
        g.set_rows(cache_elems, v_elems, a.v_idxs)
    };
    g.expand(stored);
    let k_all = g.view(k_cache, OTHER);
    let v_all = g.view(v_cache, OTHER);
    let q4 = g.view(q, OTHER);
    let qp = g.view(q4, OTHER);
    let kp = g.view(k_all, OTHER);
    let vp = g.view(v_all, OTHER);
    if a.flash_attention {
        let o = g.op(Kind::Fresh, a.out, OTHER, &[qp, kp, vp, a.mask]);
        g.view(o, QUERY)
    } else {
        let kq = g.op(Kind::Fresh, a.scores, SCORES, &[kp, qp]);
        let kq = g.op(Kind::InPlace, a.scores, SCORES, &[kq, a.mask]);
        let kqv = g.op(Kind::Fresh, a.out, OTHER, &[vp, kq]);
        let permuted = g.view(kqv, OTHER);
        g.op(Kind::Fresh, a.out, QUERY, &[permuted])
    }
}
