//! A multimodal projector (`--mmproj`) beside the model: llama-server loads it through mtmd on
//! the first GPU (the CPU without one), its weights and the compute buffer clip reserves at
//! warm-up for one image of the tower's size, and (from b11312) adds both to its fit's margin
//! on that device (`mtmd_get_memory_usage`).

use std::path::PathBuf;

use serde::Serialize;

use super::placement::DeviceUse;
use super::replay::{clip_compute_buffer, BufferRules};
use crate::model::Projector;

/// The compute buffer clip reserves to encode one image with `p` under the CPU backend's
/// rules, with or without flash attention (clip follows llama.cpp's `-fa`); 0 where its graph
/// is not modelled.
pub fn projector_compute(p: &Projector, flash_attention: bool) -> u64 {
    projector_compute_under(p, flash_attention, BufferRules::CPU).unwrap_or(0)
}

/// [`projector_compute`] in a buffer placed by `rules`; `None` where the graph is not modelled.
pub(crate) fn projector_compute_under(
    p: &Projector,
    flash_attention: bool,
    rules: BufferRules,
) -> Option<u64> {
    clip_compute_buffer(p.vision.as_ref()?, flash_attention, rules)
}

/// The projector's share of its device: its weights as the model's, its image buffer as the
/// compute's.
pub(crate) fn projector_use(p: &Projector, flash_attention: bool, rules: BufferRules) -> DeviceUse {
    DeviceUse {
        model: p.bytes,
        context: 0,
        compute: projector_compute_under(p, flash_attention, rules).unwrap_or(0),
    }
}

/// The projector's share of a llama.cpp plan, as the account reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProjectorAccount {
    /// The projector file (`--mmproj`).
    pub path: PathBuf,
    /// `clip.projector_type`, where the file names one.
    pub projector_type: Option<String>,
    /// Its weights' bytes.
    pub weights_bytes: u64,
    /// The compute buffer clip reserves for one image at warm-up; `None` where its graph is
    /// not modelled (then only the weights are kept free).
    pub compute_bytes: Option<u64>,
    /// On the first GPU (else the host).
    pub on_gpu: bool,
}

impl ProjectorAccount {
    pub(crate) fn new(p: &Projector, share: DeviceUse, on_gpu: bool) -> Self {
        ProjectorAccount {
            path: p.path.clone(),
            projector_type: p.vision.as_ref().map(|v| v.kind.name().to_string()),
            weights_bytes: share.model,
            compute_bytes: p.graph_known().then_some(share.compute),
            on_gpu,
        }
    }
}
