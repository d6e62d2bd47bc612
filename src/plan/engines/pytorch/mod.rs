//! PyTorch: a transformers model's training step walked module by module as autograd and the
//! caching allocator run it ([`training`]: one GPU, FSDP2, DDP, DeepSpeed ZeRO), its `generate`
//! ([`generate`]), and the plan of a training step over GPUs ([`select_training`]).

pub mod assisted;
pub mod generate;
mod launch;
mod plan;
mod run;
pub mod training;

pub use launch::torchrun;
pub use plan::{select_training, Pytorch};
pub use run::{GenerateAssistant, PytorchRun};

/// The PyTorch modelled, with the libraries its walk follows: torch's autograd and caching
/// allocator, transformers' model classes, deepspeed's ZeRO, as `tools/pytorch-reference/`
/// measures them with MemTracker.
pub const VERSION: super::EngineVersion = super::EngineVersion {
    engine: "PyTorch",
    version: "2.15",
    source: "transformers 5.24, deepspeed 0.19; MemTracker",
};
