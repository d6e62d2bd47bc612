//! llama.cpp on a host's devices: where its layers and tensors go ([`placement`]: each device's
//! model, KV and compute buffers for a layer split, and the `-ngl` fit of one device or several),
//! its fit of a model with routed experts by `-ot` overrides ([`fit`]), the context its fit
//! chooses without `-c` ([`ctx`]), and its plan over a host's GPUs and RAM, or several hosts'
//! through ggml-rpc ([`plan`]).

mod ctx;
mod fit;
mod placement;
mod plan;

pub use ctx::{fit_context, ContextFit};
pub use fit::{fit_moe, fit_moe_from, MoeFit, TensorOverride};
pub use placement::{
    device_uses, fit_devices, fit_devices_from, fit_one_device, layer_devices, one_device, place,
    DeviceBytes, DeviceUse, DevicesFit, Offload,
};
pub use plan::{select_llamacpp, LlamaCppAccount, LlamaCppConfig, FIT_CTX_MIN, FIT_MARGIN};
