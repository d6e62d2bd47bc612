//! `estimate --engine ollama`: what Ollama chooses for the model and where llama-server puts
//! it, as `select --engine ollama` plans it on the same devices.

use serde::Serialize;

use super::engine_ollama::ollama_text;
use super::Report;
use super::Style;
use crate::plan::engines::ollama::OllamaAccount;
use crate::units::format_bytes;

/// The report of `estimate --engine ollama` (JSON schema: docs/json-schema.md#estimate).
#[derive(Debug, Clone, Serialize)]
pub struct OllamaEstimateReport {
    /// The model's name.
    pub model: String,
    /// Always `ollama`.
    pub engine: &'static str,
    /// The devices planned on, by name.
    pub devices: Vec<String>,
    /// What it needs on the GPU it uses most (`select`'s figure).
    pub needed_bytes: u64,
    /// Whether it loads there.
    pub loads: bool,
    /// Ollama's account (as `select --json`'s `plan.ollama`).
    pub account: OllamaAccount,
}

impl Report for OllamaEstimateReport {
    fn render_text(&self, _style: &Style) -> String {
        let mut text = format!(
            "{} needs {} under Ollama on {}{}\n",
            super::one_line(&self.model),
            format_bytes(self.needed_bytes),
            self.devices.join(", "),
            if self.loads {
                ""
            } else {
                "; it does not load there"
            }
        );
        ollama_text(&mut text, &self.account);
        text
    }
}
