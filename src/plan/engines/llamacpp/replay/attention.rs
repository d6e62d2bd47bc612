//! `build_attn`: Q, K and V written to their caches, then flash attention or the scores,
//! their softmax and the weighted sum of V.

use super::graph::*;
use super::inputs::{CacheInputs, Rotations};

/// The size of the block a quantized cache's K (`k`: heads of `head` values) or V is rotated in:
/// for K the largest power of two from 64 up that divides the head, for V always 64; none
/// for a head that 64 does not divide, or a cache that is not quantized.
pub(super) fn rotation_size(kv_type: &crate::model::Precision, head: u64, k: bool) -> Option<u64> {
    if kv_type.block_elems <= 1 || head == 0 || head % 64 != 0 {
        return None;
    }
    if !k {
        return Some(64);
    }
    let mut n = 64;
    while head % (n * 2) == 0 {
        n *= 2;
    }
    Some(n)
}

/// What a rotated Q, K or V is before it is rotated: its bytes (f32) and whether it is
/// contiguous (a view into a fused projection is copied out first).
#[derive(Debug, Clone, Copy)]
pub(super) struct Unrotated {
    pub(super) bytes: [u64; 3],
    pub(super) contiguous: [bool; 3],
}

/// `llama_mul_mat_hadamard`: `cur` (f32, `bytes`) made contiguous where it is not, reshaped
/// into blocks of the rotation's size, multiplied by it, and reshaped back.
fn rotated(
    g: &mut Graph,
    cur: usize,
    rot: usize,
    (bytes, contiguous): (u64, bool),
    layout: u64,
) -> usize {
    let flat = if contiguous {
        g.view(cur, OTHER)
    } else {
        let c = g.op(Kind::Fresh, bytes, OTHER, &[cur]);
        g.tag(c, Op::Cont)
    };
    let m = g.op(Kind::Fresh, bytes, layout, &[rot, flat]);
    g.tag(m, Op::MulMat);
    g.view(m, layout)
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
    /// Bytes of K and V in f16, where the cache holds another type (CUDA's flash attention
    /// converts them beside its output).
    pub(super) f16_copies: Option<(u64, u64)>,
    /// Its flash attention's head sizes.
    pub(super) heads: FaHeads,
    /// ggml-metal's scratch beside the flash-attention output.
    pub(super) metal: u64,
    /// The layer's cache is one of a sliding-window pair (llama.cpp's `build_attn` over an
    /// iSWA cache evaluates K before V).
    pub(super) paired: bool,
    /// The cache's rotations, and what they rotate.
    pub(super) rotations: Rotations,
    pub(super) unrotated: Unrotated,
}

/// `build_attn` over a K and a V cache: Q, V and K evaluated in that order (Q, K and V over a
/// sliding-window pair of caches), K and V written to their caches, then flash attention, or the scores, their softmax and the weighted sum of V
/// made contiguous. Returns the attention output.
pub(super) fn attend(
    g: &mut Graph,
    [q, k, v]: [usize; 3],
    (k_cache, v_cache): (usize, usize),
    a: &AttentionStep,
) -> usize {
    let at = |i: usize| (a.unrotated.bytes[i], a.unrotated.contiguous[i]);
    let (q, k) = match a.rotations.k {
        Some(rot) => (rotated(g, q, rot, at(0), Q3), rotated(g, k, rot, at(1), K3)),
        None => (q, k),
    };
    let v = match a.rotations.v {
        Some(rot) => rotated(g, v, rot, at(2), OTHER),
        None => v,
    };
    // llama.cpp's `build_attn_mha` expands its output; the rotation back waits for the next
    // node that reads it (after the feed-forward, in a parallel block).
    let out = attend_rotated(g, [q, k, v], (k_cache, v_cache), a);
    g.expand(out);
    match a.rotations.v {
        Some(rot) => rotated(g, out, rot, (a.out, true), QUERY),
        None => out,
    }
}

/// [`attend`] once Q, K and V are rotated.
fn attend_rotated(
    g: &mut Graph,
    [q, k, v]: [usize; 3],
    (k_cache, v_cache): (usize, usize),
    a: &AttentionStep,
) -> usize {
    g.expand(q);
    if a.paired {
        g.expand(k);
    }
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
            Some(bytes) => {
                let c = g.op(Kind::Fresh, bytes, OTHER, &[v]);
                g.tag(c, Op::Cont)
            }
            None => g.view(v, OTHER),
        };
        let v_elems = g.view(v_2d, OTHER);
        let cache_elems = g.view(v_cache, OTHER);
        g.set_rows(cache_elems, v_elems, a.v_idxs)
    };
    g.expand(stored);
    attention_over(g, q, (k_cache, v_cache), a)
}

