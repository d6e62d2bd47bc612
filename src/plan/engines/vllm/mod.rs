//! vLLM 0.33's memory accounting for one tensor-parallel rank, as `gpu_worker.py`
//! (`determine_available_memory`), `utils/mem_utils.py` (`memory_profiling`) and
//! `v1/core/kv_cache_planning.py` compute it:
//!
//! ```text
//! budget   = ceil(total × --gpu-memory-utilization)          (request_memory)
//! KV cache = budget − weights − profile peak − non-torch − CUDA-graph estimate
//! blocks   = KV cache ÷ (block_size tokens × every attention layer's page)
//! tokens   = blocks ÷ blocks one request of max_model_len takes × max_model_len
//! ```
//!
//! The CUDA context, the communicators and cuBLAS's handles are allocated before vLLM's
//! start-up snapshot, so they are outside the budget: they must fit in the rest of the device.
//! The profile peak and the CUDA-graph pool are measured by vLLM at run time; here they are
//! modelled from the architecture ([`super::Basis::Modelled`]).

mod config;
mod defaults;
mod encoder;
mod fit;
pub(crate) mod launch;
mod plan;
mod state;
mod terms;

/// The vLLM modelled: its Python source read (`gpu_worker.py`, `utils/mem_utils.py`,
/// `v1/core/kv_cache_planning.py`), and its public start-up logs as references.
pub const VERSION: super::EngineVersion = super::EngineVersion {
    engine: "vLLM",
    version: "0.33",
    source: "its Python source; public start-up logs",
};

pub use config::{VllmConfig, VllmDtype, VllmGpu, VllmLora, VllmModel, VllmSpeculative};
pub use encoder::{EncoderProfile, Modality, VllmMultimodal, VllmVision, QWEN_MAX_PIXELS};
pub use fit::{
    accepts_tp, fit, kv_of_available, stage_layers, KvOfAvailable, Layout, LayoutRejection,
    Unmodelled, VllmDraft, VllmFit, VllmOutcome,
};
pub use plan::{select_vllm, Vllm};
