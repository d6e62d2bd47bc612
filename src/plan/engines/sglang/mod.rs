//! SGLang 0.5.23's memory accounting for one tensor-parallel rank, as its scheduler sizes the KV
//! pool (`mem_cache/kv_cache_configurator.py`, `model_executor/pool_configurator.py`) with the
//! defaults its argument hooks pick by GPU (`arg_groups/memory_hook.py`):
//!
//! ```text
//! f        = --mem-fraction-static, else round((G − reserve) / G, 3)   G: nvidia-smi MiB
//! P        = free memory once the CUDA context and communicators exist (min over ranks)
//! pool     = P × f − weights                                        (rest ≤ 0: refused)
//! tokens   = ⌊pool ÷ bytes a token⌋, at most --max-total-tokens     (max_total_num_tokens)
//! ```
//!
//! CUDA graphs, activations and the request table are not allocated up front: they live in the
//! `P × (1 − f)` left out, which the default fraction sizes for them. The CUDA context is outside
//! both: `P` is measured after it.

mod config;
mod fit;
pub(crate) mod launch;
mod plan;
mod speculative;

/// The SGLang modelled: its Python source read (the wheel of 0.5.23), and public start-up logs
/// as references.
pub const VERSION: super::EngineVersion = super::EngineVersion {
    engine: "SGLang",
    version: "0.5.23",
    source: "its Python source; public start-up logs",
};

pub use config::{default_fraction, ServeDefaults, SglangRun};
pub use fit::{cell_bytes, fit, SglangFit, SglangGpu, SglangOutcome};
pub use plan::Sglang;
pub use speculative::{Draft, SpecAlgorithm};