/// `build_attn` for a layer that reads an earlier layer's caches (Gemma 4's KV-sharing
/// layers): only Q evaluated (and rotated), nothing written, then the attention over the
/// caches as [`attend`]'s.
pub(super) fn attend_cached(
    g: &mut Graph,
    q: usize,
    caches: (usize, usize),
    a: &AttentionStep,
) -> usize {
    let q = match a.rotations.k {
        Some(rot) => rotated(
            g,
            q,
            rot,
            (a.unrotated.bytes[0], a.unrotated.contiguous[0]),
            Q3,
        ),
        None => q,
    };
    g.expand(q);
    let out = attention_over(g, q, caches, a);
    g.expand(out);
    match a.rotations.v {
        Some(rot) => rotated(g, out, rot, (a.out, true), QUERY),
        None => out,
    }
}

/// `build_attn_mha` over a layer's K and V caches: flash attention, or the scores, their
/// softmax and the weighted sum of V made contiguous.
fn attention_over(
    g: &mut Graph,
    q: usize,
    (k_cache, v_cache): (usize, usize),
    a: &AttentionStep,
) -> usize {
    let k_all = g.view(k_cache, OTHER);
    let v_all = g.view(v_cache, OTHER);
    let q4 = g.view(q, OTHER);
    let qp = g.view(q4, OTHER);
    let kp = g.view(k_all, OTHER);
    let vp = g.view(v_all, OTHER);
    if a.flash_attention {
        let o = g.op(Kind::Fresh, a.out, OTHER, &[qp, kp, vp, a.mask]);
        g.tensors[o].fa_f16 = a.f16_copies;
        g.tensors[o].fa_heads = Some(a.heads);
        g.tensors[o].metal_extra = a.metal;
        g.view(o, QUERY)
    } else {
        let kq = g.op(Kind::Fresh, a.scores, SCORES, &[kp, qp]);
        g.tag(kq, Op::MulMat);
        let kq = g.op(Kind::InPlace, a.scores, SCORES, &[kq, a.mask]);
        g.tag(kq, Op::SoftMax);
        let kqv = g.op(Kind::Fresh, a.out, OTHER, &[vp, kq]);
        g.tag(kqv, Op::MulMat);
        let permuted = g.view(kqv, OTHER);
        let merged = g.op(Kind::Fresh, a.out, QUERY, &[permuted]);
        g.tag(merged, Op::Cont)
    }
}

/// The attention half of a layer over `cur`: latent attention (DeepSeek) or grouped-query
/// attention, then its output ([`attention_out`]). Gemma 4's own attention is its builder's.
pub(super) fn attention_block(
    c: &super::Ctx<'_>,
    g: &mut Graph,
    lazy: &mut super::Lazy,
    cur: usize,
    layer: u64,
    inputs: CacheInputs,
) -> Option<usize> {
    let attended = match c.b.mla {
        Some(d) => {
            let attended = latent(c, g, lazy, (cur, layer), d, inputs)?;
            g.expand(attended);
            attended
        }
        None => grouped(c, g, lazy, cur, layer, inputs)?,
    };
    attention_out(c, g, cur, attended)
}

/// The attention's output: Kimi-K3's gate on it, then the output projection and its bias.
pub(super) fn attention_out(
    c: &super::Ctx<'_>,
    g: &mut Graph,
    cur: usize,
    attended: usize,
) -> Option<usize> {
    let h = c.arch.hidden_size;
    let heads_out = match c.b.mla {
        Some(d) => c.arch.num_heads.saturating_mul(d.v),
        None => c.q_dim,
    };
    // Kimi-K3: the attention's output times a sigmoid of a projection of the layer's normed
    // input, before the output projection.
    let attended = match c.b.k3 {
        Some(k) if k.mla_gate => {
            let bytes = c.width(heads_out)?;
            let w = g.matrix("attn_gate.weight", h, heads_out);
            let gate = g.op(Kind::Fresh, bytes, QUERY, &[w, cur]);
            let gate = g.op(Kind::InPlace, bytes, QUERY, &[gate]);
            g.tag(gate, Op::Unary);
            let gated = g.op(Kind::InPlace, bytes, QUERY, &[attended, gate]);
            g.tag(gated, Op::Mul)
        }
        _ => attended,
    };
    let wo = g.matrix("attn_output.weight", heads_out, h);
    let mut out = g.op(Kind::Fresh, c.model, MODEL, &[wo, attended]);
    if c.b.o_bias {
        let b = g.vector("attn_output.bias", h);
        out = g.op(Kind::InPlace, c.model, MODEL, &[out, b]);
    }
    Some(out)
}

