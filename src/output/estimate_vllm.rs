//! `estimate --engine vllm`: what vLLM needs on each GPU for the model, as `select --engine
//! vllm` plans it on the same GPUs, with vLLM's accounting of one rank.

use serde::Serialize;

use super::engine::vllm_text;
use super::Report;
use super::Style;
use crate::plan::engines::vllm::VllmFit;
use crate::units::format_bytes;

/// The report of `estimate --engine vllm` (JSON schema: docs/json-schema.md#estimate).
#[derive(Debug, Clone, Serialize)]
pub struct VllmEstimateReport {
    /// The model's name.
    pub model: String,
    /// Always `vllm`.
    pub engine: &'static str,
    /// The GPU it was planned on (its name as its driver gives it).
    pub gpu: String,
    /// What vLLM needs on each GPU of the layout, start-up included: `select`'s figure.
    pub needed_bytes: u64,
    /// `--max-model-len`: tokens one request may hold.
    pub max_model_len: u64,
    /// Whether the layout starts and serves one request of `max_model_len`.
    pub serves: bool,
    /// vLLM's accounting of the binding rank (as `select --json`'s `plan.engine`).
    pub account: VllmFit,
}

impl Report for VllmEstimateReport {
    fn render_text(&self, _style: &Style) -> String {
        let gpus = self.account.tensor_parallel * self.account.pipeline_parallel;
        let mut text = format!(
            "{} needs {} on each GPU under vLLM, with one request of the full context \
             ({gpus} × {}){}\n",
            super::one_line(&self.model),
            format_bytes(self.needed_bytes),
            self.gpu,
            if self.serves {
                ""
            } else {
                "; it does not start there"
            }
        );
        vllm_text(&mut text, &self.account, self.serves, self.max_model_len);
        text
    }
}
