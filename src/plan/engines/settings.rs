//! What a model runs as: the request every engine's accounting reads (precision, batch,
//! context, micro-batch, flash attention), with llama.cpp's and PyTorch's own options beside it
//! until each moves into its engine's configuration.

use serde::Serialize;

use super::llamacpp::LlamaDevice;
use super::pytorch::training::{AttnImplementation, Ddp, DeepSpeed, Fsdp, Optimizer, Recipe};
use crate::model::Precision;

/// Whether the estimate counts inference or mixed-precision training memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Weights, KV cache, activation scratch and overhead.
    Infer,
    /// Adds gradients, optimizer state and fp32 master weights.
    Train,
}

/// What the model runs as.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Weight precision (`None`: the file's own, or bf16).
    pub dtype: Option<Precision>,
    /// Precision of the KV cache (llama.cpp's `--cache-type-k/v`).
    pub kv_dtype: Precision,
    /// No precision was asked for the KV cache: llama.cpp takes `kv_dtype` (f16), vLLM its
    /// `--kv-cache-dtype auto`, the model's dtype.
    pub kv_dtype_auto: bool,
    /// Sequences decoded at once; the KV cache grows with it.
    pub batch: u64,
    /// Tokens per sequence the KV cache holds.
    pub context: u64,
    /// Prefill chunk in tokens.
    pub ubatch: u64,
    /// Flash attention: no `heads × context²` score matrix in the activations.
    pub flash_attention: bool,
    /// llama.cpp's `--swa-full`: sliding-window layers cache the whole context (the
    /// llama-cpp-python default) instead of the window plus one micro-batch (llama-server's).
    pub swa_full: bool,
    /// Runtime overhead bytes per device.
    pub overhead: u64,
    /// Extra percentage on weights, KV cache and activations for the pool's fragmentation.
    pub fragmentation_reserve: f64,
    /// Inference or training.
    pub mode: Mode,
    /// Whose state is counted under training; ignored for inference.
    pub optimizer: Optimizer,
    /// Keep only layer inputs under training (recompute the rest); ignored for inference.
    pub checkpointing: bool,
    /// Micro-batches a training step accumulates gradients over (1: none); ignored for
    /// inference.
    pub grad_accum: u64,
    /// transformers' attention implementation under training; ignored for inference.
    pub attention: AttnImplementation,
    /// FSDP2 sharding under training: the figures are then one rank's.
    pub fsdp: Option<Fsdp>,
    /// DistributedDataParallel under training: one rank's figures, its gradient buckets in.
    pub ddp: Option<Ddp>,
    /// DeepSpeed's ZeRO-2 under training: one rank's figures.
    pub deepspeed: Option<DeepSpeed>,
    /// Precision and copies under training (`None`: what the weights' precision implies,
    /// [`Recipe::for_weights`]); ignored for inference.
    pub recipe: Option<Recipe>,
    /// Under inference, transformers' `generate` of this many new tokens a sequence (the
    /// context is the prompt) instead of llama.cpp's buffers; `None`: llama.cpp.
    pub generate_new_tokens: Option<u64>,
    /// Rows of logits llama.cpp reserves a micro-batch for (`n_outputs_max`): `llama-server`
    /// keeps one a sequence (its `-np`); `None`: every token, as llama.cpp's library and
    /// `llama-fit-params` do.
    pub llamacpp_outputs: Option<u64>,
    /// The ggml backend llama.cpp's GPUs run, for how their compute buffers place tensors.
    pub llamacpp_device: LlamaDevice,
    /// llama.cpp's first devices, reached through ggml-rpc (`--rpc`; none: every device is
    /// local), by the backend behind each `rpc-server`: each follows that backend's buffer
    /// rules (ggml-rpc asks the remote for alignment and allocation sizes) but runs every op,
    /// reorders nothing and takes no op on a host weight.
    pub llamacpp_rpc: Vec<LlamaDevice>,
    /// `--no-op-offload`: a device that offloads ops takes none (llama.cpp's `op_offload`
    /// context parameter off).
    pub llamacpp_no_op_offload: bool,
    /// `GGML_VK_DISABLE_GRAPH_OPTIMIZE`, `GGML_METAL_GRAPH_OPTIMIZE_DISABLE`: ggml-vulkan and
    /// ggml-metal allocate each split in llama.cpp's graph order instead of reordering it first.
    pub llamacpp_keep_graph_order: bool,
}

impl Settings {
    /// Inference of one sequence of `context` tokens with a `kv_dtype` cache, and nothing added:
    /// micro-batches of 512, no flash attention, no overhead or reserve. Override fields with
    /// struct update syntax.
    pub fn inference(context: u64, kv_dtype: Precision) -> Self {
        Settings {
            dtype: None,
            kv_dtype,
            kv_dtype_auto: false,
            batch: 1,
            context,
            ubatch: 512,
            flash_attention: false,
            swa_full: false,
            overhead: 0,
            fragmentation_reserve: 0.0,
            mode: Mode::Infer,
            optimizer: Optimizer::Adamw,
            checkpointing: false,
            grad_accum: 1,
            attention: Default::default(),
            recipe: None,
            fsdp: None,
            ddp: None,
            deepspeed: None,
            generate_new_tokens: None,
            llamacpp_outputs: None,
            llamacpp_device: LlamaDevice::CpuRules,
            llamacpp_rpc: Vec::new(),
            llamacpp_no_op_offload: false,
            llamacpp_keep_graph_order: false,
        }
    }
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
