//! What an estimate reports: every part in bytes, how each was obtained, and the settings no
//! device can hold.

use serde::Serialize;

use super::pytorch::generate::GeneratePeak;
use super::pytorch::training::{Ddp, DeepSpeed, Fsdp, Recipe, TrainingError, TrainingPeak};
use crate::model::WeightsDtype;

/// PyTorch's training step: the recipe it ran under and its peak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TrainingStep {
    /// Precision and copies.
    pub recipe: Recipe,
    /// The peak, by category, and where it falls.
    pub peak: TrainingPeak,
    /// FSDP2 sharding, when the figures are one rank's.
    pub fsdp: Option<Fsdp>,
    /// DistributedDataParallel, when the figures are one rank's.
    pub ddp: Option<Ddp>,
    /// DeepSpeed's ZeRO-2, when the figures are one rank's.
    pub deepspeed: Option<DeepSpeed>,
    /// Micro-batches a step accumulates gradients over (1: none).
    pub grad_accum: u64,
}

/// What training adds over inference, by part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TrainingBytes {
    /// One gradient per parameter, at the weight precision.
    pub gradients_bytes: u64,
    /// Optimizer moments: two fp32 values per parameter for Adam, one for SGD.
    pub optimizer_bytes: u64,
    /// fp32 master copy of the weights (mixed precision).
    pub master_weights_bytes: u64,
}

/// Every part of an estimate, in bytes, and how the weights were counted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Breakdown {
    /// Parameters stored, all experts included.
    pub parameters: u64,
    /// Active parameters per token.
    pub active_parameters: u64,
    /// Weight bytes: exact from GGUF/safetensors, else parameters × precision.
    pub weights_bytes: u64,
    /// A multimodal projector's weight bytes (an mmproj GGUF), 0 without one.
    pub projector_bytes: u64,
    /// The compute buffer llama.cpp's clip reserves at warm-up to encode one image with the
    /// projector, as it prints it at load (replayed on the CPU backend's rules); 0 without a
    /// projector, or where its graph is not modelled (a warning says so).
    pub projector_compute_bytes: u64,
    /// The buffer once the largest image the projector accepts is encoded (ggml's scheduler
    /// grows it past the warm-up's for a tower of dynamic resolution); the total counts it.
    pub projector_largest_image_compute_bytes: u64,
    /// KV cache for `batch × context` tokens, and recurrent layers' state (llama.cpp's KV and
    /// RS buffers together).
    pub kv_cache_bytes: u64,
    /// The part of `kv_cache_bytes` that is recurrent state (Mamba, gated DeltaNet layers):
    /// fixed per sequence, whatever the context.
    pub recurrent_state_bytes: u64,
    /// KV cache per token.
    pub kv_bytes_per_token: u64,
    /// Activation scratch (inference) or stored activations (training).
    pub activation_bytes: u64,
    /// How `activation_bytes` was obtained.
    pub activations_basis: ActivationsBasis,
    /// Runtime overhead per device (CUDA context, cuBLAS workspace, …).
    pub overhead_bytes: u64,
    /// Bytes added for the pool's fragmentation (`fragmentation_reserve` percent).
    pub fragmentation_bytes: u64,
    /// Training-only parts; `None` for inference.
    pub training: Option<TrainingBytes>,
    /// Under training, PyTorch's step: the recipe, the peak by category and its phase (`None`
    /// where the step is not walked: see `training_unwalked`).
    pub training_step: Option<TrainingStep>,
    /// Why the training step was counted by the closed formula instead.
    #[serde(skip)]
    pub training_unwalked: Option<TrainingError>,
    /// Under `generate_new_tokens`, transformers' `generate` peak.
    pub generate: Option<GeneratePeak>,
    /// Why `generate` could not be walked (the llama.cpp figures stand instead).
    #[serde(skip)]
    pub generate_unwalked: Option<TrainingError>,
    /// Sum of every part above: what must fit on one device.
    pub total_bytes: u64,
    /// Bytes per layer (weights and KV) for planning layer splits.
    pub per_layer_bytes: u64,
    /// Bytes outside the layers (embeddings, output, final norm, a multimodal projector).
    pub non_layer_bytes: u64,
    /// The precision the weights were counted in.
    #[serde(skip)]
    pub weights_dtype: WeightsDtype,
}

/// How the activation figure was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ActivationsBasis {
    /// llama.cpp's prompt graph for this architecture built node by node and placed by a
    /// replay of ggml's graph allocator: its compute buffer to the byte (CPU backend).
    GraphReplay,
    /// The largest of llama.cpp's graph stages, fitted to its reports and rounded up: never
    /// below them, up to 14 % above for hybrids with experts.
    StageEstimate,
    /// llama.cpp's graph for this architecture is neither replayed nor fitted (DeepSeek-V4's
    /// compressed attention and hyper-connections): the figure is a plain decoder's largest
    /// stage at the model's widths, which can be far from llama.cpp's compute buffer either
    /// way.
    Unmodelled,
    /// Training: activations kept for the backward pass (Korthikanti et al.).
    Training,
    /// Training: PyTorch's step walked module by module ([`super::pytorch::training`]), its peak as
    /// PyTorch's `MemTracker` counts it; activations include backward's temporaries at the peak.
    PytorchStep,
    /// transformers' `generate` ([`super::pytorch::generate`]): what lives at its peak beside the
    /// weights and the KV cache.
    TransformersGenerate,
}

/// A part of the estimate that would not fit in 64 bits: settings no device can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the {part} would exceed 2^64 bytes (16 EiB) at batch {batch} and context {context}; lower \
     --batch or --context"
)]
pub struct EstimateOverflow {
    /// Which part: `KV cache`, `activations` or `total`.
    pub part: &'static str,
    /// The batch asked for.
    pub batch: u64,
    /// The context asked for.
    pub context: u64,
}
