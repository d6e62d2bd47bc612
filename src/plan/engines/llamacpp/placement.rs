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
//! splits it (`plan::engines::llamacpp::offloaded_compute_buffers`); several devices are not replayed
//! yet.

use serde::Serialize;

use crate::model::{LayerMove, LayerWeights, ModelArch};
use crate::plan::engines::Settings;

/// How llama.cpp is told to offload (`-ngl`, `--tensor-split`, `-nkvo`).
#[derive(Debug, Clone, PartialEq)]
pub struct Offload {
    /// `-ngl`: the layers on devices, the output layer counted as one.
    pub n_gpu_layers: u64,
    /// Each device's share (`-ts`), or each device's free memory when not given.
    pub tensor_split: Vec<f32>,
    /// KV cache with its layers (true), or all in host memory (`-nkvo`).
    pub kv_offload: bool,
    /// Each layer's feed-forward weights moved off its device (`-ot`; `--n-cpu-moe N` moves
    /// the first `N` layers' experts to the CPU: [`LayerMove::cpu_moe`]).
    pub moves: Vec<LayerMove>,
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
    let kv = super::kv::kv_bytes_per_layer(arch, settings);
    let kv_pad = super::kv::kv_row_padding_per_layer(arch, settings);
    for (il, dev) in devices.iter().enumerate() {
        let slot = dev.unwrap_or(host);
        // Each device's buffers align (and pad) tensors their own way, and an RPC device takes
        // any tensor; the counts are the CPU's.
        let (rules, rpc) = dev.map_or((None, false), |d| {
            let (r, rpc) = settings.llamacpp.device_at(d);
            (Some(r), rpc)
        });
        let align = rules.map_or(32, |r| r.weight_alignment());
        let pad_rows = rules.is_some_and(|r| r.pads_quantized_rows());
        let limit = rules.and_then(|r| r.tensor_limit()).filter(|_| !rpc);
        let realigned = |layer: Option<usize>, b: u64| {
            b.saturating_add_signed(weights.realigned(layer, align, pad_rows))
        };
        // What a device cannot run an op on stays in host memory.
        let beyond = |prefix: &str| match limit {
            Some(most) => beyond_limit(weights, prefix, most),
            None => 0,
        };
        match weights.layers.get(il) {
            Some(bytes) => {
                let moved = LayerMove::of(&offload.moves, il as u64);
                let ffn = weights.ffn.get(il).copied().unwrap_or_default();
                let kept = moved.what.bytes(&ffn);
                // (A layer with moved weights is placed as the moves say.)
                let too_big = if kept == 0 {
                    beyond(&format!("blk.{il}."))
                } else {
                    0
                };
                let bytes = if dev.is_some() && kept == 0 && too_big == 0 {
                    realigned(Some(il), *bytes)
                } else {
                    *bytes
                };
                out[slot].model += bytes.saturating_sub(kept).saturating_sub(too_big);
                out[host].model += too_big;
                out[moved.to.unwrap_or(host)].model += kept;
                let kv_slot = if offload.kv_offload { slot } else { host };
                // Only a device's cache takes its buffers' padding; the host's is the CPU's.
                let padded = if kv_slot == host || !pad_rows {
                    0
                } else {
                    kv_pad.get(il).copied().unwrap_or(0)
                };
                out[kv_slot].context += kv.get(il).copied().unwrap_or(0) + padded;
            }
            None => {
                let head = weights.weight_bytes(
                    None,
                    "output.weight",
                    arch.hidden_size.saturating_mul(arch.vocab_size),
                    true,
                );
                let head_too_big = dev.is_some() && limit.is_some_and(|most| head > most);
                // An untied head stays in host memory; a tied one is not loaded again (the
                // CPU reads the embeddings' own bytes).
                let too_big = if head_too_big && weights.tied_head == 0 {
                    weights.output.min(head)
                } else {
                    0
                };
                let output = if dev.is_some() && too_big == 0 {
                    realigned(None, weights.output)
                } else {
                    weights.output
                };
                out[slot].model += output - too_big;
                out[host].model += too_big;
                // An encoder has no head reading the token embeddings.
                if dev.is_some() && arch.encoder.is_none() && !head_too_big {
                    out[slot].model += weights
                        .tied_head
                        .saturating_add_signed(weights.realigned_tied_head(align, pad_rows));
                }
            }
        }
    }
    out
}

