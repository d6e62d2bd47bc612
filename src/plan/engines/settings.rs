//! What a model runs as: the request every engine's accounting reads (precision, batch,
//! context, micro-batch, flash attention, overhead), and beside it each engine's own settings,
//! defined in that engine's folder.

use serde::Serialize;

use super::llamacpp::LlamaCppRun;
use super::pytorch::PytorchRun;
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
    /// Runtime overhead bytes per device.
    pub overhead: u64,
    /// Extra percentage on weights, KV cache and activations for the pool's fragmentation.
    pub fragmentation_reserve: f64,
    /// Inference or training.
    pub mode: Mode,
    /// llama.cpp's own settings: its devices' buffer rules, RPC devices, outputs, `--swa-full`.
    pub llamacpp: LlamaCppRun,
    /// PyTorch's own settings: a training step's recipe and sharding, or `generate`.
    pub pytorch: PytorchRun,
    /// Under transformers' `generate`, its assistant model (assisted generation).
    pub generate_assistant: Option<std::sync::Arc<super::pytorch::GenerateAssistant>>,
    /// SGLang's own settings: `launch_server`'s memory flags.
    pub sglang: super::sglang::SglangRun,
    /// Ollama's own settings: its environment and a model's parameters.
    pub ollama: super::ollama::OllamaRun,
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
            overhead: 0,
            fragmentation_reserve: 0.0,
            mode: Mode::Infer,
            llamacpp: LlamaCppRun::default(),
            pytorch: PytorchRun::default(),
            generate_assistant: None,
            sglang: super::sglang::SglangRun::default(),
            ollama: super::ollama::OllamaRun::default(),
        }
    }
}
