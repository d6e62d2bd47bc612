//! LoRA adapters beside the model (`llama-server --lora FILE`): llama.cpp loads each factor
//! into the buffer type of the matrix it adapts (`llama_adapter_lora_init`), so an adapter's
//! bytes follow the model's placement, layer by layer and override by override. llama.cpp's
//! own fit (`common_fit_params`) runs before the adapters are loaded and does not count them;
//! the plan does, by fitting the model's weights with the adapters' beside them.

use std::path::PathBuf;

use serde::Serialize;

use super::placement::{device_uses, on_cpu, Offload};
use crate::model::{FfnBytes, LayerWeights, ModelArch};
use crate::plan::engines::Settings;

/// The weights llama.cpp loads: the model's, with every adapter's factors beside their
/// matrices.
pub(crate) fn adapted(
    weights: LayerWeights,
    adapters: &[crate::model::LoraAdapter],
) -> LayerWeights {
    adapters.iter().fold(weights, LayerWeights::with_adapter)
}

/// The adapters' factors alone, placed as `weights` would place them: what each device's
/// LoRA buffers hold.
fn adapters_alone(
    weights: &LayerWeights,
    adapters: &[crate::model::LoraAdapter],
) -> Option<LayerWeights> {
    if adapters.is_empty() {
        return None;
    }
    let n = weights.layers.len();
    let empty = LayerWeights {
        input: 0,
        output: 0,
        tied_head: 0,
        layers: vec![0; n],
        experts: vec![0; n],
        ffn: vec![FfnBytes::default(); n],
        tensors: Default::default(),
        matrix_rate: weights.matrix_rate,
        alignment: weights.alignment,
        row_padding: Default::default(),
    };
    Some(adapted(empty, adapters))
}

/// Each GPU's LoRA bytes, then the host's, under `offload`; `None` without an adapter.
pub(crate) fn lora_share(
    weights: &LayerWeights,
    adapters: &[crate::model::LoraAdapter],
    (arch, s): (&ModelArch, &Settings),
    offload: Option<&Offload>,
) -> Option<Vec<u64>> {
    let alone = adapters_alone(weights, adapters)?;
    let uses = match offload {
        Some(o) => device_uses(&alone, arch, s, o)?,
        None => vec![on_cpu(&alone, arch, s)?],
    };
    Some(uses.iter().map(|u| u.model).collect())
}

/// The adapters' share of a llama.cpp plan, as the account reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoraAccount {
    /// The adapter files (`--lora`), in order.
    pub files: Vec<PathBuf>,
    /// Each GPU's LoRA buffers, in the order of the account's devices.
    pub devices_bytes: Vec<u64>,
    /// The host's.
    pub host_bytes: u64,
    /// llama.cpp's own fit counts them (it does not: it runs before they are loaded).
    pub counted_by_llamacpp_fit: bool,
}

impl LoraAccount {
    pub(crate) fn new(adapters: &[crate::model::LoraAdapter], share: &[u64]) -> Self {
        let (host, devices) = share.split_last().map_or((0, &[][..]), |(h, d)| (*h, d));
        LoraAccount {
            files: adapters.iter().map(|a| a.path.clone()).collect(),
            devices_bytes: devices.to_vec(),
            host_bytes: host,
            counted_by_llamacpp_fit: false,
        }
    }
}