/// Grouped-query attention: Q, K and V projected (biased, fused, or with Qwen3-Next's output
/// gate), q/k norms, RoPE as the layer takes it, then `build_attn`.
fn grouped(
    c: &super::Ctx<'_>,
    g: &mut Graph,
    lazy: &mut super::Lazy,
    cur: usize,
    layer: u64,
    inputs: CacheInputs,
) -> Option<usize> {
    let b = c.b;
    let (query, kv) = (c.query, c.kv);
    let (q, k, v, q_and_gate) = project_qkv(c, g, cur)?;
    // Views into a fused projection (or the query beside its gate) are strided until an op
    // makes them afresh.
    let (q_projected, k_projected) = (q, k);
    let (mut q, mut k) = if b.qk_norm && !c.arch.qk_norm_full_width {
        (
            super::norm(c, g, q, (query, Q3), (super::Q_NORM, c.arch.head_dim)),
            super::norm(c, g, k, (kv, K3), (super::K_NORM, c.arch.head_dim)),
        )
    } else {
        (q, k)
    };
    // Command R7B's global layers, Jamba's and Nemotron-H's skip RoPE; Llama 4's global
    // layers skip it too and scale the query by a per-token temperature instead.
    let global = !c.arch.is_sliding_layer(layer);
    if b.rope_free || (b.cohere && global) {
    } else if b.llama4 && global {
        let scale = *lazy.attn_scale.get_or_insert_with(|| g.input(c.ids));
        q = g.op(Kind::InPlace, query, Q3, &[q, scale]);
    } else {
        q = g.op(Kind::InPlace, query, Q3, &[q, c.pos]);
        g.tag(q, Op::Rope);
        k = g.op(Kind::InPlace, kv, K3, &[k, c.pos]);
        g.tag(k, Op::Rope);
    }
    // Llama 4's L2 norms follow RoPE.
    if b.llama4 && !global {
        q = g.op(Kind::InPlace, query, Q3, &[q]);
        k = g.op(Kind::InPlace, kv, K3, &[k]);
    }
    if b.gemma || b.fused {
        q = g.op(Kind::InPlace, query, Q3, &[q]);
        g.tag(q, Op::Scale);
    }
    let step = AttentionStep {
        k_idxs: inputs.k_idxs,
        v_idxs: inputs.v_idxs,
        mask: inputs.mask,
        scores: inputs.scores,
        out: query,
        // A view into the fused projection is not contiguous: without flash attention (a
        // transposed V cache) it is copied out first.
        v_copy: b.fused_qkv.then_some(kv),
        flash_attention: c.flash_attention,
        f16_copies: f16_copies(c, inputs.cells, c.kv_dim, c.kv_dim),
        heads: FaHeads::grouped(c.arch, inputs.cells),
        metal: metal_scratch(
            c,
            inputs.cells,
            (c.arch.num_heads, c.arch.num_kv_heads),
            (c.arch.head_dim, c.arch.head_dim),
        ),
        paired: c.arch.sliding_window.is_some(),
        rotations: inputs.rotations,
        unrotated: Unrotated {
            bytes: [query, kv, kv],
            contiguous: [
                q != q_projected || !(b.fused_qkv || b.gated_attention),
                k != k_projected || !b.fused_qkv,
                !b.fused_qkv,
            ],
        },
    };
    let caches = caches(c, g, inputs.cells, (c.kv_dim, c.kv_dim));
    let attended = attend(g, [q, k, v], caches, &step);
    Some(match q_and_gate {
        Some(both) => {
            let gate = g.view(both, OTHER);
            let gate = g.op(Kind::Fresh, query, QUERY, &[gate]);
            let gate = g.op(Kind::InPlace, query, QUERY, &[gate]);
            g.tag(gate, Op::Unary);
            let gated = g.op(Kind::InPlace, query, QUERY, &[attended, gate]);
            let gated = g.tag(gated, Op::Mul);
            g.expand(gated);
            gated
        }
        None => attended,
    })
}