/// Bytes of the weights named from `prefix` on (`blk.N.`) that span more than `most` bytes: ggml-vulkan runs no op on them, so llama.cpp loads them into host memory.
fn beyond_limit(weights: &LayerWeights, prefix: &str, most: u64) -> u64 {
    weights
        .tensors
        .range(prefix.to_string()..)
        .take_while(|(name, _)| name.starts_with(prefix))
        .map(|(_, &bytes)| bytes)
        .filter(|&bytes| bytes > most)
        .sum()
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

/// What the host holds with no device (`-ngl 0`, and no device to take an operator): the
/// weights, the KV cache and the CPU backend's compute buffer; `None` where the graph is not
/// replayed.
pub(super) fn on_cpu(weights: &LayerWeights, arch: &ModelArch, s: &Settings) -> Option<DeviceUse> {
    let offload = Offload {
        n_gpu_layers: 0,
        tensor_split: Vec::new(),
        kv_offload: true,
        moves: Vec::new(),
    };
    let bytes = *place(weights, arch, s, &offload).last()?;
    let layers = vec![None; usize::try_from(arch.num_layers).ok()? + 1];
    let on_cpu = super::buffers::Placement {
        layer_devices: &layers,
        devices: 0,
        pipeline: false,
        moves: &[],
    };
    let compute = super::buffers::placed_compute_buffers(arch, s, Some(weights), &on_cpu)?;
    Some(DeviceUse {
        model: bytes.model,
        context: bytes.context,
        compute: *compute.first()?,
    })
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
        moves: Vec::new(),
    };
    let placed = place(weights, arch, settings, &offload);
    let first = (arch.num_layers + 1).saturating_sub(n_gpu_layers);
    let (host, device) =
        super::buffers::offloaded_compute_buffers(arch, settings, Some(weights), first)?;
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

/// What each device (in order) and then the host hold under `offload`: its model and KV bytes
/// as [`place`] puts them, and its compute buffer with the graph split as llama.cpp's
/// scheduler splits it (pipeline parallel when every layer is on several devices). `None`
/// where the architecture's graph is not replayed.
pub fn device_uses(
    weights: &LayerWeights,
    arch: &ModelArch,
    settings: &Settings,
    offload: &Offload,
) -> Option<Vec<DeviceUse>> {
    let n = offload.tensor_split.len();
    let placed = place(weights, arch, settings, offload);
    let layers = layer_devices(arch.num_layers, offload);
    // llama.cpp pipelines several devices only when every layer is on them, the KV cache too,
    // and no tensor is overridden.
    let pipeline = n > 1
        && offload.n_gpu_layers > arch.num_layers
        && offload.kv_offload
        && offload
            .moves
            .iter()
            .all(|m| m.what == crate::model::FfnMove::Nothing);
    let placement = super::buffers::Placement {
        layer_devices: &layers,
        devices: n,
        pipeline,
        moves: &offload.moves,
    };
    let compute =
        super::buffers::placed_compute_buffers(arch, settings, Some(weights), &placement)?;
    Some(
        placed
            .iter()
            .enumerate()
            .map(|(i, b)| DeviceUse {
                model: b.model,
                context: b.context,
                // The replay lists the host first.
                compute: if i < n { compute[i + 1] } else { compute[0] },
            })
            .collect(),
    )
}

/// llama.cpp's choice for several devices (`llama_params_fit` with the context set): its
/// defaults (`-ngl -1`, layers split by free memory) when every device keeps its margin
/// (`margins`, llama.cpp's `-fitt`, one a device) of its `free` memory; else devices filled
/// from the last to the first, each with the most layers that keep its margin given those
/// after it, the output layer on the last (`-ngl` their sum,
/// `-ts` each device's layers).
pub fn fit_devices(
    weights: &LayerWeights,
    arch: &ModelArch,
    settings: &Settings,
    free: &[u64],
    margins: &[u64],
) -> Option<DevicesFit> {
    fit_devices_from(weights, arch, settings, free, margins, true)
}

/// [`fit_devices`], with llama.cpp's first check of its defaults made only when
/// `check_defaults`: after its context fit (`super::ctx`) llama.cpp goes straight to
/// filling the devices.
pub fn fit_devices_from(
    weights: &LayerWeights,
    arch: &ModelArch,
    settings: &Settings,
    free: &[u64],
    margins: &[u64],
    check_defaults: bool,
) -> Option<DevicesFit> {
    let margin = |id: usize| margins.get(id).copied().unwrap_or(0);
    let all = arch.num_layers + 1;
    #[expect(
        clippy::cast_precision_loss,
        reason = "llama.cpp splits by free memory in f32"
    )]
    let by_free = Offload {
        n_gpu_layers: all,
        tensor_split: free.iter().map(|&f| f as f32).collect(),
        kv_offload: true,
        moves: Vec::new(),
    };
    let uses = device_uses(weights, arch, settings, &by_free)?;
    if check_defaults
        && free
            .iter()
            .zip(&uses)
            .enumerate()
            .all(|(id, (&f, u))| f >= u.total().saturating_add(margin(id)))
    {
        return Some(DevicesFit {
            n_gpu_layers: None,
            tensor_split: None,
        });
    }
    let target = |id: usize| free[id].checked_sub(margin(id));
    let use_of = |layers: &[u64], id: usize| -> Option<u64> {
        #[expect(clippy::cast_precision_loss, reason = "layer counts, far below 2^24")]
        let offload = Offload {
            n_gpu_layers: layers.iter().sum(),
            tensor_split: layers.iter().map(|&n| n as f32).collect(),
            kv_offload: true,
            moves: Vec::new(),
        };
        Some(device_uses(weights, arch, settings, &offload)?[id].total())
    };
    let fits = |layers: &[u64], id: usize| -> Option<bool> {
        Some(target(id).is_some_and(|t| use_of(layers, id).is_some_and(|u| u <= t)))
    };
    let mut layers = vec![0u64; free.len()];
    for id in (0..free.len()).rev() {
        let unassigned = all - layers[id + 1..].iter().sum::<u64>();
        let mut high = layers.clone();
        high[id] = unassigned;
        if unassigned == 0 {
            continue;
        }
        if fits(&high, id)? {
            layers = high;
            continue;
        }
        let (mut lo, mut hi) = (layers[id], unassigned);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            let mut test = layers.clone();
            test[id] = mid;
            if fits(&test, id)? {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        layers[id] = lo;
    }
    Some(DevicesFit {
        n_gpu_layers: Some(layers.iter().sum()),
        tensor_split: (free.len() > 1).then_some(layers),
    })
}

/// llama.cpp's fitted arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DevicesFit {
    /// `-ngl` (`None`: its default, every layer).
    pub n_gpu_layers: Option<u64>,
    /// `-ts`, each device's layers (`None`: its default split, by free memory).
    pub tensor_split: Option<Vec<u64>>,
}
