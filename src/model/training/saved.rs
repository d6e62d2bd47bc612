//! What autograd saves for backward in transformers' decoder modules, in bytes, as listed by
//! `torch.autograd.graph.saved_tensors_hooks` on the real modules (transformers 5.24,
//! torch 2.15, SDPA). A tensor saved by several ops counts once.
//!
//! - `LlamaRMSNorm` upcasts its input to f32 (saved by `pow` and `mul`), saves the f32
//!   `rsqrt` (one value a row) and, for the weight's gradient, its input cast back; its output
//!   is saved again by the projections that read it. Under autocast the residual stream is
//!   already f32: no copy, and the weight multiplies the f32 product, which it saves.
//! - The rotary embedding saves nothing a layer (`cos` and `sin` are shared); SDPA (GQA, no
//!   mask: one unpadded sequence) saves the rotated query and key, the value, its output and
//!   an f32 log-sum-exp per head and token. The output is `o_proj`'s input too.
//! - The gated MLP saves the gate's and up's outputs, SiLU's output and their product.
//! - The loss upcasts the logits to f32; `log_softmax` saves its f32 output.

use super::{Recipe, Shape};

/// Activation element bytes: bf16 in both recipes (under autocast, the projections' outputs).
const ACT: u128 = 2;
pub(super) const ACT_BYTES: u128 = ACT;

/// A layer's input per token: the residual stream, f32 under autocast.
pub(super) fn layer_input(s: &Shape, recipe: Recipe) -> u128 {
    match recipe {
        Recipe::Bf16 | Recipe::MixedFp32Master => ACT * s.hidden,
        Recipe::Fp32Autocast => 4 * s.hidden,
    }
}

/// An RMSNorm over `width` whose input is `ACT` wide and whose output is saved by its readers.
fn rms_norm(width: u128, out_saved: bool) -> u128 {
    4 * width + 4 + ACT * width + if out_saved { ACT * width } else { 0 }
}

/// An RMSNorm on an f32 input under autocast: the input, the `rsqrt`, and the f32 product the
/// weight multiplies.
fn rms_norm_f32(width: u128) -> u128 {
    4 * width + 4 + 4 * width
}

/// Bytes one decoder layer saves per token.
pub(super) fn layer_per_token(s: &Shape, recipe: Recipe) -> u128 {
    let (h, d) = (s.hidden, s.head_dim);
    let q = s.heads * d;
    let kv = s.kv_heads * d;
    let mut attention = ACT * (q + 2 * kv) + 4 * s.heads + ACT * q;
    if s.fused {
        // The value SDPA saves is a view of the fused q/k/v output, which it keeps whole; the
        // output is copied contiguous for o_proj, which saves the copy.
        attention += ACT * (q + kv) + ACT * q;
    }
    let mlp = 4 * ACT * s.intermediate;
    // Per-head norms on q and k read the projections' bf16 outputs in either recipe: one f32
    // rsqrt a head, and the output feeds the rotary embedding, which saves nothing.
    let qk_norm = if s.qk_norm {
        rms_norm(q, false) - 4 + 4 * s.heads + rms_norm(kv, false) - 4 + 4 * s.kv_heads
    } else {
        0
    };
    match recipe {
        Recipe::Bf16 | Recipe::MixedFp32Master => 2 * rms_norm(h, true) + qk_norm + attention + mlp,
        Recipe::Fp32Autocast => {
            // Each projection reading a norm (q, k, v, gate and up; Phi-3's two fused ones)
            // casts its f32 input to bf16 and saves the copy.
            let casts = if s.fused { 2 } else { 5 } * ACT * h;
            2 * rms_norm_f32(h) + casts + qk_norm + attention + mlp
        }
    }
}

/// Bytes one decoder layer saves whatever the tokens: under autocast, the bf16 copies of its
/// projections' weights (autocast's cache, held by the graph until backward).
pub(super) fn layer_fixed(s: &Shape, recipe: Recipe) -> u128 {
    match recipe {
        Recipe::Bf16 | Recipe::MixedFp32Master => 0,
        Recipe::Fp32Autocast => ACT * s.layer_linear_params,
    }
}

/// Bytes saved per token outside the layers: the token ids (int64), the rotary `cos` and `sin`,
/// the final norm, the output head's input, and the f32 log-softmax over the vocabulary.
pub(super) fn head_per_token(s: &Shape, recipe: Recipe) -> u128 {
    let rope = 2 * s.head_dim * recipe.param_bytes() as u128;
    let norm = match recipe {
        Recipe::Bf16 | Recipe::MixedFp32Master => rms_norm(s.hidden, true),
        Recipe::Fp32Autocast => rms_norm_f32(s.hidden) + ACT * s.hidden,
    };
    IDS + rope + norm + 4 * s.vocab
}

/// Bytes saved outside the layers whatever the tokens: under autocast, the output head's bf16
/// weight copy.
pub(super) fn head_fixed(s: &Shape, recipe: Recipe) -> u128 {
    match recipe {
        Recipe::Bf16 | Recipe::MixedFp32Master => 0,
        Recipe::Fp32Autocast => ACT * s.vocab * s.hidden,
    }
}

/// The token ids, int64 per token.
pub(super) const IDS: u128 = 8;
/// The shifted labels, int64 per token.
const LABELS: u128 = 8;

/// The shifted labels: one int64 a token and one padding position a sequence.
pub(super) fn labels_bytes(batch: u128, seq: u128) -> u128 {
    LABELS * batch * (seq + 1)
}

/// Logits the loss holds at once beside the saved ones, per token: the head's bf16 output and
/// its f32 upcast.
pub(super) fn loss_forward_per_token(s: &Shape) -> u128 {
    (ACT + 4) * s.vocab
}

/// The loss's backward per token: the f32 gradients of the log-softmax output and of its
/// input.
pub(super) fn loss_backward_per_token(s: &Shape) -> u128 {
    8 * s.vocab
}
