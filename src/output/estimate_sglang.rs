//! `estimate --engine sglang`: what SGLang needs on each GPU for the model, as `select --engine
//! sglang` plans it on the same GPUs, with SGLang's accounting of one rank.

use serde::Serialize;

use super::engine_sglang::sglang_text;
use super::Report;
use super::Style;
use crate::plan::engines::sglang::SglangFit;
use crate::units::format_bytes;

/// The report of `estimate --engine sglang` (JSON schema: docs/json-schema.md#estimate).
#[derive(Debug, Clone, Serialize)]
pub struct SglangEstimateReport {
    /// The model's name.
    pub model: String,
    /// Always `sglang`.
    pub engine: &'static str,
    /// The GPU it was planned on (its name as its driver gives it).
    pub gpu: String,
    /// What SGLang needs on each GPU of the layout to serve one request of the full context:
    /// `select`'s figure.
    pub needed_bytes: u64,
    /// Whether the layout starts and holds one request of the full context.
    pub serves: bool,
    /// SGLang's accounting of one rank (as `select --json`'s `plan.sglang`).
    pub account: SglangFit,
}

impl Report for SglangEstimateReport {
    fn render_text(&self, _style: &Style) -> String {
        let mut text = format!(
            "{} needs {} on each GPU under SGLang, with one request of the full context \
             ({} × {}){}\n",
            super::one_line(&self.model),
            format_bytes(self.needed_bytes),
            self.account.tensor_parallel,
            self.gpu,
            if self.serves {
                ""
            } else {
                "; it does not serve there"
            }
        );
        sglang_text(&mut text, &self.account);
        text
    }
}
