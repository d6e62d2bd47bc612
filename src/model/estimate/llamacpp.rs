//! llama.cpp's compute buffers on its devices: which ggml backend runs a GPU, where a model's
//! parts sit, and each backend's share of the prompt graph as ggml's scheduler splits it.

use serde::Serialize;

use super::{kv_cells, ModelArch, Settings};

/// The ggml backend llama.cpp runs a GPU with, as far as its buffers differ (read from
/// ggml-cuda, ggml-vulkan and ggml-cpu in the llama.cpp llama-cpp-python 0.3.36 vendors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LlamaDevice {
    /// The CPU backend's buffers (32-byte alignment): the CPU itself, or an `rpc-server`
    /// lending one, as the references in `tests/fixtures/` were measured.
    CpuRules,
    /// ggml-cuda (CUDA, and ROCm through HIP): 128-byte alignment, flash attention's output
    /// holding f16 copies of a K and V cache of another type, and operator offload (an op of
    /// 32 rows or more on a weight in host memory runs on the first GPU, the weight copied).
    Cuda,
    /// An `rpc-server` device whose client offloads ops as ggml-cuda does: the CPU's buffers
    /// with CUDA's operator offload, as `tools/llamacpp-reference` measures that offload
    /// without a GPU (ggml-rpc itself offloads nothing).
    CpuRulesOffload,
    /// ggml-metal (Apple silicon), with rules read from its source: the CPU's 32-byte
    /// alignment, scratch beside flash attention (K and V in f16 among it, whatever the
    /// cache's type), expert products and argsorts, its fused kernels' inputs kept to their
    /// end, flash attention for its head sizes, operator offload of matrix products only, and
    /// each split reordered for concurrency before it is allocated (unless
    /// [`super::Settings::llamacpp_keep_graph_order`]).
    Metal,
    /// ggml-vulkan on a device of these limits: its offset alignment, buffers of at most 1 GiB,
    /// operator offload as ggml-cuda's, no op on a tensor beyond its storage range (such ops,
    /// and the weights they read, stay on the CPU), and each split's nodes reordered before
    /// they are allocated (unless [`super::Settings::llamacpp_keep_graph_order`]).
    Vulkan(crate::device::VulkanLimits),
}

impl Settings {
    /// The backend whose buffer rules llama.cpp's device `d` follows, and whether llama.cpp
    /// reaches it through ggml-rpc ([`Settings::llamacpp_rpc`]).
    pub fn llamacpp_device_at(&self, d: usize) -> (LlamaDevice, bool) {
        match self.llamacpp_rpc.get(d) {
            Some(&remote) => (remote, true),
            None => (self.llamacpp_device, false),
        }
    }
}

/// Where a device's buffer rules come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RulesBasis {
    /// Measured against llama.cpp on an rpc-server device, on ggml-vulkan over Mesa's lavapipe,
    /// or on ggml-cuda on an H200 (`tests/fixtures/llamacpp-devices/`).
    Measured,
    /// Read from the backend's source and not measured on its hardware (ggml-metal's; ggml-cuda's
    /// were, until a lent GPU measured them).
    FromSource,
}

/// A buffer rule a device's figures follow that was read from the backend's source and not
/// measured on its hardware.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UnmeasuredRule {
    /// ggml-cuda's padding of a quantized tensor's rows to 512 values (`MATRIX_ROW_PADDING`,
    /// `get_alloc_size`): none of the H200's records had such a tensor.
    CudaQuantizedRowPadding,
    /// ggml-metal's buffers (`get_alloc_size`, its allocation dependencies, `supports_op`,
    /// `offload_op`): no Apple GPU reaches this project. Its reordering of each split is
    /// replayed and matched llama.cpp's printed buffers on Apple GPUs, with builds that had no
    /// allocation dependencies yet.
    MetalBuffers,
}

/// Serialized by name (`cuda`, `cpu-rules`, `cpu-rules-offload`, `vulkan`); a Vulkan device's
/// limits are reported beside it.
impl Serialize for LlamaDevice {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl LlamaDevice {
    /// The rules' name, as `--llamacpp-device` spells it.
    pub fn name(self) -> &'static str {
        match self {
            LlamaDevice::CpuRules => "cpu-rules",
            LlamaDevice::Cuda => "cuda",
            LlamaDevice::CpuRulesOffload => "cpu-rules-offload",
            LlamaDevice::Vulkan(_) => "vulkan",
            LlamaDevice::Metal => "metal",
        }
    }

