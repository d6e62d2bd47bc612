//! `ollama ps`'s PROCESSOR column, from llama-server's buffers as Ollama 0.33 reads them back
//! (`llm/llama_server.go`, `MemorySize`; `cmd/cmd.go`).

use serde::Serialize;

use crate::plan::engines::LlamaCppAccount;

/// Where `ollama ps` says the model runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "processor", rename_all = "snake_case")]
pub enum Processor {
    /// `100% GPU`: every layer, the output layer with them, on the GPUs.
    Gpu,
    /// `100% CPU`: nothing on a GPU.
    Cpu,
    /// `C%/G% CPU/GPU`.
    Split {
        /// The CPU's share, rounded as Ollama rounds it.
        cpu_percent: u8,
    },
}

/// What Ollama counts: `size`, every buffer llama-server prints (its model buffers cut to the
/// file's bytes, as Ollama trims the memory-mapped span), and `size_vram`, the GPUs' buffers.
pub fn sizes(a: &LlamaCppAccount, output_buffer: u64) -> (u64, u64) {
    let vram: u64 = a.devices.iter().map(|d| d.total()).sum();
    let total = vram + a.host.total() + output_buffer;
    (total, vram)
}

/// PROCESSOR for a placement whose buffers are `(size, size_vram)`: a full offload (every layer
/// and the output layer on the GPUs, none of their tensors moved to the host) reads 100% GPU.
#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_precision_loss,
    reason = "a percentage in [0, 100]"
)]
pub fn processor(a: &LlamaCppAccount, (size, vram): (u64, u64)) -> Processor {
    let all = a.n_gpu_layers > a.repeating_layers && a.overrides.is_empty();
    if vram == 0 {
        Processor::Cpu
    } else if all || vram >= size {
        Processor::Gpu
    } else {
        let cpu = ((size - vram) as f64 / size as f64 * 100.0).round() as u8;
        Processor::Split { cpu_percent: cpu }
    }
}
