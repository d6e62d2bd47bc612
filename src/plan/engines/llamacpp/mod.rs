//! llama.cpp on a host's devices: where its layers and tensors go (`placement.rs`: each device's
//! model, KV and compute buffers for a layer split, and the `-ngl` fit of one device or several),
//! its fit of a model with routed experts by `-ot` overrides (`fit.rs`), the context its fit
//! chooses without `-c` (`ctx.rs`), and its plan over a host's GPUs and RAM, or several hosts'
//! through ggml-rpc (`plan.rs`).

pub(crate) mod activations;
mod buffers;
mod ctx;
pub(crate) mod device;
mod draft;
mod fit;
pub(crate) mod kv;
pub(crate) mod launch;
mod lora;
mod placement;
mod plan;
mod projector;
pub(crate) mod replay;
mod run;
mod stages;

/// The llama.cpp modelled: the one llama-cpp-python 0.3.36 vendors, which
/// `tools/llamacpp-reference/` builds and measures.
pub const VERSION: super::EngineVersion = super::EngineVersion {
    engine: "llama.cpp",
    version: "b11312",
    source: "vendored by llama-cpp-python 0.3.36",
};

pub use activations::{inference_activations, output_row_floats};
pub use buffers::{offloaded_compute_buffers, placed_compute_buffers, Placement};
pub use device::{LlamaDevice, RulesBasis, UnmeasuredRule};
pub use kv::{kv_bytes_per_layer, kv_row_padding_per_layer, KV_CELL_PAD};
pub use lora::LoraAccount;
pub use projector::{projector_compute, projector_largest_compute, ProjectorAccount};
pub use run::LlamaCppRun;

pub use ctx::{fit_context, ContextFit, Extra};
pub use draft::{DraftAccount, DraftRef, LlamaCppDraft, DEFAULT_N_MAX as DEFAULT_DRAFT_N_MAX};
pub use fit::{fit_moe, fit_moe_from, MoeFit, TensorOverride};
pub use placement::{
    device_uses, fit_devices, fit_devices_from, fit_one_device, layer_devices, one_device, place,
    DeviceBytes, DeviceUse, DevicesFit, Offload,
};
pub use plan::{
    select_llamacpp, LlamaCpp, LlamaCppAccount, LlamaCppConfig, FIT_CTX_MIN, FIT_MARGIN,
};
