//! Ollama's choices in words, and what it and llama-server print: `offloaded N/M layers to GPU`,
//! and `ollama ps`'s SIZE (decimal units, as its `format.HumanBytes`) and PROCESSOR.

use std::fmt::Write as _;

use super::thousands;
use crate::plan::engines::ollama::{NumCtxFrom, OllamaAccount, Processor, VERSION};
use crate::units::format_bytes;

/// Ollama's `format.HumanBytes`: decimal units, whole from 10 up, one decimal below.
#[expect(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "a size printed to one decimal"
)]
pub fn human_bytes(b: u64) -> String {
    let units = [(1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "KB")];
    let Some(&(scale, unit)) = units.iter().find(|(s, _)| b as f64 >= *s) else {
        return format!("{b} B");
    };
    let value = b as f64 / scale;
    if value >= 10.0 || value == value.trunc() {
        format!("{} {unit}", value as u64)
    } else {
        format!("{value:.1} {unit}")
    }
}

/// `ollama ps`'s PROCESSOR.
pub fn processor_text(p: Processor) -> String {
    match p {
        Processor::Gpu => "100% GPU".into(),
        Processor::Cpu => "100% CPU".into(),
        Processor::Split { cpu_percent } => {
            format!("{cpu_percent}%/{}% CPU/GPU", 100 - u16::from(cpu_percent))
        }
    }
}

/// Ollama's choices, llama-server's placement, and what both print.
pub fn ollama_text(text: &mut String, a: &OllamaAccount) {
    let why = match a.num_ctx_from {
        NumCtxFrom::Asked => "as asked".to_string(),
        NumCtxFrom::VramTier => format!(
            "its default for {} of GPU memory",
            format_bytes(a.total_vram_bytes)
        ),
        NumCtxFrom::Trained => "the model's trained length".to_string(),
    };
    let _ = writeln!(
        text,
        "\n{} {}: num_ctx {} ({why}), {} parallel request{}, --flash-attn {}{}; llama-server \
         places the layers:",
        VERSION.engine,
        VERSION.version,
        thousands(a.num_ctx),
        a.num_parallel,
        if a.num_parallel == 1 { "" } else { "s" },
        a.flash_attn,
        a.kv_cache_type
            .map(|k| format!(", KV cache {k}"))
            .unwrap_or_default()
    );
    super::engine::llamacpp_text(text, &a.llamacpp);
    let v = super::table::VERBATIM;
    let _ = writeln!(
        text,
        "  llama-server would print:\n{v}    load_tensors: offloaded {}/{} layers to GPU\n  \
         ollama ps would show: SIZE {}, PROCESSOR {}, CONTEXT {}",
        a.layers_offloaded,
        a.layers_total,
        human_bytes(a.size_bytes),
        processor_text(a.processor),
        a.num_ctx
    );
}
