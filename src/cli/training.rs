//! The values `estimate --mode train` takes: what it counts, with which recipe, optimizer and
//! attention.

use clap::ValueEnum;

/// Which projections `--recipe lora` adapts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LoraTargets {
    /// Every projection of the layers (PEFT's all-linear).
    AllLinear,
    /// q, k, v and o.
    Attention,
}

/// What `estimate --mode train` keeps per tensor class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Recipe {
    /// Weights, gradients and optimizer state in bf16 (a bf16 checkpoint as loaded).
    Bf16,
    /// f32 weights, gradients and state, the forward under bf16 autocast (HF Trainer's
    /// bf16=True on an f32 model).
    Fp32Autocast,
    /// An f32 master copy computed in bf16: FSDP2's mixed precision (f32 shards gathered in
    /// bf16, gradients reduced in f32), over --fsdp N GPUs or, alone, over one.
    Mixed,
    /// LoRA (PEFT): f32 adapters on the frozen bf16 model (--lora-rank, --lora-targets).
    Lora,
    /// QLoRA (bitsandbytes NF4, PEFT's prepare_model_for_kbit_training): f32 adapters on the
    /// layers frozen in 4 bits, the other weights in f32 (--lora-rank, --lora-targets).
    Qlora,
}

/// Whether `estimate` counts inference or mixed-precision training memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Inference: weights, KV cache, activations.
    Infer,
    /// Mixed-precision training: adds gradients, optimizer states and fp32 master weights.
    Train,
}

/// transformers' attention implementation under training.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AttnImplementationArg {
    /// PyTorch's scaled_dot_product_attention.
    Sdpa,
    /// transformers' eager attention: the scores and their softmax are kept for backward.
    Eager,
}

/// The optimizer whose state `estimate --mode train` counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Optimizer {
    /// Adam: two fp32 moments per parameter.
    Adam,
    /// AdamW: two fp32 moments per parameter.
    Adamw,
    /// SGD with momentum: one fp32 buffer per parameter.
    Sgd,
    /// bitsandbytes' AdamW8bit: two uint8 moments with a f32 scale per 256 (f32 moments for
    /// tensors under 4,096 elements).
    #[value(name = "adamw8bit")]
    Adamw8bit,
    /// transformers' Adafactor as HF Trainer runs it: factored f32 second moments.
    Adafactor,
}
