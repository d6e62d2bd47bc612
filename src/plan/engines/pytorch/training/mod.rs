//! PyTorch's memory over one training step of a transformers model, as PyTorch's own
//! `MemTracker` counts it: parameters, buffers, gradients, optimizer state, activations and
//! temporaries, at the peak of forward, backward or the optimizer step.
//!
//! The activations are not a closed formula: `saved` lists what autograd saves for each
//! module transformers runs (the norm's f32 upcast, the projections' inputs, SDPA's query, key,
//! value, output and log-sum-exp, the gated MLP's four intermediates, the f32 log-softmax over
//! the vocabulary), and `step` walks the step: the forward's end, the loss's backward (where
//! two f32 vocabulary-wide gradients join every saved activation), the backward's end and the
//! optimizer step with its `foreach` temporaries. Recorded against `MemTracker` in
//! `tests/fixtures/pytorch/` (`tools/pytorch-reference/`).
//!
//! ```
//! use gpumem::model::find_model;
//! use gpumem::plan::engines::pytorch::training::{
//!     training_peak, Optimizer, Phase, Recipe, TrainingRun,
//! };
//!
//! // Llama-3.1-8B in bf16 with AdamW, one sequence of 2,048 tokens.
//! let arch = find_model("llama-3.1-8b").unwrap().arch;
//! let run = TrainingRun {
//!     recipe: Recipe::Bf16,
//!     optimizer: Optimizer::Adamw,
//!     foreach: true,
//!     batch: 1,
//!     seq: 2048,
//!     checkpointing: false,
//!     grad_accum: 1,
//!     fsdp: None,
//!     ddp: None,
//!     deepspeed: None,
//!     attention: Default::default(),
//! };
//! let peak = training_peak(&arch, &run).unwrap();
//! // MemTracker's peak for this step: 80,302,630,540 bytes, in the optimizer step.
//! assert_eq!(peak.phase, Phase::Optimizer);
//! assert_eq!(peak.total, 80_302_630_540);
//! //! ```

mod ddp;
mod deepspeed;
mod deepspeed_step;
mod fsdp;
mod lora;
mod optimizer_state;
mod peak;
mod saved;
mod shape;
mod step;
mod walked;
mod zero3;
mod zero3_trace;

use serde::Serialize;

pub use ddp::Ddp;
pub use deepspeed::{DeepSpeed, ZeroStage};
pub use fsdp::Fsdp;
pub(crate) use lora::adapter_params;
pub use lora::{Lora, LoraTargets};
pub(crate) use shape::{Layout, MlaShape, MoeShape, Shape};

/// The optimizer whose state training keeps per parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Optimizer {
    /// Adam (two fp32 moments).
    Adam,
    /// AdamW (two fp32 moments).
    Adamw,
    /// SGD with momentum (one fp32 buffer).
    Sgd,
    /// bitsandbytes' AdamW8bit: two uint8 moments and a f32 scale a block of 256 elements
    /// (f32 moments for tensors under 4,096 elements).
    Adamw8bit,
    /// transformers' Adafactor (no first moment, fixed learning rate, as HF Trainer's
    /// `optim="adafactor"`): a matrix keeps f32 row and column second moments, a vector a
    /// full f32 one.
    Adafactor,
}

pub use peak::training_peak;

/// Which precision and which copies each class of tensor has during training.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Recipe {
    /// Weights, gradients and optimizer state all in bf16 (a bf16 checkpoint loaded as given,
    /// trained with or without autocast).
    Bf16,
    /// f32 weights, gradients and optimizer state, the forward under bf16 autocast (HF
    /// Trainer's `bf16=True` on a model loaded in f32): each linear layer saves a bf16 copy of
    /// its weight and of its input.
    Fp32Autocast,
    /// bf16 weights and gradients, an f32 master copy of the weights and f32 optimizer state
    /// (DeepSpeed's and Megatron's mixed precision). Counted by the closed formula of
    /// [`crate::plan::engines::estimate`] until its step is walked.
    MixedFp32Master,
    /// LoRA (PEFT): the model frozen in bf16, f32 adapters trained.
    Lora(Lora),
    /// QLoRA (bitsandbytes and PEFT): every projection of the decoder layers frozen in NF4 with
    /// double quantization and bf16 compute, every other weight cast to f32 by PEFT's
    /// `prepare_model_for_kbit_training` (so the residual stream is f32), f32 adapters trained.
    Qlora(Lora),
}

impl Recipe {
    /// Bytes of one parameter, and of its gradient and each optimizer moment.
    pub(crate) fn param_bytes(self) -> u64 {
        match self {
            Recipe::Bf16 | Recipe::MixedFp32Master | Recipe::Lora(_) => 2,
            Recipe::Fp32Autocast | Recipe::Qlora(_) => 4,
        }
    }

    /// The adapters, under LoRA or QLoRA.
    pub fn lora(self) -> Option<Lora> {
        match self {
            Recipe::Lora(l) | Recipe::Qlora(l) => Some(l),
            Recipe::Bf16 | Recipe::Fp32Autocast | Recipe::MixedFp32Master => None,
        }
    }

