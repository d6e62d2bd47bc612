//! How PyTorch runs an estimate beyond the request every engine reads: a training step's
//! optimizer, recipe, checkpointing, accumulation, attention and sharding, or transformers'
//! `generate` instead of llama.cpp's buffers.

use super::training::{AttnImplementation, Ddp, DeepSpeed, Fsdp, Lora, Optimizer, Recipe};
use crate::model::ModelArch;

/// PyTorch's own settings for one estimate; under inference only `generate_new_tokens` counts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PytorchRun {
    /// Whose state is counted under training.
    pub optimizer: Optimizer,
    /// Keep only layer inputs under training (recompute the rest).
    pub checkpointing: bool,
    /// Micro-batches a training step accumulates gradients over (1: none).
    pub grad_accum: u64,
    /// transformers' attention implementation under training.
    pub attention: AttnImplementation,
    /// FSDP2 sharding under training: the figures are then one rank's.
    pub fsdp: Option<Fsdp>,
    /// DistributedDataParallel under training: one rank's figures, its gradient buckets in.
    pub ddp: Option<Ddp>,
    /// DeepSpeed's ZeRO under training: one rank's figures.
    pub deepspeed: Option<DeepSpeed>,
    /// Precision and copies under training (`None`: what the weights' precision implies,
    /// [`Recipe::for_weights`]).
    pub recipe: Option<Recipe>,
    /// Under inference, transformers' `generate` of this many new tokens a sequence (the
    /// context is the prompt) instead of llama.cpp's buffers; `None`: llama.cpp.
    pub generate_new_tokens: Option<u64>,
    /// Under `generate_new_tokens`, a PEFT LoRA adapter on the model.
    pub generate_lora: Option<Lora>,
}

/// transformers' assisted generation: the assistant model and its candidates a round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenerateAssistant {
    /// The name it was read under.
    pub name: String,
    /// Its architecture.
    pub arch: ModelArch,
    /// `num_assistant_tokens`.
    pub tokens: u64,
}

/// AdamW, no checkpointing or accumulation, transformers' default attention, one GPU.
impl Default for PytorchRun {
    fn default() -> Self {
        PytorchRun {
            optimizer: Optimizer::Adamw,
            checkpointing: false,
            grad_accum: 1,
            attention: AttnImplementation::default(),
            fsdp: None,
            ddp: None,
            deepspeed: None,
            recipe: None,
            generate_new_tokens: None,
            generate_lora: None,
        }
    }
}
