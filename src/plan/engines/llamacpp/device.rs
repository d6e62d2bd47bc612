//! The ggml backend llama.cpp runs a device with, as far as its buffers differ, and how far
//! each backend's rules were measured.

use serde::Serialize;

use super::replay::BufferRules;

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
    /// [`super::LlamaCppRun::keep_graph_order`]).
    Metal,
    /// ggml-vulkan on a device of these limits: its offset alignment, buffers of at most 1 GiB,
    /// operator offload as ggml-cuda's, no op on a tensor beyond its storage range (such ops,
    /// and the weights they read, stay on the CPU), and each split's nodes reordered before
    /// they are allocated (unless [`super::LlamaCppRun::keep_graph_order`]).
    Vulkan(crate::device::VulkanLimits),
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

    /// Whether the device's buffers pad each quantized tensor's rows
    /// (`cuda_row_padding`: ggml-cuda's, read from its source).
    pub fn pads_quantized_rows(self) -> bool {
        self.rules().quantized_rows
    }

    pub(crate) fn rules(self) -> BufferRules {
        match self {
            LlamaDevice::CpuRules | LlamaDevice::CpuRulesOffload => BufferRules::CPU,
            LlamaDevice::Cuda => BufferRules::CUDA,
            LlamaDevice::Vulkan(l) => BufferRules::vulkan(&l),
            LlamaDevice::Metal => BufferRules::METAL,
        }
    }

    /// How the host's compute buffer is laid out: in the first device's pinned host memory
    /// where its backend has one with rules of its own (ggml-vulkan's), else as the CPU's.
    pub(crate) fn host_rules(self) -> BufferRules {
        match self {
            LlamaDevice::Vulkan(l) => BufferRules::vulkan_host(&l),
            _ => BufferRules::CPU,
        }
    }
}