    /// A Vulkan device's limits the rules follow.
    pub fn vulkan_limits(self) -> Option<crate::device::VulkanLimits> {
        match self {
            LlamaDevice::Vulkan(l) => Some(l),
            _ => None,
        }
    }

    /// How far the device's rules were measured.
    pub fn basis(self) -> RulesBasis {
        match self {
            LlamaDevice::CpuRules
            | LlamaDevice::CpuRulesOffload
            | LlamaDevice::Vulkan(_)
            | LlamaDevice::Cuda => RulesBasis::Measured,
            LlamaDevice::Metal => RulesBasis::FromSource,
        }
    }

    /// Whether the device runs ops on the host's weights (`offload_op`).
    pub fn offloads_ops(self) -> bool {
        matches!(
            self,
            LlamaDevice::Cuda
                | LlamaDevice::CpuRulesOffload
                | LlamaDevice::Vulkan(_)
                | LlamaDevice::Metal
        )
    }

    /// The most bytes a tensor an op reads or writes may span for the device to run the op.
    pub fn tensor_limit(self) -> Option<u64> {
        self.rules().tensor_limit
    }

    /// Each tensor's alignment in the device's buffers (`get_alignment`).
    pub fn weight_alignment(self) -> u64 {
        self.rules().alignment
    }

    /// The unmeasured rules the figures of `weights` (and a cache of `settings`) rest on here.
    pub fn unmeasured_rules(
        self,
        weights: &crate::model::LayerWeights,
        arch: &ModelArch,
        settings: &Settings,
    ) -> Vec<UnmeasuredRule> {
        let cache_pads = || {
            super::kv_row_padding_per_layer(arch, settings)
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

    /// Whether the device's buffers pad each quantized tensor's rows
    /// (`cuda_row_padding`: ggml-cuda's, read from its source).
    pub fn pads_quantized_rows(self) -> bool {
        self.rules().quantized_rows
    }

    pub(crate) fn rules(self) -> crate::model::replay::BufferRules {
        match self {
            LlamaDevice::CpuRules | LlamaDevice::CpuRulesOffload => {
                crate::model::replay::BufferRules::CPU
            }
            LlamaDevice::Cuda => crate::model::replay::BufferRules::CUDA,
            LlamaDevice::Vulkan(l) => crate::model::replay::BufferRules::vulkan(&l),
            LlamaDevice::Metal => crate::model::replay::BufferRules::METAL,
        }
    }

    /// How the host's compute buffer is laid out: in the first device's pinned host memory
    /// where its backend has one with rules of its own (ggml-vulkan's), else as the CPU's.
    fn host_rules(self) -> crate::model::replay::BufferRules {
        match self {
            LlamaDevice::Vulkan(l) => crate::model::replay::BufferRules::vulkan_host(&l),
            _ => crate::model::replay::BufferRules::CPU,
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
    let (cells, swa_cells) = kv_cells(arch, s);
    let batch = crate::model::replay::Batch {
        arch,
        tokens: s.ubatch.min(s.batch.saturating_mul(s.context)).max(1),
        kv_cells: cells,
        swa_cells,
        flash_attention: s.flash_attention,
        kv_type: &s.kv_dtype,
        seqs: s.batch.max(1),
        outputs: s.llamacpp_outputs,
    };
    let rpc_rules: Vec<crate::model::replay::BufferRules> =
        s.llamacpp_rpc.iter().map(|r| r.rules()).collect();
    let placed = crate::model::replay::Placed {
        layer_devices: placement.layer_devices,
        devices: placement.devices,
        pipeline: placement.pipeline,
        moves: placement.moves,
        device_rules: s.llamacpp_device.rules(),
        rpc_rules: &rpc_rules,
        // The host's compute buffer is the first device's host buffer type where it has one;
        // an RPC device, always first, has none.
        host_rules: if rpc_rules.is_empty() {
            s.llamacpp_device.host_rules()
        } else {
            crate::model::replay::BufferRules::CPU
        },
        op_offload: s.llamacpp_device.offloads_ops() && !s.llamacpp_no_op_offload,
        reorders: !s.llamacpp_keep_graph_order,
        weights,
    };
    crate::model::replay::compute_buffers_placed(&batch, &placed)
}
