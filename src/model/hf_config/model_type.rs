//! A config.json's `model_type`, parsed once into the families gpumem has rules for.

/// The families whose config.json gpumem reads field by field, by `model_type`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ModelType {
    Llama,
    Mistral,
    Mixtral,
    Phi3,
    Qwen2,
    Qwen2Moe,
    Qwen3,
    Qwen3Moe,
    /// Gated DeltaNet layers beside gated attention.
    Qwen3Next,
    /// `llama4` and `llama4_text`.
    Llama4,
    GptOss,
    Gemma,
    Gemma2,
    /// `gemma3` and `gemma3_text`.
    Gemma3,
    Falcon,
    GptNeox,
    Glm4Moe,
    DeepseekV2,
    /// `deepseek_v3` and `kimi_k2`, DeepSeek-V3's architecture under another name.
    DeepseekV3,
    Mamba,
    Mamba2,
    Jamba,
    GraniteMoeHybrid,
    NemotronH,
    FalconH1,
    /// A `model_type` without rules (empty when the config has none).
    Other(String),
}

/// Each `model_type` as config.json spells it, with its family.
const NAMES: &[(&str, ModelType)] = &[
    ("llama", ModelType::Llama),
    ("mistral", ModelType::Mistral),
    ("mixtral", ModelType::Mixtral),
    ("qwen2", ModelType::Qwen2),
    ("qwen2_moe", ModelType::Qwen2Moe),
    ("qwen3", ModelType::Qwen3),
    ("qwen3_moe", ModelType::Qwen3Moe),
    ("gemma", ModelType::Gemma),
    ("gemma2", ModelType::Gemma2),
    ("gemma3", ModelType::Gemma3),
    ("gemma3_text", ModelType::Gemma3),
    ("phi3", ModelType::Phi3),
    ("falcon", ModelType::Falcon),
    ("gpt_neox", ModelType::GptNeox),
    ("deepseek_v2", ModelType::DeepseekV2),
    ("deepseek_v3", ModelType::DeepseekV3),
    ("gpt_oss", ModelType::GptOss),
    ("llama4", ModelType::Llama4),
    ("llama4_text", ModelType::Llama4),
    ("qwen3_next", ModelType::Qwen3Next),
    ("mamba", ModelType::Mamba),
    ("mamba2", ModelType::Mamba2),
    ("granitemoehybrid", ModelType::GraniteMoeHybrid),
    ("kimi_k2", ModelType::DeepseekV3),
    ("glm4_moe", ModelType::Glm4Moe),
    ("jamba", ModelType::Jamba),
    ("nemotron_h", ModelType::NemotronH),
    ("falcon_h1", ModelType::FalconH1),
];

impl ModelType {
    pub fn parse(model_type: &str) -> Self {
        NAMES
            .iter()
            .find(|(name, _)| *name == model_type)
            .map_or_else(
                || ModelType::Other(model_type.to_string()),
                |(_, t)| t.clone(),
            )
    }

    /// Families whose MoE layers are counted from the end of each step ((i + 1) % step == 0).
    pub fn moe_counts_from_step_end(&self) -> bool {
        matches!(
            self,
            ModelType::Llama4 | ModelType::Qwen2Moe | ModelType::Qwen3Moe | ModelType::Qwen3Next
        )
    }

    /// Families whose router adds a learned bias to the expert scores.
    pub fn router_bias(&self) -> bool {
        matches!(
            self,
            ModelType::DeepseekV3 | ModelType::Glm4Moe | ModelType::GptOss | ModelType::NemotronH
        )
    }

    /// Families whose shared expert has a gate of its own.
    pub fn gated_shared_expert(&self) -> bool {
        matches!(self, ModelType::Qwen2Moe | ModelType::Qwen3Next)
    }

    /// Families llama.cpp builds without their sliding window, caching the whole context.
    pub fn window_ignored_by_llama_cpp(&self) -> bool {
        matches!(
            self,
            ModelType::Llama
                | ModelType::Mistral
                | ModelType::Mixtral
                | ModelType::Qwen2
                | ModelType::Qwen2Moe
                | ModelType::Qwen3
                | ModelType::Qwen3Moe
        )
    }

    /// Families whose embeddings are tied unless the config says otherwise.
    pub fn ties_by_default(&self) -> bool {
        matches!(
            self,
            ModelType::Gemma | ModelType::Gemma2 | ModelType::Gemma3 | ModelType::Falcon
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_published_list_is_the_table() {
        let mut table: Vec<&str> = NAMES.iter().map(|(name, _)| *name).collect();
        let mut published: Vec<&str> = super::super::KNOWN_FAMILIES.to_vec();
        table.sort_unstable();
        published.sort_unstable();
        assert_eq!(table, published);
        assert!(NAMES.iter().all(|(name, t)| ModelType::parse(name) == *t));
        assert_eq!(
            ModelType::parse("brand_new"),
            ModelType::Other("brand_new".into())
        );
    }
}