/// Q, K and V projected, q and k normed per head and RoPE'd (MiniMax-M3's sparse layers,
/// which attend them their own way).
pub(super) fn normed_roped_qkv(
    c: &super::Ctx<'_>,
    g: &mut Graph,
    cur: usize,
) -> Option<(usize, usize, usize)> {
    let (query, kv) = (c.query, c.kv);
    let (q, k, v, _) = project_qkv(c, g, cur)?;
    let q = super::norm(c, g, q, (query, Q3), (super::Q_NORM, c.arch.head_dim));
    let k = super::norm(c, g, k, (kv, K3), (super::K_NORM, c.arch.head_dim));
    let q = g.op(Kind::InPlace, query, Q3, &[q, c.pos]);
    g.tag(q, Op::Rope);
    let k = g.op(Kind::InPlace, kv, K3, &[k, c.pos]);
    g.tag(k, Op::Rope);
    Some((q, k, v))
}

/// Which projection of the attention's input.
#[derive(Clone, Copy)]
enum Qkv {
    Q,
    K,
    V,
    Fused,
}

impl Qkv {
    fn names(self) -> (&'static str, &'static str) {
        match self {
            Qkv::Q => ("attn_q.weight", "attn_q.bias"),
            Qkv::K => ("attn_k.weight", "attn_k.bias"),
            Qkv::V => ("attn_v.weight", "attn_v.bias"),
            Qkv::Fused => ("attn_qkv.weight", "attn_qkv.bias"),
        }
    }
}

/// Q, K and V as 3-D views of their projections (one fused projection where the architecture
/// has it), each biased where it is (q and k normed whole first where MiniMax-M2 norms them),
/// and Qwen3-Next's projection holding the query and its gate.
fn project_qkv(
    c: &super::Ctx<'_>,
    g: &mut Graph,
    cur: usize,
) -> Option<(usize, usize, usize, Option<usize>)> {
    let qkv_bias = c.b.qkv_bias;
    let h = c.arch.hidden_size;
    let project = |g: &mut Graph, bytes: u64, layout: u64, which: Qkv, n: u64| {
        let (weight, bias) = which.names();
        let w = g.matrix(weight, h, n);
        let mut t = g.op(Kind::Fresh, bytes, layout, &[w, cur]);
        if qkv_bias {
            let b = g.vector(bias, n);
            t = g.op(Kind::InPlace, bytes, layout, &[t, b]);
        }
        t
    };
    let (query, kv) = (c.query, c.kv);
    let (q_dim, kv_dim) = (c.q_dim, c.kv_dim);
    Some(if c.b.gated_attention {
        let both = project(
            g,
            query.checked_mul(2)?,
            OTHER,
            Qkv::Q,
            q_dim.checked_mul(2)?,
        );
        let q = g.view(both, OTHER);
        let k = project(g, kv, KV, Qkv::K, kv_dim);
        let v = project(g, kv, KV, Qkv::V, kv_dim);
        (g.view(q, Q3), g.view(k, K3), g.view(v, OTHER), Some(both))
    } else if c.b.fused_qkv {
        let n = q_dim.checked_add(kv_dim.checked_mul(2)?)?;
        let qkv = project(g, c.width(n)?, OTHER, Qkv::Fused, n);
        // V's view strides over whole rows of the projection: ggml_nbytes spans the last
        // token's V only, which is what a copy of it to another backend holds.
        let v = g.view_spanning(qkv, OTHER, c.width(n)? - (n - kv_dim) * 4);
        (g.view(qkv, Q3), g.view(qkv, K3), v, None)
    } else {
        let q = project(g, query, QUERY, Qkv::Q, q_dim);
        let k = project(g, kv, KV, Qkv::K, kv_dim);
        let v = project(g, kv, KV, Qkv::V, kv_dim);
        // MiniMax-M2 norms q and k over their whole width, before they are viewed per head.
        let (q, k) = if c.b.qk_norm && c.arch.qk_norm_full_width {
            (
                super::norm(c, g, q, (query, QUERY), (super::Q_NORM, q_dim)),
                super::norm(c, g, k, (kv, KV), (super::K_NORM, kv_dim)),
            )
        } else {
            (q, k)
        };
        (g.view(q, Q3), g.view(k, K3), g.view(v, OTHER), None)
    })
}