    /// What training a checkpoint loaded as given does (transformers 5 loads the file's own
    /// dtype): 4-byte weights train under autocast, 2-byte ones in bf16, anything else
    /// (quantized) by the mixed-precision formula.
    pub fn for_weights(bytes_per_element: Option<u64>) -> Self {
        match bytes_per_element {
            Some(4) => Recipe::Fp32Autocast,
            Some(2) => Recipe::Bf16,
            _ => Recipe::MixedFp32Master,
        }
    }
}

/// One training step's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrainingRun {
    /// Precision and copies.
    pub recipe: Recipe,
    /// The optimizer.
    pub optimizer: Optimizer,
    /// PyTorch's `foreach` step for Adam, AdamW and SGD (its default on CUDA): one temporary
    /// list the size of the parameters. Off, the per-tensor loop (walked under FSDP2 only).
    pub foreach: bool,
    /// Sequences per micro-batch.
    pub batch: u64,
    /// Tokens per sequence.
    pub seq: u64,
    /// Gradient checkpointing (transformers' `gradient_checkpointing_enable`).
    pub checkpointing: bool,
    /// Micro-batches a step accumulates gradients over (HF Trainer's
    /// `gradient_accumulation_steps`; 1: none): from the second on, every gradient is held
    /// through the forward and the backward, each new one beside it until it is added.
    pub grad_accum: u64,
    /// FSDP2 sharding: the figures are then one rank's.
    pub fsdp: Option<Fsdp>,
    /// DistributedDataParallel: the figures are one rank's, with its gradient buckets.
    pub ddp: Option<Ddp>,
    /// DeepSpeed's ZeRO stage 1 or 2: the figures are one rank's.
    pub deepspeed: Option<DeepSpeed>,
    /// transformers' attention implementation (`attn_implementation`).
    pub attention: AttnImplementation,
}

impl TrainingRun {
    /// The run as the walk takes it: an f32 master copy of bf16 weights on one GPU is kept as
    /// PyTorch keeps one, FSDP2 over that GPU with its `MixedPrecisionPolicy` (the f32
    /// parameters gathered in bf16, gradients reduced in f32), as torchtitan trains on a single
    /// GPU; any other run as it is.
    pub fn as_walked(self) -> TrainingRun {
        let alone = self.fsdp.is_none() && self.ddp.is_none() && self.deepspeed.is_none();
        if self.recipe != Recipe::MixedFp32Master || !alone {
            return self;
        }
        TrainingRun {
            fsdp: Some(Fsdp {
                world: 1,
                reshard_after_forward: true,
            }),
            ..self
        }
    }
}

/// transformers' `attn_implementation`, which sets what attention saves for backward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AttnImplementation {
    /// transformers' own choice: SDPA, or eager attention for the families it runs no SDPA for
    /// (Gemma 2's soft-capped logits, gpt-oss's sinks).
    #[default]
    Auto,
    /// `sdpa`: PyTorch's fused kernel, which keeps a log-sum-exp per head and token.
    Sdpa,
    /// `eager`: the scores matrix and its softmax, a value per head, token and position.
    Eager,
}

/// Where in the step the peak falls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// The forward pass, at the loss.
    Forward,
    /// The backward pass.
    Backward,
    /// The optimizer step.
    Optimizer,
}

/// The step's peak, by `MemTracker`'s categories.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TrainingPeak {
    /// Where the peak falls.
    pub phase: Phase,
    /// Parameters.
    pub parameters: u64,
    /// Module buffers (the rotary embedding's inverse frequencies).
    pub buffers: u64,
    /// Gradients alive at the peak.
    pub gradients: u64,
    /// Optimizer state, with the optimizer step's own temporaries.
    pub optimizer_state: u64,
    /// Activations alive at the peak: what autograd saved, the batch's token ids, the loss's
    /// logits.
    pub activations: u64,
    /// Backward's temporaries (gradients of activations).
    pub temporaries: u64,
    /// The sum.
    pub total: u64,
    /// Host memory the step needs beside the GPU's `total` (ZeRO-Offload's optimizer; 0
    /// where nothing is offloaded).
    pub host: u64,
}

/// Why no step is modelled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrainingError {
    /// A family whose modules' saved tensors are not listed yet.
    #[error(
        "PyTorch's step is walked for Llama, Mistral, Mixtral, Qwen2, Qwen3, Qwen3-MoE, Phi-3, \
         Gemma 2, Gemma 3, DeepSeek-V2 and gpt-oss; not yet {family}"
    )]
    Unmodelled {
        /// The family's name.
        family: String,
    },
    /// A feature of the family not listed yet (checkpointing, sliding windows, experts).
    #[error("PyTorch's step is not yet walked with {what}")]
    Unsupported {
        /// What.
        what: &'static str,
    },
    /// A combination PyTorch itself does not run: there is no step to walk.
    #[error("PyTorch does not run {what}")]
    DoesNotRun {
        /// What, and how it fails.
        what: &'static str,
    },
    /// A size beyond 2^64 bytes.
    #[error("the training step would exceed 2^64 bytes; lower --batch or --context")]
    Overflow,
}
