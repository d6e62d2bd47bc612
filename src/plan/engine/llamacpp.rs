//! llama.cpp's placement of a GGUF over devices, as `llama_model::load_tensors` and the KV
//! cache do it (llama.cpp vendored by llama-cpp-python 0.3.36, `src/llama-model.cpp`):
//!
//! - the input layer (token embeddings) stays on the CPU;
//! - `-ngl N` offloads the last `N` of the layers and the output layer (counted as one more
//!   layer: `N` = layers + 1 offloads everything); the first offloaded index is
//!   `max(layers + 1 − N, 0)`;
//! - over several devices, offloaded layer `il` goes to the first device whose cumulative
//!   share of `--tensor-split` (default: each device's free memory) passes
//!   `(il − first) / offloaded`, in f32 as llama.cpp computes it;
//! - each layer's KV cache lives with its layer (on the host with `-nkvo`).
//!
//! What each device then holds of model and KV-cache bytes is exact. The compute buffers of
//! one device beside the host come from the prompt graph's replay, split as ggml's scheduler
//! splits it (`model::estimate::offloaded_compute_buffers`); several devices are not replayed
//! yet.

use serde::Serialize;

use crate::model::{LayerWeights, ModelArch, Settings};

/// How llama.cpp is told to offload (`-ngl`, `--tensor-split`, `-nkvo`).
#[derive(Debug, Clone, PartialEq)]
pub struct Offload {
    /// `-ngl`: the layers on devices, the output layer counted as one.
    pub n_gpu_layers: u64,
    /// Each device's share (`-ts`), or each device's free memory when not given.
    pub tensor_split: Vec<f32>,
    /// KV cache with its layers (true), or all in host memory (`-nkvo`).
    pub kv_offload: bool,
}

/// Model and KV-cache bytes on one device (or the host).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DeviceBytes {
    /// Weights.
    pub model: u64,
    /// KV cache (and recurrent state).
    pub context: u64,
}

/// Where each layer runs: `Some(device)`, or `None` for the CPU. Index `layers` is the output
/// layer.
pub fn layer_devices(layers: u64, offload: &Offload) -> Vec<Option<usize>> {
    let n_devices = offload.tensor_split.len();
    let first = (layers + 1).saturating_sub(offload.n_gpu_layers);
    let offloaded = if n_devices == 0 {
        0
    } else {
        offload.n_gpu_layers.min(layers + 1)
    };
    let mut splits = Vec::with_capacity(n_devices);
    let mut sum = 0.0f32;
    for s in &offload.tensor_split {
        sum += s;
        splits.push(sum);
    }
    for s in &mut splits {
        *s /= sum;
    }
    (0..=layers)
        .map(|il| {
            if il < first || il - first >= offloaded {
                return None;
            }
            #[expect(
                clippy::cast_precision_loss,
                reason = "llama.cpp divides in f32; layer counts are far below 2^24"
            )]
            let at = (il - first) as f32 / offloaded as f32;
            Some(splits.partition_point(|&s| s <= at).min(n_devices - 1))
        })
        .collect()
}

/// Each device's model and KV-cache bytes, then the host's (the last entry), for `weights`
/// of `arch` served under `settings` with `offload`.
pub fn place(
    weights: &LayerWeights,
    arch: &ModelArch,
    settings: &Settings,
    offload: &Offload,
) -> Vec<DeviceBytes> {
    let n_devices = offload.tensor_split.len();
    let mut out = vec![DeviceBytes::default(); n_devices + 1];
    let host = n_devices;
    let devices = layer_devices(arch.num_layers, offload);
    out[host].model += weights.input;
    let kv = crate::model::estimate::kv_bytes_per_layer(arch, settings);
    for (il, dev) in devices.iter().enumerate() {
        let slot = dev.unwrap_or(host);
        match weights.layers.get(il) {
            Some(bytes) => {
                out[slot].model += bytes;
                let kv_slot = if offload.kv_offload { slot } else { host };
                out[kv_slot].context += kv.get(il).copied().unwrap_or(0);
            }
            None => {
                out[slot].model += weights.output;
                if dev.is_some() {
                    out[slot].model += weights.tied_head;
                }
            }
        }
    }
    out
}

/// One device's (or the host's) share under an `-ngl`: weights, KV cache and compute buffer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DeviceUse {
    /// Weights.
    pub model: u64,
    /// KV cache (and recurrent state).
    pub context: u64,
    /// The compute buffer of the graph's split there.
    pub compute: u64,
}

impl DeviceUse {
    /// Everything.
    pub fn total(&self) -> u64 {
        self.model + self.context + self.compute
    }
}

/// What one device and the host hold with `n_gpu_layers` offloaded to the device, or `None`
/// where the architecture's graph is not replayed.
pub fn one_device(
    weights: &LayerWeights,
    arch: &ModelArch,
    settings: &Settings,
    n_gpu_layers: u64,
) -> Option<(DeviceUse, DeviceUse)> {
    let offload = Offload {
        n_gpu_layers,
        tensor_split: vec![1.0],
        kv_offload: true,
    };
    let placed = place(weights, arch, settings, &offload);
    let first = (arch.num_layers + 1).saturating_sub(n_gpu_layers);
    let (host, device) = crate::model::estimate::offloaded_compute_buffers(arch, settings, first)?;
    let with = |b: DeviceBytes, compute| DeviceUse {
        model: b.model,
        context: b.context,
        compute,
    };
    Some((with(placed[0], device), with(placed[1], host)))
}

/// llama.cpp's choice of `-ngl` for one device (`llama_params_fit` with the context set, as
/// `llama-server --fit` makes it): everything when the device keeps `margin` bytes of its
/// `free` memory with every layer offloaded (`None`: llama.cpp's default, `-ngl -1`), else the
/// most layers, filled from the back with the output layer first, that keep the margin.
pub fn fit_one_device(
    weights: &LayerWeights,
    arch: &ModelArch,
    settings: &Settings,
    free: u64,
    margin: u64,
) -> Option<Option<u64>> {
    let target = free.checked_sub(margin);
    let all = arch.num_layers + 1;
    let fits = |n: u64| -> Option<bool> {
        let (device, _) = one_device(weights, arch, settings, n)?;
        Some(target.is_some_and(|t| device.total() <= t))
    };
    if fits(all)? {
        return Some(None);
    }
    // The device's use grows with every layer it takes, so the most that fit is a bisection.
    let (mut lo, mut hi) = (0, all);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(Some(lo))
}
