//! The families whose graphs llama.cpp builds its own way, named once: a model's family name,
//! as its GGUF (`general.architecture`) or its config.json (`model_type`) spells it, parsed into
//! [`Family`] before any decision is taken on it.

/// A family the estimate has rules for. Each spelling in this module's table maps to one; every other name is
/// [`Family::Other`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Llama, and every decoder built by llama.cpp's `llama` builder.
    Llama,
    /// Mistral (llama.cpp builds it as `llama`).
    Mistral,
    /// Mixtral (llama.cpp builds it as `llama`).
    Mixtral,
    /// Qwen2.
    Qwen2,
    /// Qwen2-MoE, with its gated shared expert.
    Qwen2Moe,
    /// Qwen3.
    Qwen3,
    /// Qwen3-MoE.
    Qwen3Moe,
    /// Qwen3-Next: Gated DeltaNet beside gated attention.
    Qwen3Next,
    /// Gemma (two norms a layer).
    Gemma,
    /// Gemma 2.
    Gemma2,
    /// Gemma 3.
    Gemma3,
    /// Phi-3: fused q/k/v and gate/up.
    Phi3,
    /// Llama 4: chunked attention, interleaved experts.
    Llama4,
    /// Command R7B (`cohere2`).
    Cohere2,
    /// Falcon.
    Falcon,
    /// StarCoder2.
    Starcoder2,
    /// GPT-NeoX.
    GptNeox,
    /// GLM-4.5 (`glm4moe`).
    Glm4Moe,
    /// DeepSeek-V2/V3 and Kimi-K2 (`deepseek2`).
    Deepseek,
    /// gpt-oss.
    GptOss,
    /// Mamba (and FalconMamba).
    Mamba,
    /// Mamba-2.
    Mamba2,
    /// Jamba.
    Jamba,
    /// Nemotron-H (and its MoE variant).
    NemotronH,
    /// Falcon-H1.
    FalconH1,
    /// Granite-4.0-H.
    GraniteHybrid,
    /// RWKV-6.
    Rwkv6,
    /// RWKV-7.
    Rwkv7,
    /// BERT (and XLM-RoBERTa rerankers converted as `bert`): an encoder.
    Bert,
    /// nomic-embed-text (`nomic-bert`): an encoder with RoPE and a SwiGLU MLP.
    NomicBert,
    /// jina-embeddings-v2 and jina-reranker-v1 (`jina-bert-v2`): an encoder with ALiBi.
    JinaBertV2,
    /// A family without rules of its own.
    Other,
}

/// Every spelling, GGUF's and config.json's, with its family.
pub const NAMES: &[(&str, Family)] = &[
    ("llama", Family::Llama),
    ("mistral", Family::Mistral),
    ("mixtral", Family::Mixtral),
    ("qwen2", Family::Qwen2),
    ("qwen2moe", Family::Qwen2Moe),
    ("qwen2_moe", Family::Qwen2Moe),
    ("qwen3", Family::Qwen3),
    ("qwen3moe", Family::Qwen3Moe),
    ("qwen3_moe", Family::Qwen3Moe),
    ("qwen3next", Family::Qwen3Next),
    ("qwen3_next", Family::Qwen3Next),
    ("gemma", Family::Gemma),
    ("gemma2", Family::Gemma2),
    ("gemma3", Family::Gemma3),
    ("gemma3_text", Family::Gemma3),
    ("phi3", Family::Phi3),
    ("llama4", Family::Llama4),
    ("llama4_text", Family::Llama4),
    ("cohere2", Family::Cohere2),
    ("falcon", Family::Falcon),
    ("starcoder2", Family::Starcoder2),
    ("gptneox", Family::GptNeox),
    ("gpt_neox", Family::GptNeox),
    ("glm4moe", Family::Glm4Moe),
    ("glm4_moe", Family::Glm4Moe),
    ("deepseek2", Family::Deepseek),
    ("deepseek_v2", Family::Deepseek),
    ("deepseek_v3", Family::Deepseek),
    ("kimi_k2", Family::Deepseek),
    ("gpt-oss", Family::GptOss),
    ("gpt_oss", Family::GptOss),
    ("mamba", Family::Mamba),
    ("mamba2", Family::Mamba2),
    ("jamba", Family::Jamba),
    ("nemotron_h", Family::NemotronH),
    ("nemotron_h_moe", Family::NemotronH),
    ("falcon-h1", Family::FalconH1),
    ("falcon_h1", Family::FalconH1),
    ("granitehybrid", Family::GraniteHybrid),
    ("granitemoehybrid", Family::GraniteHybrid),
    ("rwkv6", Family::Rwkv6),
    ("rwkv7", Family::Rwkv7),
    ("bert", Family::Bert),
    ("nomic-bert", Family::NomicBert),
    ("jina-bert-v2", Family::JinaBertV2),
];

impl Family {
    /// The family `name` spells (GGUF's or config.json's spelling).
    pub fn parse(name: &str) -> Self {
        NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(Family::Other, |(_, f)| *f)
    }
}

impl super::ModelArch {
    /// The family this architecture's name spells.
    pub fn family_kind(&self) -> Family {
        Family::parse(&self.family)
    }
}
