//! How llama.cpp runs an estimate beyond the request every engine reads: the backend whose
//! buffer rules its devices follow, the devices it reaches through ggml-rpc, the rows of logits
//! it reserves, operator offload, graph order and `--swa-full`.

use super::device::LlamaDevice;

/// llama.cpp's own settings for one estimate (the planner resolves them from the devices).
#[derive(Debug, Clone, PartialEq)]
pub struct LlamaCppRun {
    /// `--swa-full`: sliding-window layers cache the whole context (the llama-cpp-python
    /// default) instead of the window plus one micro-batch (llama-server's).
    pub swa_full: bool,
    /// Rows of logits llama.cpp reserves a micro-batch for (`n_outputs_max`): `llama-server`
    /// keeps one a sequence (its `-np`); `None`: every token, as llama.cpp's library and
    /// `llama-fit-params` do.
    pub outputs: Option<u64>,
    /// `-np`: llama-server's sequences (a draft beside the model keeps logits for one token
    /// of each).
    pub parallel: u64,
    /// The ggml backend llama.cpp's GPUs run, for how their compute buffers place tensors.
    pub device: LlamaDevice,
    /// llama.cpp's first devices, reached through ggml-rpc (`--rpc`; none: every device is
    /// local), by the backend behind each `rpc-server`: each follows that backend's buffer
    /// rules (ggml-rpc asks the remote for alignment and allocation sizes) but runs every op,
    /// reorders nothing and takes no op on a host weight.
    pub rpc: Vec<LlamaDevice>,
    /// `--no-op-offload`: a device that offloads ops takes none (llama.cpp's `op_offload`
    /// context parameter off).
    pub no_op_offload: bool,
    /// `GGML_VK_DISABLE_GRAPH_OPTIMIZE`, `GGML_METAL_GRAPH_OPTIMIZE_DISABLE`: ggml-vulkan and
    /// ggml-metal allocate each split in llama.cpp's graph order instead of reordering it first.
    pub keep_graph_order: bool,
    /// `--fit-target`: what llama.cpp's fit keeps free on each GPU (1024 MiB by default).
    pub fit_margin: u64,
}

/// The CPU backend's rules, every device local, a row of logits for every token.
impl Default for LlamaCppRun {
    fn default() -> Self {
        LlamaCppRun {
            swa_full: false,
            outputs: None,
            parallel: 1,
            device: LlamaDevice::CpuRules,
            rpc: Vec::new(),
            no_op_offload: false,
            keep_graph_order: false,
            fit_margin: super::FIT_MARGIN,
        }
    }
}

impl LlamaCppRun {
    /// The backend whose buffer rules llama.cpp's device `d` follows, and whether llama.cpp
    /// reaches it through ggml-rpc ([`LlamaCppRun::rpc`]).
    pub fn device_at(&self, d: usize) -> (LlamaDevice, bool) {
        match self.rpc.get(d) {
            Some(&remote) => (remote, true),
            None => (self.device, false),
        }
    }
}