/// DeepSeek's latent attention (`deepseek2` builder): Q, optionally through its own low-rank
/// projection and norm; the compressed K/V latent and the shared RoPE key from one projection;
/// then the latent cached (`absorbed`) or full per-head K and V.
fn latent(
    c: &super::Ctx<'_>,
    g: &mut Graph,
    lazy: &mut super::Lazy,
    (cur, layer): (usize, u64),
    d: super::Mla,
    inputs: CacheInputs,
) -> Option<usize> {
    let heads = c.arch.num_heads;
    let h = c.arch.hidden_size;
    let q_in = match d.q_lora {
        Some(rank) => {
            let wa = g.matrix("attn_q_a.weight", h, rank);
            let a = g.op(Kind::Fresh, c.width(rank)?, OTHER, &[wa, cur]);
            super::norm(c, g, a, (c.width(rank)?, OTHER), (super::Q_A_NORM, rank))
        }
        None => cur,
    };
    // Sparse attention: the indexer's keys cached first, and the mask its top-k leaves open.
    let inputs = match (c.b.dsa, d.q_lora) {
        (Some(indexer), Some(rank)) => CacheInputs {
            mask: super::sparse::layer_mask(c, g, lazy, (cur, q_in, rank, layer), indexer, inputs)?,
            ..inputs
        },
        _ => inputs,
    };
    let q_out = heads.checked_mul(d.nope + d.rope)?;
    let wq = match d.q_lora {
        Some(rank) => g.matrix("attn_q_b.weight", rank, q_out),
        None => g.matrix("attn_q.weight", h, q_out),
    };
    let q_bytes = c.width(q_out)?;
    let q = g.op(Kind::Fresh, q_bytes, OTHER, &[wq, q_in]);
    let q3 = g.view(q, OTHER);
    let w_kv_a = g.matrix("attn_kv_a_mqa.weight", h, d.kv_lora + d.rope);
    let kv_pe = g.op(
        Kind::Fresh,
        c.width(d.kv_lora + d.rope)?,
        OTHER,
        &[w_kv_a, cur],
    );
    let kv_cmpr = g.view(kv_pe, OTHER);
    let mut k_pe = g.view(kv_pe, OTHER);
    // Kimi-Linear's latent attention applies no RoPE: its key's RoPE part is a view.
    if !c.b.rope_free {
        k_pe = g.op(Kind::InPlace, c.width(d.rope)?, OTHER, &[k_pe, c.pos]);
        g.tag(k_pe, Op::Rope);
    }
    let kv_cmpr = super::norm(
        c,
        g,
        kv_cmpr,
        (c.width(d.kv_lora)?, LATENT),
        (super::KV_A_NORM, d.kv_lora),
    );
    let caches = caches(c, g, inputs.cells, (d.kv_lora + d.rope, d.kv_lora));
    let parts = Latent {
        q3,
        kv_cmpr,
        k_pe,
        caches,
    };
    if d.absorbed {
        absorbed(c, g, d, parts, inputs)
    } else {
        unsplit(c, g, lazy, d, parts, inputs)
    }
}

/// Latent attention's parts before the cache: the query (3-D), the normed latent, the RoPE
/// key, and the K and V caches.
struct Latent {
    q3: usize,
    kv_cmpr: usize,
    k_pe: usize,
    caches: (usize, usize),
}

