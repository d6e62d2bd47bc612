//! A multimodal projector (`--mmproj`) beside the model: llama-server loads it through mtmd on
//! the first GPU (the CPU without one), its weights and the compute buffer clip reserves at
//! warm-up for one image of the tower's size, and (from b11312) adds both to its fit's margin
//! on that device (`mtmd_get_memory_usage`). A tower of dynamic resolution (Qwen's, Gemma 4's)
//! warms up with a smaller image than it accepts: encoding the largest makes ggml's scheduler
//! grow the buffer, which llama-server's fit never saw; gpumem keeps that larger buffer free.

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

/// The buffer clip holds once it has encoded the largest image the projector accepts (under
/// `--image-max-tokens`, where given), under the CPU backend's rules: the warm-up's where the
/// tower encodes every image at its own size, or where that image is no larger; 0 where the
/// graph is not modelled.
pub fn projector_largest_compute(p: &Projector, flash_attention: bool) -> u64 {
    projector_largest_under(p, flash_attention, BufferRules::CPU).unwrap_or(0)
}

/// [`projector_largest_compute`] in a buffer placed by `rules`. ggml's allocator only grows a
/// buffer, so it is the larger of the warm-up's and the largest image's.
pub(crate) fn projector_largest_under(
    p: &Projector,
    flash_attention: bool,
    rules: BufferRules,
) -> Option<u64> {
    let warmup = projector_compute_under(p, flash_attention, rules)?;
    let largest = p
        .vision
        .as_ref()
        .and_then(|v| v.largest_image(p.image_max_tokens))
        .and_then(|t| clip_compute_buffer(&t, flash_attention, rules));
    Some(largest.map_or(warmup, |b| b.max(warmup)))
}

/// The projector's share of its device: its weights as the model's, the buffer it encodes the
/// largest image in as the compute's.
pub(crate) fn projector_use(p: &Projector, flash_attention: bool, rules: BufferRules) -> DeviceUse {
    DeviceUse {
        model: p.bytes,
        context: 0,
        compute: projector_largest_under(p, flash_attention, rules).unwrap_or(0),
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
    /// The compute buffer clip reserves for one image at warm-up, as llama.cpp prints it at
    /// load and as llama-server's fit counts it; `None` where its graph is not modelled (then
    /// only the weights are kept free).
    pub compute_bytes: Option<u64>,
    /// The buffer once the largest image the projector accepts is encoded (`--image-max-tokens`
    /// where given), which the plan keeps free: larger than `compute_bytes` for a tower of
    /// dynamic resolution, the same for one of fixed size.
    pub largest_image_compute_bytes: Option<u64>,
    /// `--image-max-tokens`, passed on to llama-server.
    pub image_max_tokens: Option<u64>,
    /// On the first GPU (else the host).
    pub on_gpu: bool,
}

impl ProjectorAccount {
    pub(crate) fn new(p: &Projector, share: DeviceUse, warmup: Option<u64>, on_gpu: bool) -> Self {
        let known = p.graph_known();
        ProjectorAccount {
            path: p.path.clone(),
            projector_type: p.vision.as_ref().map(|v| v.kind.name().to_string()),
            weights_bytes: share.model,
            compute_bytes: warmup.filter(|_| known),
            largest_image_compute_bytes: known.then_some(share.compute),
            image_max_tokens: p.image_max_tokens,
            on_gpu,
        }
    }
}
