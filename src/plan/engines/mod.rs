//! Engines' own memory accounting: each engine turns the model's parts, a device and a parallel
//! layout into the bytes it takes per device, term by term, and into what it can serve — by its
//! own fit rule, with no generic reserve stacked on top.
//!
//! Every term says how it was obtained ([`Basis`]): computed as the engine computes it, or
//! modelled from the architecture where the engine measures it at run time (vLLM's profile run,
//! its CUDA-graph capture). [`vllm`] is vLLM 0.33's accounting; llama.cpp on GPUs and PyTorch
//! training plug in beside it as further modules of this room.

pub mod breakdown;
mod contract;
pub mod estimate;
pub mod llamacpp;
pub mod ollama;
pub mod pytorch;
pub mod settings;
pub mod sglang;
pub mod speculative;
pub mod vllm;

pub use breakdown::{ActivationsBasis, Breakdown, EstimateOverflow, TrainingBytes, TrainingStep};
pub use contract::{EnginePlanner, Planned};
pub use settings::{Mode, Settings};

pub use llamacpp::{
    select_llamacpp, LlamaCpp, LlamaCppAccount, LlamaCppConfig, FIT_CTX_MIN, FIT_MARGIN,
};
pub use ollama::Ollama;
pub use pytorch::{select_training, Pytorch};
pub use sglang::Sglang;
pub use vllm::{select_vllm, Vllm};

use serde::Serialize;

/// A release of an engine whose rules gpumem repeats: every figure an engine's room gives is that
/// release's, and each room names its own in one constant (`VERSION`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EngineVersion {
    /// The engine, as its users name it.
    pub engine: &'static str,
    /// The release modelled.
    pub version: &'static str,
    /// Where its source was read (and its references measured).
    pub source: &'static str,
}

/// Every engine modelled, and its release: what `gpumem --version --verbose` lists.
pub const MODELLED: [EngineVersion; 5] = [
    llamacpp::VERSION,
    vllm::VERSION,
    sglang::VERSION,
    ollama::VERSION,
    pytorch::VERSION,
];

/// How an engine's term was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// Computed by the engine's own arithmetic, which gpumem repeats.
    Computed,
    /// Measured by the engine at run time; gpumem models it from the architecture.
    Modelled,
}

/// One line of an engine's accounting on one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Term {
    /// What it is.
    pub term: TermKind,
    /// Bytes on one device (one rank).
    pub bytes: u64,
    /// Computed or modelled.
    pub basis: Basis,
}

/// The parts an engine's accounting names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TermKind {
    /// What the engine may use: vLLM's `total × --gpu-memory-utilization`.
    Budget,
    /// Weights held by one rank.
    Weights,
    /// Of the rank's layers' weights, what `--cpu-offload-gb` keeps in pinned host memory
    /// (read over UVA); the weights term is net of it.
    CpuOffload,
    /// The transient peak of vLLM's profile run (forward at `max_num_batched_tokens` and the
    /// sampler over `max_num_seqs`).
    ProfilePeak,
    /// Memory outside PyTorch allocated after vLLM's start-up snapshot.
    NonTorch,
    /// vLLM's estimate of its CUDA-graph pool.
    CudaGraphs,
    /// What is left for KV-cache blocks.
    KvCache,
    /// Taken before the engine's budget starts (CUDA context, communicator and cuBLAS
    /// buffers): it must fit in the part of the device outside the budget.
    Startup,
}