/// The query's no-RoPE part absorbed into the latent per head, then the latent and RoPE parts
/// side by side; the cache holds K only and V is a view of it.
fn absorbed(
    c: &super::Ctx<'_>,
    g: &mut Graph,
    d: super::Mla,
    p: Latent,
    inputs: CacheInputs,
) -> Option<usize> {
    let heads = c.arch.num_heads;
    let q_nope = g.view(p.q3, OTHER);
    let mut q_pe = g.view(p.q3, OTHER);
    if !c.b.rope_free {
        q_pe = g.op(
            Kind::InPlace,
            c.width(heads.checked_mul(d.rope)?)?,
            OTHER,
            &[q_pe, c.pos],
        );
        g.tag(q_pe, Op::Rope);
    }
    let q_nope = g.view(q_nope, OTHER);
    let w_kb = g.matrix("attn_k_b.weight", d.nope, heads.saturating_mul(d.kv_lora));
    let absorbed = g.op(
        Kind::Fresh,
        c.width(heads.checked_mul(d.kv_lora)?)?,
        OTHER,
        &[w_kb, q_nope],
    );
    let absorbed = g.view(absorbed, OTHER);
    let q = g.op(
        Kind::Fresh,
        c.width(heads.checked_mul(d.kv_lora + d.rope)?)?,
        OTHER,
        &[absorbed, q_pe],
    );
    let latent = g.view(p.kv_cmpr, OTHER);
    let k = g.op(
        Kind::Fresh,
        c.width(d.kv_lora + d.rope)?,
        OTHER,
        &[latent, p.k_pe],
    );
    g.expand(q);
    g.expand(latent);
    g.expand(k);
    let (k_cache, _) = p.caches;
    let k_rows = g.view(k, OTHER);
    let stored = g.set_rows(k_cache, k_rows, inputs.k_idxs);
    g.expand(stored);
    let k_all = g.view(k_cache, OTHER);
    let v_all = g.view(k_all, OTHER);
    let q4 = g.view(q, OTHER);
    let qp = g.view(q4, OTHER);
    let kp = g.view(k_all, OTHER);
    let vp = g.view(v_all, OTHER);
    let w_vb = g.matrix("attn_v_b.weight", d.kv_lora, heads.saturating_mul(d.v));
    let per_head_v = c.width(heads.checked_mul(d.v)?)?;
    let latent_out = c.width(heads.checked_mul(d.kv_lora)?)?;
    if c.flash_attention {
        let o = g.op(Kind::Fresh, latent_out, OTHER, &[qp, kp, vp, inputs.mask]);
        // V is a view of K: one copy serves both.
        g.tensors[o].fa_f16 = f16_copies(c, inputs.cells, d.kv_lora + d.rope, 0);
        // Every query head reads the one latent K head.
        g.tensors[o].fa_heads = Some(FaHeads {
            k: d.kv_lora + d.rope,
            v: d.kv_lora,
            gqa: heads,
            cells: inputs.cells,
        });
        g.tensors[o].metal_extra = latent_metal_scratch(c, inputs.cells, heads, &d);
        let o = g.view(o, OTHER);
        let o = g.op(Kind::Fresh, per_head_v, OTHER, &[w_vb, o]);
        let o = g.view(o, OTHER);
        let o = g.op(Kind::Fresh, per_head_v, OTHER, &[o]);
        return Some(g.view(o, QUERY));
    }
    // V is a view of the (untransposed) cache: copied out transposed, in the cache's own type.
    let vt = g.view(vp, OTHER);
    let v_bytes = c
        .kv_type
        .bytes_for(u128::from(c.kv_cells) * u128::from(d.kv_lora));
    let v_copy = g.op(Kind::Fresh, sat(v_bytes), OTHER, &[vt]);
    let kq = g.op(Kind::Fresh, inputs.scores, SCORES, &[kp, qp]);
    let kq = g.op(Kind::InPlace, inputs.scores, SCORES, &[kq, inputs.mask]);
    let kqv = g.op(Kind::Fresh, latent_out, OTHER, &[v_copy, kq]);
    let kqv = g.op(Kind::Fresh, per_head_v, OTHER, &[w_vb, kqv]);
    let permuted = g.view(kqv, OTHER);
    Some(g.op(Kind::Fresh, per_head_v, QUERY, &[permuted]))
}

