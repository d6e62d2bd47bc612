//! transformers' `generate` (greedy, a `DynamicCache`, SDPA), as PyTorch's `MemTracker` counts
//! it: the weights, the KV cache (counted with the activations there) and what lives at the
//! largest moment of the prefill or of the last decoding step.
//!
//! - **Prefill**, at the last layer's MLP: the prompt's ids and position ids (int64), the
//!   embeddings (kept by the model's forward), the rotary tables, every layer's K and V, the
//!   layer's input (from the second layer on), the residual, the normed input, and SiLU's
//!   output, up's output and their product (the gate's output is gone by then). The logits
//!   are kept for the last position only (`logits_to_keep=1`).
//! - **Decode**, at the last step's last layer: the cache at its final length, and the
//!   layer's K being concatenated (the old tensor and the new one at once), beside one
//!   token's activations and the logits.
//!
//! Checked against `MemTracker` (`tests/fixtures/pytorch/generate-*.json`,
//! `tools/pytorch-reference/measure_generate.py`).

use serde::Serialize;

use super::arch::ModelArch;
use super::training::{Layout, Shape, TrainingError};

/// One `generate` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GenerateRun {
    /// Sequences at once.
    pub batch: u64,
    /// Prompt tokens per sequence.
    pub prompt: u64,
    /// Tokens generated per sequence (`max_new_tokens`).
    pub new_tokens: u64,
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
}

const ACT: u128 = 2;

/// The peak of `run` on `arch` in bf16.
pub fn generate_peak(arch: &ModelArch, run: &GenerateRun) -> Result<GeneratePeak, TrainingError> {
    let s = Shape::of(arch)?;
    if s.layout != Layout::Llama || s.fused || s.moe.is_some() {
        return Err(TrainingError::Unsupported {
            what: "generation other than a dense Llama-style decoder's",
        });
    }
    let (b, p, n) = (
        u128::from(run.batch),
        u128::from(run.prompt),
        u128::from(run.new_tokens.max(1)),
    );
    let length = p + n - 1;
    if s.window.is_some_and(|w| length >= w) {
        return Err(TrainingError::Unsupported {
            what: "generation past a sliding window",
        });
    }
    let (h, i, d) = (s.hidden, s.intermediate, s.head_dim);
    let tokens = b * p;
    let kv_token = 2 * s.kv_heads * d * ACT;
    let kv_prefill = s.layers * kv_token * tokens;
    let layer_input = if s.layers > 1 { ACT * h * tokens } else { 0 };
    let prefill = 8 * tokens
        + 8 * p
        + ACT * h * tokens
        + 2 * d * ACT * p
        + layer_input
        + 2 * ACT * h * tokens
        + 3 * ACT * i * tokens;
    let kv_decode = s.layers * kv_token * b * length;
    // The last layer's K, old and new at once while they are concatenated.
    let concat = s.kv_heads * d * ACT * b * (length - 1);
    let decode = concat
        + 8 * tokens
        + 8 * b
        + 2 * 2 * b * s.vocab
        + b * (4 * ACT * h + 3 * ACT * i + 2 * d * ACT);
    let (phase, kv, activations) = if kv_prefill + prefill >= kv_decode + decode {
        (GeneratePhase::Prefill, kv_prefill, prefill)
    } else {
        (GeneratePhase::Decode, kv_decode, decode)
    };
    let parameters = s.params * ACT;
    let buffers = 4 * d;
    let fit = |v: u128| u64::try_from(v).map_err(|_| TrainingError::Overflow);
    Ok(GeneratePeak {
        phase,
        parameters: fit(parameters)?,
        buffers: fit(buffers)?,
        kv_cache: fit(kv)?,
        activations: fit(activations)?,
        total: fit(parameters + buffers + kv + activations)?,
    })
}
