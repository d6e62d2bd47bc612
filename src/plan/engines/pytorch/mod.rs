//! PyTorch: a transformers model's training step walked module by module as autograd and the
//! caching allocator run it ([`training`]: one GPU, FSDP2, DDP, DeepSpeed ZeRO), its `generate`
//! ([`generate`]), and the plan of a training step over GPUs ([`select_training`]).

pub mod generate;
mod plan;
pub mod training;

pub use plan::select_training;