/// An unsplit attn_kv_b: full per-head K and V decompressed from the latent and cached.
fn unsplit(
    c: &super::Ctx<'_>,
    g: &mut Graph,
    lazy: &mut super::Lazy,
    d: super::Mla,
    p: Latent,
    inputs: CacheInputs,
) -> Option<usize> {
    let heads = c.arch.num_heads;
    let k_dim = heads.checked_mul(d.nope + d.rope)?;
    let v_dim = heads.checked_mul(d.v)?;
    let w_kv_b = g.matrix(
        "attn_kv_b.weight",
        d.kv_lora,
        heads.saturating_mul(d.nope + d.v),
    );
    let kv_full = g.op(
        Kind::Fresh,
        c.width(heads.checked_mul(d.nope + d.v)?)?,
        OTHER,
        &[w_kv_b, p.kv_cmpr],
    );
    let k_nope = g.view(kv_full, OTHER);
    let v_view = g.view(kv_full, OTHER);
    let v = g.op(Kind::Fresh, c.width(v_dim)?, OTHER, &[v_view]);
    let q = g.op(Kind::InPlace, c.width(k_dim)?, OTHER, &[p.q3, c.pos]);
    g.tag(q, Op::Rope);
    let k_pe_all = g.op(
        Kind::Fresh,
        c.width(heads.checked_mul(d.rope)?)?,
        OTHER,
        &[p.k_pe],
    );
    let k = g.op(Kind::Fresh, c.width(k_dim)?, OTHER, &[k_nope, k_pe_all]);
    let v_idxs = if c.flash_attention {
        inputs.v_idxs
    } else {
        let tokens = c.tokens;
        *lazy
            .full_v_idxs
            .get_or_insert_with(|| g.input(v_dim.saturating_mul(tokens).saturating_mul(8)))
    };
    let step = AttentionStep {
        k_idxs: inputs.k_idxs,
        v_idxs,
        mask: inputs.mask,
        scores: inputs.scores,
        out: c.width(v_dim)?,
        v_copy: None,
        flash_attention: c.flash_attention,
        f16_copies: f16_copies(c, inputs.cells, k_dim, v_dim),
        // K and V keep a head each of the query's.
        heads: FaHeads {
            k: d.nope + d.rope,
            v: d.v,
            gqa: 1,
            cells: inputs.cells,
        },
        metal: metal_scratch(c, inputs.cells, (heads, heads), (d.nope + d.rope, d.v)),
        paired: false,
        rotations: inputs.rotations,
        // Q is roped, K joined and V copied out: all three made afresh.
        unrotated: Unrotated {
            bytes: [c.width(k_dim)?, c.width(k_dim)?, c.width(v_dim)?],
            contiguous: [true; 3],
        },
    };
    Some(attend(g, [q, k, v], p.caches, &step))
}

/// Bytes of a layer's K (`k_width` values a cell) and V in f16 over `cells` cells, where flash
/// attention reads a cache of another type; `None` for an f16 cache or without flash attention.
/// A layer's K and V caches of `cells` cells, `widths` values a cell: their bytes are what a
/// view of one copied to another backend takes.
pub(super) fn caches(
    c: &super::Ctx<'_>,
    g: &mut Graph,
    cells: u64,
    widths: (u64, u64),
) -> (usize, usize) {
    let bytes = |w: u64| sat(c.kv_type.bytes_for(u128::from(cells) * u128::from(w)));
    let (k, v) = (g.external(), g.external());
    g.tensors[k].bytes = bytes(widths.0);
    g.tensors[v].bytes = bytes(widths.1);
    (k, v)
}

/// ggml-metal's scratch for a layer's flash attention over `cells` cells, its query and K
/// heads `heads` and K's and V's head sizes `dims` ([`super::metal`]); none without flash
/// attention.
pub(super) fn metal_scratch(
    c: &super::Ctx<'_>,
    cells: u64,
    heads: (u64, u64),
    dims: (u64, u64),
) -> u64 {
    if !c.flash_attention {
        return 0;
    }
    let row = |heads: u64, w: u64| sat(c.kv_type.bytes_for(u128::from(heads) * u128::from(w)));
    super::metal::flash_attention_extra(&super::metal::MetalFa {
        tokens: c.tokens,
        heads: heads.0,
        kv_heads: heads.1,
        k_head: dims.0,
        v_head: dims.1,
        cells,
        kv_type: c.kv_type,
        strides: (row(heads.1, dims.0), row(heads.1, dims.1)),
        v_of_k: false,
    })
}

/// [`metal_scratch`] for MLA's latent cache: one K head that V is a view of.
fn latent_metal_scratch(c: &super::Ctx<'_>, cells: u64, heads: u64, d: &super::Mla) -> u64 {
    let k = d.kv_lora + d.rope;
    let stride = sat(c.kv_type.bytes_for(u128::from(k)));
    super::metal::flash_attention_extra(&super::metal::MetalFa {
        tokens: c.tokens,
        heads,
        kv_heads: 1,
        k_head: k,
        v_head: d.kv_lora,
        cells,
        kv_type: c.kv_type,
        strides: (stride, stride),
        v_of_k: true,
    })
}

pub(super) fn f16_copies(
    c: &super::Ctx<'_>,
    cells: u64,
    k_width: u64,
    v_width: u64,
) -> Option<(u64, u64)> {
    if !c.flash_attention || *c.kv_type == crate::model::dtype::KV_F16 {
        return None;
    }
    let bytes = |w: u64| cells.saturating_mul(w).saturating_mul(2);
    Some((bytes(k_width), bytes(v_width)))
}
