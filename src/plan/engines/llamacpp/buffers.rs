//! llama.cpp's compute buffers on its devices: where a model's parts sit, and each backend's
//! share of the prompt graph as ggml's scheduler splits it.

use super::device::{LlamaDevice, UnmeasuredRule};
use super::kv::{kv_cells, kv_row_padding_per_layer};
use super::replay;
use crate::model::ModelArch;
use crate::plan::engines::settings::Settings;

impl LlamaDevice {
    /// The unmeasured rules the figures of `weights` (and a cache of `settings`) rest on here.
    pub fn unmeasured_rules(
        self,
        weights: &crate::model::LayerWeights,
        arch: &ModelArch,
        settings: &Settings,
    ) -> Vec<UnmeasuredRule> {
        let cache_pads = || {
            kv_row_padding_per_layer(arch, settings)
                .iter()
                .any(|&b| b > 0)
        };
        if self == LlamaDevice::Metal {
            vec![UnmeasuredRule::MetalBuffers]
        } else if self.pads_quantized_rows() && (weights.pads_rows() || cache_pads()) {
            vec![UnmeasuredRule::CudaQuantizedRowPadding]
        } else {
            Vec::new()
        }
    }
}

/// llama.cpp's compute buffers when layers from `first_offloaded` on and the output layer run
/// on one device and the rest on the CPU (`-ngl`): the host's and the device's, each its share
/// of the prompt graph as ggml's scheduler splits it (see [`crate::model`]'s replay). `None`
/// where the architecture's graph is not replayed.
pub fn offloaded_compute_buffers(
    arch: &ModelArch,
    s: &Settings,
    weights: Option<&crate::model::LayerWeights>,
    first_offloaded: u64,
) -> Option<(u64, u64)> {
    let layers: Vec<Option<usize>> = (0..=arch.num_layers)
        .map(|l| (l >= first_offloaded).then_some(0))
        .collect();
    let placement = Placement {
        layer_devices: &layers,
        devices: 1,
        pipeline: false,
        moves: &[],
    };
    let b = placed_compute_buffers(arch, s, weights, &placement)?;
    Some((b[0], b[1]))
}

/// Where llama.cpp puts a model's parts: each layer (the output layer last) on
/// `layer_devices` (`None`: the CPU) of `devices` devices; `pipeline` for llama.cpp's pipeline
/// parallelism (every layer offloaded over several devices); `moves` says which layers'
/// feed-forward weights sit elsewhere (`-ot`, `--n-cpu-moe`).
#[derive(Debug, Clone, Copy)]
pub struct Placement<'a> {
    /// Each layer's device, the output layer last (`None`: the CPU).
    pub layer_devices: &'a [Option<usize>],
    /// Devices beside the host.
    pub devices: usize,
    /// llama.cpp's pipeline parallelism.
    pub pipeline: bool,
    /// Feed-forward weights moved off their layer's device.
    pub moves: &'a [crate::model::LayerMove],
}

/// llama.cpp's compute buffers under `placement`: the host's first, then each device's. The
/// `weights`' bytes are what an offloaded op copies to a device that offloads ops (without
/// them, no op is offloaded). `None` where the architecture's graph is not replayed.
pub fn placed_compute_buffers(
    arch: &ModelArch,
    s: &Settings,
    weights: Option<&crate::model::LayerWeights>,
    placement: &Placement<'_>,
) -> Option<Vec<u64>> {
    // A plan's fit and the changes suggested beside it replay the same graph under the same
    // placement many times (more RAM changes nothing on the GPUs): each is replayed once, so
    // the work stays linear in the layers whatever the search around it.
    use std::hash::{Hash as _, Hasher as _};
    thread_local! {
        static REPLAYED: std::cell::RefCell<std::collections::HashMap<u64, Option<Vec<u64>>>> =
            std::cell::RefCell::default();
    }
    const KEPT: usize = 1024;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    format!("{arch:?}|{s:?}|{weights:?}|{placement:?}").hash(&mut h);
    let key = h.finish();
    if let Some(hit) = REPLAYED.with(|m| m.borrow().get(&key).cloned()) {
        return hit;
    }
    let out = replay_placed(arch, s, weights, placement);
    REPLAYED.with(|m| {
        let mut m = m.borrow_mut();
        if m.len() >= KEPT {
            m.clear();
        }
        m.insert(key, out.clone());
    });
    out
}

/// [`placed_compute_buffers`], replayed.
fn replay_placed(
    arch: &ModelArch,
    s: &Settings,
    weights: Option<&crate::model::LayerWeights>,
    placement: &Placement<'_>,
) -> Option<Vec<u64>> {
    let (cells, swa_cells) = kv_cells(arch, s);
    let batch = replay::Batch {
        arch,
        tokens: s.ubatch.min(s.batch.saturating_mul(s.context)).max(1),
        kv_cells: cells,
        swa_cells,
        flash_attention: s.flash_attention,
        kv_type: &s.kv_dtype,
        seqs: s.batch.max(1),
        parallel: s.llamacpp.parallel.max(s.batch).max(1),
        outputs: s.llamacpp.outputs,
    };
    let rpc_rules: Vec<replay::BufferRules> = s.llamacpp.rpc.iter().map(|r| r.rules()).collect();
    let placed = replay::Placed {
        layer_devices: placement.layer_devices,
        devices: placement.devices,
        pipeline: placement.pipeline,
        moves: placement.moves,
        device_rules: s.llamacpp.device.rules(),
        rpc_rules: &rpc_rules,
        // The host's compute buffer is the first device's host buffer type where it has one;
        // an RPC device, always first, has none.
        host_rules: if rpc_rules.is_empty() {
            s.llamacpp.device.host_rules()
        } else {
            replay::BufferRules::CPU
        },
        op_offload: s.llamacpp.device.offloads_ops() && !s.llamacpp.no_op_offload,
        reorders: !s.llamacpp.keep_graph_order,
        weights,
    };
    replay::compute_buffers_placed(&batch, &placed)
}
