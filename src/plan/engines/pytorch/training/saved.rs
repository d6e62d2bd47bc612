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

use super::{Layout, MlaShape, MoeShape, Recipe, Shape};

/// Activation element bytes: bf16 in both recipes (under autocast, the projections' outputs).
const ACT: u128 = 2;
pub(super) const ACT_BYTES: u128 = ACT;

/// A layer's input per token: the residual stream, f32 under autocast.
pub(super) fn layer_input(s: &Shape, recipe: Recipe) -> u128 {
    match recipe {
        Recipe::Bf16 | Recipe::MixedFp32Master | Recipe::Lora(_) => ACT * s.hidden,
        Recipe::Fp32Autocast | Recipe::Qlora(_) => 4 * s.hidden,
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

/// A Gemma RMSNorm over `width` on a bf16 input: the f32 upcast, the `rsqrt`, the normalized
/// f32 product `1 + weight` multiplies, and the bf16 output where its readers save it.
fn gemma_norm(width: u128, out_saved: bool) -> u128 {
    4 * width + 4 + 4 * width + if out_saved { ACT * width } else { 0 }
}

/// Gemma 2's layer per token (bf16): its four norms (the inputs of attention and of the MLP
/// saved by their projections, the others feeding the residual), eager attention (the scaled
/// query, K and V repeated to every head, the soft-capped logits' `tanh`, the f32 softmax and
/// its bf16 cast, a score per head, token and position), the output copied for `o_proj`.
fn gemma2_layer_per_token(s: &Shape, seq: u128, mlp: u128) -> u128 {
    let q = s.heads * s.head_dim;
    let norms = 2 * gemma_norm(s.hidden, true) + 2 * gemma_norm(s.hidden, false);
    let scores = (ACT + 4 + ACT) * s.heads * seq;
    norms + ACT * (q + 2 * q) + scores + ACT * q + mlp
}

/// Gemma 3's layer per token (bf16): four Gemma norms, the per-head norms on q and k (f32
/// upcast, rsqrt, normalized product), SDPA's query, key, value, log-sum-exp and output, and
/// `mlp`.
fn gemma3_layer_per_token(s: &Shape, mlp: u128) -> u128 {
    let q = s.heads * s.head_dim;
    let kv = s.kv_heads * s.head_dim;
    let norms = 2 * gemma_norm(s.hidden, true) + 2 * gemma_norm(s.hidden, false);
    let qk_norms = 8 * q + 4 * s.heads + 8 * kv + 4 * s.kv_heads;
    norms + qk_norms + ACT * (2 * q + 2 * kv) + 4 * s.heads + mlp
}

/// Bytes an expert layer's feed-forward block saves per token, as transformers' grouped
/// experts run it: the router's f32 softmax, the top-k indices (int64), their f32 weights and
/// sum, the two int64 orderings of the k routed copies, the gathered inputs, each copy's
/// gate/up output, SiLU output and product, its bf16 weight, the experts' outputs and the
/// scatter index.
fn experts_per_token(s: &Shape, m: &MoeShape) -> u128 {
    let k = m.top_k;
    4 * m.experts
        + 4
        + (8 + 4 + 16 + ACT + 8) * k
        + 2 * ACT * k * s.hidden
        + 4 * ACT * k * m.intermediate
}

/// DeepSeek-V2's experts per token: its gate's f32 copy of the hidden state and f32 softmax,
/// the top-k indices, the two orderings and the scatter index of the k routed copies, their f32
/// weights, each copy through gate/up, SiLU and down as the grouped experts run it; the shared
/// experts a gated MLP of their own.
fn deepseek_experts_per_token(s: &Shape, m: &MoeShape) -> u128 {
    let k = m.top_k;
    4 * s.hidden
        + 4 * m.experts
        + (8 + 16 + 4 + 8) * k
        + 2 * ACT * k * s.hidden
        + 4 * ACT * k * m.intermediate
        + 4 * ACT * m.shared_intermediate
}

/// DeepSeek-V2's layer per token: two norms, the latent's norm (its output saved by kv_b),
/// attention run eagerly in f32 (the query and the key with their rotary dimensions, a score
/// per head and position, V), o_proj's bf16 input, and the feed-forward block `mlp`.
fn deepseek_layer_per_token(s: &Shape, mla: &MlaShape, seq: u128, mlp: u128) -> u128 {
    let qk = s.heads * (mla.nope + mla.rope);
    2 * rms_norm(s.hidden, true)
        + rms_norm(mla.kv_lora_rank, true)
        + 2 * 4 * qk
        + 4 * s.heads * seq
        + 4 * s.heads * mla.v
        + ACT * s.heads * mla.v
        + mlp
}

/// gpt-oss's experts per token: the top-k indices and their bf16 softmax, three int64
/// orderings and the scatter index of the k routed copies, the gathered inputs, each copy's
/// gate/up output and the five products of its clamped SwiGLU, its weight, the experts'
/// outputs.
fn gpt_oss_experts_per_token(s: &Shape, m: &MoeShape) -> u128 {
    let k = m.top_k;
    (8 + ACT + 24 + ACT + 8) * k + 2 * ACT * k * s.hidden + (2 + 5) * ACT * k * m.intermediate
}

/// gpt-oss's layer per token: two norms (the f32 product the weight multiplies is saved),
/// eager attention (the scaled query, K and V repeated to every head, the max's int64 index a
/// head, the bf16 softmax over the keys and the sink), o_proj's input, and `mlp`.
fn gpt_oss_layer_per_token(s: &Shape, seq: u128, mlp: u128) -> u128 {
    let q = s.heads * s.head_dim;
    2 * gemma_norm(s.hidden, true)
        + 3 * ACT * q
        + 8 * s.heads
        + ACT * s.heads * (seq + 1)
        + ACT * q
        + mlp
}

/// Bytes one decoder layer saves per token of sequences of `seq`; `experts`: a layer with
/// routed experts; `repeated`: K and V are repeated to every head (SDPA with a mask, or eager
/// attention over grouped KV heads); `eager`: eager attention, which saves its f32 softmax and
/// the bf16 probabilities, a value per head and position, where SDPA saves a log-sum-exp.
pub(super) fn layer_per_token(
    s: &Shape,
    recipe: Recipe,
    experts: bool,
    seq: u128,
    (repeated, eager): (bool, bool),
) -> u128 {
    let (h, d) = (s.hidden, s.head_dim);
    let q = s.heads * d;
    let kv = s.kv_heads * d;
    let kv_saved = if repeated || eager { q } else { kv };
    let scores = if eager {
        (4 + ACT) * s.heads * seq
    } else {
        4 * s.heads
    };
    let mut attention = ACT * (q + 2 * kv_saved) + scores + ACT * q;
    if s.fused {
        // The value SDPA saves is a view of the fused q/k/v output, which it keeps whole; the
        // output is copied contiguous for o_proj, which saves the copy.
        attention += ACT * (q + kv) + ACT * q;
    }
    let mlp = match (s.moe.as_ref().filter(|_| experts), s.layout) {
        (Some(m), Layout::DeepseekV2) => deepseek_experts_per_token(s, m),
        (Some(m), Layout::GptOss) => gpt_oss_experts_per_token(s, m),
        (Some(m), _) => experts_per_token(s, m),
        (None, _) => 4 * ACT * s.intermediate,
    };
    match (s.layout, &s.mla) {
        (Layout::Gemma2, _) => return gemma2_layer_per_token(s, seq, mlp),
        (Layout::Gemma3, _) => return gemma3_layer_per_token(s, mlp),
        (Layout::DeepseekV2, Some(mla)) => return deepseek_layer_per_token(s, mla, seq, mlp),
        (Layout::GptOss, _) => return gpt_oss_layer_per_token(s, seq, mlp),
        _ => {}
    }
    let qk_norm = qk_norm(s);
    // LoRA's and QLoRA's layers are walked by `lora::layer_per_token`.
    match recipe {
        Recipe::Bf16 | Recipe::MixedFp32Master | Recipe::Lora(_) | Recipe::Qlora(_) => {
            2 * rms_norm(h, true) + qk_norm + attention + mlp
        }
        Recipe::Fp32Autocast => {
            // Each projection reading a norm (q, k, v, gate and up; Phi-3's two fused ones)
            // casts its f32 input to bf16 and saves the copy.
            let casts = if s.fused { 2 } else { 5 } * ACT * h;
            2 * rms_norm_f32(h) + casts + qk_norm + attention + mlp
        }
    }
}

/// What a Llama-layout layer under eager attention still holds per token when its softmax's
/// backward runs: the input norm's tensors (its output saved by q, k and v), the per-head
/// norms', the rotated query and the repeated key the scores' product saved, and the f32
/// softmax; the probabilities, V and everything after them are released by then.
pub(super) fn eager_attention_remnant(s: &Shape, seq: u128) -> u128 {
    let q = s.heads * s.head_dim;
    rms_norm(s.hidden, true) + qk_norm(s) + 2 * ACT * q + 4 * s.heads * seq
}

/// Per-head norms on q and k (Qwen3's) read the projections' bf16 outputs in either recipe:
/// one f32 rsqrt a head, and the output feeds the rotary embedding, which saves nothing.
fn qk_norm(s: &Shape) -> u128 {
    if !s.qk_norm {
        return 0;
    }
    let q = s.heads * s.head_dim;
    let kv = s.kv_heads * s.head_dim;
    rms_norm(q, false) - 4 + 4 * s.heads + rms_norm(kv, false) - 4 + 4 * s.kv_heads
}

/// Bytes one decoder layer saves whatever the tokens: an expert layer's int32 offsets of each
/// expert's tokens; under autocast, the bf16 copies of its projections' weights (autocast's
/// cache, held by the graph until backward).
pub(super) fn layer_fixed(s: &Shape, recipe: Recipe, experts: bool) -> u128 {
    let offsets = s
        .moe
        .as_ref()
        .filter(|_| experts)
        .map_or(0, |m| 4 * m.experts);
    // Gemma's norms compute `1 + weight` in f32, once a norm.
    let gemma_weights = match s.layout {
        Layout::Llama | Layout::DeepseekV2 | Layout::GptOss => 0,
        Layout::Gemma2 => 4 * 4 * s.hidden,
        // …and Gemma 3's per-head norms, a head wide.
        Layout::Gemma3 => 4 * 4 * s.hidden + 2 * 4 * s.head_dim,
    };
    offsets
        + gemma_weights
        + match recipe {
            Recipe::Bf16 | Recipe::MixedFp32Master | Recipe::Lora(_) | Recipe::Qlora(_) => 0,
            Recipe::Fp32Autocast => ACT * s.layer_linear_params,
        }
}

/// The rotary `cos` and `sin` per position, in the weights' dtype: one pair for every sequence
/// of the batch (the position ids are shared).
pub(super) fn rope_per_position(s: &Shape, recipe: Recipe) -> u128 {
    match &s.mla {
        // DeepSeek's complex64 rotation, one per pair of rotary dimensions.
        Some(mla) => 4 * mla.rope,
        // gpt-oss's tables hold half the head's dimensions.
        None if s.layout == Layout::GptOss => s.head_dim * u128::from(recipe.param_bytes()),
        // Gemma 3's tables: the sliding layers' and the others'.
        None => s.rotary_tables * 2 * s.head_dim * u128::from(recipe.param_bytes()),
    }
}

/// Bytes saved per token outside the layers: the token ids (int64), the final norm, the output
/// head's input, and the f32 log-softmax over the vocabulary.
pub(super) fn head_per_token(s: &Shape, recipe: Recipe) -> u128 {
    let norm = match (s.layout, recipe) {
        (Layout::Gemma2 | Layout::Gemma3 | Layout::GptOss, _) => gemma_norm(s.hidden, true),
        (_, Recipe::Bf16 | Recipe::MixedFp32Master | Recipe::Lora(_) | Recipe::Qlora(_)) => {
            rms_norm(s.hidden, true)
        }
        (_, Recipe::Fp32Autocast) => rms_norm_f32(s.hidden) + ACT * s.hidden,
    };
    IDS + norm + after_final_norm_per_token(s)
}

/// Of those, what the loss saves after the final norm: the f32 log-softmax over the
/// vocabulary, and Gemma 2's soft-capped logits (`tanh` saves its bf16 output).
pub(super) fn after_final_norm_per_token(s: &Shape) -> u128 {
    let softcap = match s.layout {
        Layout::Llama | Layout::Gemma3 | Layout::DeepseekV2 | Layout::GptOss => 0,
        Layout::Gemma2 => ACT * s.vocab,
    };
    softcap + 4 * s.vocab
}

/// Bytes saved outside the layers whatever the tokens: under autocast, the output head's bf16
/// weight copy.
pub(super) fn head_fixed(s: &Shape, recipe: Recipe) -> u128 {
    // Gemma's embedding scale, a bf16 scalar the multiply saves, and the final norm's f32
    // `1 + weight`.
    let scale = match s.layout {
        Layout::Llama | Layout::DeepseekV2 | Layout::GptOss => 0,
        Layout::Gemma2 | Layout::Gemma3 => ACT + 4 * s.hidden,
    };
    scale
        + match recipe {
            Recipe::Bf16 | Recipe::MixedFp32Master | Recipe::Lora(_) | Recipe::Qlora(_) => 0,
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

/// Activations during the final norm's forward, from those at the forward's end: neither the
/// logits nor what the loss saves yet, and the norm's f32 temporaries (the input's square
/// beside its f32 copy and the mean a token; Gemma's norm, all f32, also its normalized
/// input). Stage 3 can peak there, with what the last layers prefetched for the head still
/// gathered (Phi-3-mini's shape at 8 layers: MemTracker's peak, within 20 bytes).
pub(super) fn final_norm_activations(s: &Shape, tokens: u128, forward_end: u128) -> u128 {
    let loss = loss_forward_per_token(s) + after_final_norm_per_token(s);
    let norm = match s.layout {
        Layout::Gemma2 | Layout::Gemma3 => 3 * 4 * s.hidden + 4,
        _ => 2 * 4 * s.hidden + 4,
    };
    (forward_end + tokens * norm).saturating_sub(tokens * loss)
}

/// The gradients a layer's feed-forward backward holds at once beside the saved activations: its
/// up projection's weight gradient (all experts' under grouped experts) and the gradients of
/// its intermediate activations.
pub(super) fn layer_backward_temporaries(
    s: &Shape,
    param_bytes: u128,
    tokens: u128,
    experts: bool,
) -> u128 {
    up_weight_grad(s, param_bytes, experts)
        + match s.moe.filter(|_| experts) {
            Some(m) => tokens * m.top_k * 3 * m.intermediate * ACT_BYTES,
            None => tokens * 2 * s.intermediate * ACT_BYTES,
        }
}

/// A layer's up projection's weight gradient, as its backward makes it (all experts' stacked
/// gate/up under grouped experts, the fused gate/up's whole).
pub(super) fn up_weight_grad(s: &Shape, param_bytes: u128, experts: bool) -> u128 {
    match s.moe.filter(|_| experts) {
        Some(m) => m.experts * 2 * m.intermediate * s.hidden * param_bytes,
        // Phi-3's fused gate/up projection makes both halves' gradient at once.
        None => (1 + u128::from(s.fused)) * s.hidden * s.intermediate * param_bytes,
    }
}
