//! transformers' `generate` (greedy, a `DynamicCache`, SDPA), as PyTorch's `MemTracker` counts
//! it: the weights, the KV cache (counted with the activations there) and what lives at the
//! largest moment of the prefill or of the last decoding step.
//!
//! - **Prefill**, at the last layer's MLP: the prompt's ids and position ids (int64), the
//!   embeddings (kept by the model's forward), the rotary tables, every layer's K and V, the
//!   layer's input (from the second layer on), the residual, the normed input, and SiLU's
//!   output, up's output and their product (the gate's output is gone by then; Phi-3's fused
//!   gate/up output is whole beside them). The logits
//!   are kept for the last position only (`logits_to_keep=1`).
//! - **Decode**, at the last step's last layer: the cache at its final length, and the
//!   layer's K being concatenated (the old tensor and the new one at once; a sliding layer's
//!   K and V both), beside one token's activations and the logits.
//! - **Sliding windows** (Mistral v0.1): transformers' sliding layer keeps its last window − 1
//!   tokens as a slice of what it was given, so the prompt's whole K and V stay alive through
//!   the prefill, beside one int64 a layer; from the window on, the prefill builds a boolean
//!   `prompt × prompt` mask. In
//!   decoding the cache is capped at a window's worth a layer (bounded from above: the long
//!   generations that would check it take hours on fake tensors).
//!
//! Checked against `MemTracker` (`tests/fixtures/pytorch/generate-*.json`,
//! `tools/pytorch-reference/measure_generate.py`).

use serde::Serialize;

use super::training::{adapter_params, Layout, Lora, MoeShape, Shape, TrainingError};
use crate::model::ModelArch;

/// One `generate` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GenerateRun {
    /// Sequences at once.
    pub batch: u64,
    /// Prompt tokens per sequence.
    pub prompt: u64,
    /// Tokens generated per sequence (`max_new_tokens`).
    pub new_tokens: u64,
    /// A PEFT LoRA adapter on the model (PEFT's defaults: f32 adapters, no dropout).
    pub lora: Option<Lora>,
}

/// Where the peak falls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GeneratePhase {
    /// The prompt's forward pass.
    Prefill,
    /// The last new token's forward pass.
    Decode,
}

/// The peak of a `generate` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct GeneratePeak {
    /// Where it falls.
    pub phase: GeneratePhase,
    /// Parameters (bf16).
    pub parameters: u64,
    /// Buffers (the rotary inverse frequencies).
    pub buffers: u64,
    /// The KV cache at the peak.
    pub kv_cache: u64,
    /// Everything else alive at the peak.
    pub activations: u64,
    /// The sum.
    pub total: u64,
    /// With a LoRA adapter, its parameters' bytes (f32), in `parameters`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adapter_parameters: Option<u64>,
    /// With an assistant model, its share of the figures above.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assistant: Option<AssistantShare>,
}

/// An assistant model's share of a [`GeneratePeak`] (already in its figures).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct AssistantShare {
    /// Its parameters (bf16), in `parameters`.
    pub parameters: u64,
    /// Its own `DynamicCache` at the peak, in `kv_cache`.
    pub kv_cache: u64,
    /// The candidates' f32 logits the target's verification sees, in `activations`.
    pub candidate_logits: u64,
    /// Candidates proposed a round (`num_assistant_tokens`, capped by the tokens left).
    pub candidates: u64,
}

pub(super) const ACT: u128 = 2;

/// What a sliding window adds to a forward pass over `q` query positions on `layers` sliding
/// layers: one int64 each layer's cache keeps (measured at 2 and 32 layers), and from the
/// window on the boolean mask itself, one `q × q` plane shared by the batch (below the window
/// SDPA runs causal, without one).
fn window_extra(window: Option<u128>, layers: u128, q: u128) -> u128 {
    match window {
        None => 0,
        Some(w) if q >= w => 8 * layers + q * q,
        Some(_) => 8 * layers,
    }
}

