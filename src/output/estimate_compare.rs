//! `estimate --engine all`: one model planned by every engine that takes it, side by side, each
//! by its own rules on the same devices (what `select --engine E` plans for each).

use std::fmt::Write as _;

use serde::Serialize;

use super::{new_table, thousands, Report, Style};
use crate::plan::launch::Engine;
use crate::units::format_bytes;

/// One engine's answer.
#[derive(Debug, Clone, Serialize)]
pub struct EngineRow {
    /// The engine.
    pub engine: Engine,
    /// The release whose rules planned it.
    pub release: &'static str,
    /// Whether it serves one sequence of `context` there.
    pub serves: bool,
    /// What it needs on each GPU it uses (llama.cpp and Ollama: on the GPU, the rest in RAM;
    /// on a machine without one, the host's).
    pub needed_bytes: u64,
    /// GPUs used.
    pub gpus: u64,
    /// The context planned (Ollama chooses its own by VRAM).
    pub context: u64,
    /// Tokens its KV cache holds, when it serves.
    pub kv_tokens: Option<u64>,
    /// Why the engine does not take the model, when it does not (`None`: planned).
    pub not_for: Option<&'static str>,
}

/// The report of `estimate --engine all` (JSON schema: docs/json-schema.md#estimate).
#[derive(Debug, Clone, Serialize)]
pub struct CompareReport {
    /// The model's name.
    pub model: String,
    /// The devices planned on, by name.
    pub devices: Vec<String>,
    /// Each engine's answer, in a fixed order (llama.cpp, Ollama, vLLM, SGLang).
    pub engines: Vec<EngineRow>,
}

fn engine_name(e: Engine) -> &'static str {
    match e {
        Engine::LlamaCpp => "llama.cpp",
        Engine::Ollama => "Ollama",
        Engine::Vllm => "vLLM",
        Engine::Sglang => "SGLang",
        Engine::Torchrun => "PyTorch",
    }
}

impl Report for CompareReport {
    fn render_text(&self, style: &Style) -> String {
        let mut text = format!(
            "{} on {}, each engine by its own rules:\n\n",
            super::one_line(&self.model),
            self.devices.join(", ")
        );
        let mut table = new_table(
            style,
            &["engine", "needs", "GPUs", "context", "KV tokens", "serves"],
        );
        for r in &self.engines {
            let name = format!("{} {}", engine_name(r.engine), r.release);
            if let Some(why) = r.not_for {
                table.add_row(vec![name, why.to_string()]);
                continue;
            }
            table.add_row(vec![
                name,
                format_bytes(r.needed_bytes),
                r.gpus.to_string(),
                thousands(r.context),
                r.kv_tokens.map_or_else(|| "—".to_string(), thousands),
                if r.serves { "yes" } else { "no" }.to_string(),
            ]);
        }
        let _ = writeln!(text, "{table}");
        let _ = writeln!(
            text,
            "Each row is `select --engine E` on the same devices; `estimate --engine E` \
             shows its account."
        );
        text
    }
}
