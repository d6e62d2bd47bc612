//! The reading rules that hang on a config.json's `model_type`, once it is parsed into a
//! [`Family`] by the one family table (`model/family.rs`).

use crate::model::family::Family;

impl Family {
    /// Families whose MoE layers are counted from the end of each step ((i + 1) % step == 0).
    pub(super) fn moe_counts_from_step_end(self) -> bool {
        matches!(
            self,
            Family::Llama4
                | Family::Qwen2Moe
                | Family::Qwen3Moe
                | Family::Qwen3Next
                | Family::Qwen35
        )
    }

    /// Families whose router adds a learned bias to the expert scores.
    pub(super) fn router_bias(self) -> bool {
        matches!(
            self,
            Family::DeepseekV3
                | Family::DeepseekV32
                | Family::DeepseekV4
                | Family::GlmDsa
                | Family::Glm4Moe
                | Family::GptOss
                | Family::NemotronH
                | Family::MinimaxM2
                | Family::MinimaxM3
                | Family::KimiLinear
                | Family::KimiK3
                | Family::Glm5Next
        )
    }

    /// Families whose shared expert has a gate of its own.
    pub(super) fn gated_shared_expert(self) -> bool {
        matches!(self, Family::Qwen2Moe | Family::Qwen3Next | Family::Qwen35)
    }

    /// Families llama.cpp builds without their sliding window, caching the whole context.
    pub(super) fn window_ignored_by_llama_cpp(self) -> bool {
        matches!(
            self,
            Family::Llama
                | Family::Mistral
                | Family::Mixtral
                | Family::Qwen2
                | Family::Qwen2Moe
                | Family::Qwen3
                | Family::Qwen3Moe
        )
    }

    /// Families whose embeddings are tied unless the config says otherwise.
    pub(super) fn ties_by_default(self) -> bool {
        matches!(
            self,
            Family::Gemma | Family::Gemma2 | Family::Gemma3 | Family::Gemma4 | Family::Falcon
        )
    }
}