/// What the last layer's experts hold at the prefill's peak, for `tokens` tokens: the router's
/// bf16 logits, one int64 count an expert, and for each routed copy the larger of two moments.
/// Inside the experts: 36 bytes (top-k weights, indices and the sorted order), the copy's
/// fused gate/up output, SiLU output, product and down output (measured on Mixtral's shape with
/// 4–16 experts, 1–4 a token). At their end: 40 bytes of indices and weights and four
/// hidden-wide rows, the moment that binds where the experts are narrow (measured on
/// Qwen3-30B-A3B's shape with 64–128 experts, 4–8 a token, 2,048–4,096 wide, two widths of
/// expert).
fn experts_live(m: &MoeShape, hidden: u128, tokens: u128) -> u128 {
    let inside = 4 * ACT * m.intermediate + ACT * hidden + 36;
    let end = 4 * ACT * hidden + 40;
    tokens * (ACT * m.experts + m.top_k * inside.max(end)) + 8 * m.experts
}

/// The shape `generate` walks on `arch`, and its experts where every layer routes them (none
/// shared: Mixtral's, Qwen3-MoE's), whose last layer then holds the peak.
pub(super) fn walked(arch: &ModelArch) -> Result<(Shape, Option<MoeShape>), TrainingError> {
    let s = Shape::of(arch)?;
    if s.layout != Layout::Llama {
        return Err(TrainingError::Unsupported {
            what: "a decoder other than a Llama-style one in generation",
        });
    }
    let experts = match &s.moe {
        None => None,
        Some(m) if m.shared_intermediate == 0 && m.layers == s.layers => Some(*m),
        Some(_) => {
            return Err(TrainingError::Unsupported {
                what: "generation with shared experts or dense layers among expert ones",
            })
        }
    };
    if s.window.is_some() && !s.window_all_layers {
        return Err(TrainingError::Unsupported {
            what: "sliding and full-attention layers mixed in generation",
        });
    }
    Ok((s, experts))
}

/// One token's K and V in one layer.
pub(super) fn kv_token(s: &Shape) -> u128 {
    2 * s.kv_heads * s.head_dim * ACT
}

/// The prefill over `positions` positions of `b` sequences, at its last layer's MLP: the KV
/// cache, then the rest (see the module's notes).
pub(super) fn prefill_live(
    s: &Shape,
    experts: Option<&MoeShape>,
    lora: Option<Lora>,
    b: u128,
    positions: u128,
) -> (u128, u128) {
    let (h, d) = (s.hidden, s.head_dim);
    let tokens = b * positions;
    // A sliding-window layer keeps its last window − 1 tokens as a view of what it was given:
    // the prompt's whole K and V stay alive through the prefill.
    let kv = s.layers * kv_token(s) * tokens;
    let layer_input = if s.layers > 1 { ACT * h * tokens } else { 0 };
    let feed_forward = match experts {
        None => dense_live(s, lora) * tokens,
        Some(m) => experts_live(m, h, tokens),
    };
    let live = 8 * tokens
        + 8 * positions
        + ACT * h * tokens
        + 2 * d * ACT * positions
        + layer_input
        + 2 * ACT * h * tokens
        + feed_forward
        + window_extra(s.window, s.layers, positions);
    (kv, live)
}

/// What a dense MLP holds a token at its largest moment. Without adapters: SiLU's output, up's
/// and their product (Phi-3's fused gate/up output stays whole beside them, its two halves
/// being views). PEFT's LoRA layer casts its input to the adapters' f32, adds the scaled
/// f32 branch to the bf16 base output (an f32 sum) and casts back; its largest moment is the
/// sum beside the scaled branch, the base output and the f32 input (the rank's own tensor is
/// gone by then). On `up_proj` that moment also holds SiLU's output; on `down_proj` it holds
/// the product it reads.
fn dense_live(s: &Shape, lora: Option<Lora>) -> u128 {
    let (h, i) = (s.hidden, s.intermediate);
    let base = if s.fused { 4 } else { 3 } * ACT * i;
    let Some(t) = lora.map(|l| l.targets) else {
        return base;
    };
    let branch = |input: u128, output: u128| ACT * output + 4 * output + 4 * output + 4 * input;
    let gate = if t.gate { branch(h, i) } else { 0 };
    let up = if t.up { ACT * i + branch(h, i) } else { 0 };
    let down = if t.down { ACT * i + branch(i, h) } else { 0 };
    base.max(gate).max(up).max(down)
}

/// PEFT's LoRA is walked on a dense, unfused Llama-style layer only.
pub(super) fn check_lora(s: &Shape, lora: Option<Lora>) -> Result<(), TrainingError> {
    if lora.is_some() && (s.moe.is_some() || s.fused) {
        return Err(TrainingError::Unsupported {
            what: "a LoRA adapter in generation on experts or fused projections",
        });
    }
    Ok(())
}

/// The peak of `run` on `arch` in bf16.
pub fn generate_peak(arch: &ModelArch, run: &GenerateRun) -> Result<GeneratePeak, TrainingError> {
    let (s, experts) = walked(arch)?;
    let experts = experts.as_ref();
    let (b, p, n) = (
        u128::from(run.batch),
        u128::from(run.prompt),
        u128::from(run.new_tokens.max(1)),
    );
    let length = p + n - 1;
    let (h, d) = (s.hidden, s.head_dim);
    let tokens = b * p;
    check_lora(&s, run.lora)?;
    let (kv_prefill, prefill) = prefill_live(&s, experts, run.lora, b, p);
    let adapters = adapter_bytes(&s, run.lora);
    // Past the window each layer holds a window's worth: the concatenation it slices.
    let cached = s.window.map_or(length, |w| length.min(w));
    let kv_decode = s.layers * kv_token(&s) * b * cached;
    // The last layer's K, old and new at once while they are concatenated; a sliding layer
    // concatenates K and V before it lets either old one go, so both are held twice.
    let copies = if s.window.is_some() { 2 } else { 1 };
    let concat = copies * s.kv_heads * d * ACT * b * cached.saturating_sub(1).max(1);
    let decode = concat
        + 8 * tokens
        + 8 * b
        + 2 * 2 * b * s.vocab
        + b * (4 * ACT * h + 2 * d * ACT)
        + experts.map_or(dense_live(&s, run.lora) * b, |m| experts_live(m, h, b))
        + window_extra(s.window, s.layers, cached);
    let (phase, kv, activations) = if kv_prefill + prefill >= kv_decode + decode {
        (GeneratePhase::Prefill, kv_prefill, prefill)
    } else {
        (GeneratePhase::Decode, kv_decode, decode)
    };
    let mut peak = GeneratePeak::of(phase, s.params * ACT + adapters, 4 * d, kv, activations)?;
    if run.lora.is_some() {
        peak.adapter_parameters =
            Some(u64::try_from(adapters).map_err(|_| TrainingError::Overflow)?);
    }
    Ok(peak)
}

/// The adapters' bytes: PEFT keeps them in f32 beside the bf16 model (`autocast_adapter_dtype`).
pub(super) fn adapter_bytes(s: &Shape, lora: Option<Lora>) -> u128 {
    lora.map_or(0, |l| 4 * adapter_params(s, l).0)
}

impl GeneratePeak {
    pub(super) fn of(
        phase: GeneratePhase,
        parameters: u128,
        buffers: u128,
        kv: u128,
        activations: u128,
    ) -> Result<GeneratePeak, TrainingError> {
        let fit = |v: u128| u64::try_from(v).map_err(|_| TrainingError::Overflow);
        Ok(GeneratePeak {
            phase,
            parameters: fit(parameters)?,
            buffers: fit(buffers)?,
            kv_cache: fit(kv)?,
            activations: fit(activations)?,
            total: fit(parameters + buffers + kv + activations)?,
            assistant: None,
            adapter_parameters: None,
        })
    }
}
