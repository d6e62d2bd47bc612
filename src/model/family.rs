//! The one table of model families: each family gpumem has rules for, with every spelling of it
//! in a GGUF (`general.architecture`, as llama.cpp names its architectures) and in a
//! config.json (`model_type`, as transformers names it). Every reader and builder parses a name
//! here into [`Family`] before any decision is taken on it; a new architecture is one variant
//! and one row.

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
    /// Qwen3.5 and Qwen3.6, dense and MoE: Qwen3-Next's layout with the gated DeltaNet's
    /// projections apart and interleaved multimodal RoPE (llama.cpp's `qwen35` and `qwen35moe`
    /// builders).
    Qwen35,
    /// MiniMax-M2: grouped-query attention with q and k RMS-normed over their whole width
    /// (not per head) before a partial RoPE, and sigmoid-routed experts chosen with a
    /// correction bias in every layer, no shared expert (llama.cpp's `minimax-m2` builder).
    MinimaxM2,
    /// MiniMax-M3: grouped-query attention with per-head q/k norms and a partial RoPE, leading
    /// dense layers, then sigmoid-routed experts with a correction bias beside shared ones,
    /// and MiniMax Sparse Attention in the expert layers: an indexer of its own (cached in a
    /// second KV cache) picks the blocks of cells each query attends under flash attention
    /// (llama.cpp's `minimax-m3` builder).
    MinimaxM3,
    /// Kimi-Linear: Kimi Delta Attention (a gated delta rule with a per-channel decay, q, k
    /// and v each through a short convolution of its own) beside latent attention without RoPE,
    /// and sigmoid-routed experts with a correction bias and a shared expert after dense leading
    /// layers (llama.cpp's `kimi-linear` builder).
    KimiLinear,
    /// Kimi-K3: Kimi-Linear's hybrid with a single full-rank KDA output gate and a bounded
    /// decay, latent attention with q compression and a sigmoid output gate, cross-layer
    /// residual attention over banked residual streams, SiTU activations, and routed experts in
    /// a latent space (llama.cpp's `kimi-k3` builder; `kimi_k3` configs nest the language
    /// model in `text_config`).
    KimiK3,
    /// GLM-5's next variant (GLM-5.3-Flash): Kimi-Linear's KDA layers (the output gate from
    /// two low-rank projections, a bounded decay) beside nope-only latent attention with a
    /// compressed query, sparse over the tokens a DSA indexer picks from pools of `kpool`
    /// tokens (some layers reuse the previous layer's pick), four residual streams mixed
    /// before and after every block (mHC), SwiGLU-clamped experts with a correction bias and
    /// a shared expert after dense leading layers (llama.cpp's `glm5-next` builder;
    /// `glm5_next` configs nest the language model in `text_config`).
    Glm5Next,
    /// Gemma (two norms a layer).
    Gemma,
    /// Gemma 2.
    Gemma2,
    /// Gemma 3.
    Gemma3,
    /// Gemma 4 (31B's dense layout, 26B-A4B's experts beside the MLP): Gemma 3's sliding and
    /// full layers, the full ones with heads of their own size and count and V their K
    /// projection, V RMS-normed, no query scale, a scalar on each layer's output (llama.cpp's
    /// `gemma4` builder).
    Gemma4,
    /// Gemma 4's assistant (`gemma4-assistant`, a draft for speculative decoding): Gemma 4's
    /// layers without K or V of their own, reading the target's last sliding and full caches,
    /// between a projection in from the target's embedding and hidden state and one back out
    /// (llama.cpp's `gemma4-assistant` builder).
    Gemma4Assistant,
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
    /// DeepSeek-V2 (`deepseek2`, which llama.cpp builds DeepSeek-V3's GGUFs as too).
    DeepseekV2,
    /// DeepSeek-V3 and Kimi-K2, from their config.json: V2's graph with a router bias.
    DeepseekV3,
    /// DeepSeek-V3.2: DeepSeek-V3 with sparse attention (a lightning indexer choosing the keys
    /// each query attends).
    DeepseekV32,
    /// DeepSeek-V4 (`deepseek4`): one shared K=V head read through a sliding window beside
    /// caches of the context compressed 4:1 (with a lightning indexer) or 128:1, a grouped
    /// low-rank output, hyper-connections over several residual streams, and experts routed
    /// by a token-id table in the first layers (llama.cpp's `deepseek4` builder).
    DeepseekV4,
    /// GLM-5 (`glm-dsa`): DeepSeek-V3.2's sparse latent attention at GLM's widths.
    GlmDsa,
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

/// A family's spellings: GGUF's `general.architecture`s and the config.json `model_type`s read
/// field by field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spellings {
    /// The family.
    pub family: Family,
    /// How a GGUF names it (none: llama.cpp converts it under another family's name).
    pub gguf: &'static [&'static str],
    /// How a config.json names it (none: gpumem reads no config.json of it field by field).
    pub config: &'static [&'static str],
}

const fn row(
    family: Family,
    gguf: &'static [&'static str],
    config: &'static [&'static str],
) -> Spellings {
    Spellings {
        family,
        gguf,
        config,
    }
}

/// Every family with rules, and its spellings.
pub const FAMILIES: &[Spellings] = &[
    row(Family::Llama, &["llama"], &["llama"]),
    row(Family::Mistral, &[], &["mistral"]),
    row(Family::Mixtral, &[], &["mixtral"]),
    row(Family::Qwen2, &["qwen2"], &["qwen2"]),
    row(Family::Qwen2Moe, &["qwen2moe"], &["qwen2_moe"]),
    row(Family::Qwen3, &["qwen3"], &["qwen3"]),
    row(Family::Qwen3Moe, &["qwen3moe"], &["qwen3_moe"]),
    row(Family::Qwen3Next, &["qwen3next"], &["qwen3_next"]),
    row(
        Family::Qwen35,
        &["qwen35", "qwen35moe"],
        &["qwen3_5_text", "qwen3_5_moe_text"],
    ),
    row(Family::MinimaxM2, &["minimax-m2"], &["minimax_m2"]),
    // `minimax_m3_vl`: the multimodal repository's top level, its language model nested.
    row(
        Family::MinimaxM3,
        &["minimax-m3"],
        &["minimax_m3", "minimax_m3_vl"],
    ),
    row(Family::KimiLinear, &["kimi-linear"], &["kimi_linear"]),
    row(Family::KimiK3, &["kimi-k3"], &["kimi_k3"]),
    row(
        Family::Glm5Next,
        &["glm5-next"],
        &["glm5_next", "glm5_next_text"],
    ),
    row(Family::Gemma, &["gemma"], &["gemma"]),
    row(Family::Gemma2, &["gemma2"], &["gemma2"]),
    row(Family::Gemma3, &["gemma3"], &["gemma3", "gemma3_text"]),
    row(Family::Gemma4, &["gemma4"], &["gemma4", "gemma4_text"]),
    row(Family::Gemma4Assistant, &["gemma4-assistant"], &[]),
    row(Family::Phi3, &["phi3"], &["phi3"]),
    row(Family::Llama4, &["llama4"], &["llama4", "llama4_text"]),
    row(Family::Cohere2, &["cohere2"], &[]),
    row(Family::Falcon, &["falcon"], &["falcon"]),
    row(Family::Starcoder2, &["starcoder2"], &[]),
    row(Family::GptNeox, &["gptneox"], &["gpt_neox"]),
    row(Family::Glm4Moe, &["glm4moe"], &["glm4_moe"]),
    row(Family::DeepseekV2, &["deepseek2"], &["deepseek_v2"]),
    row(Family::DeepseekV3, &[], &["deepseek_v3", "kimi_k2"]),
    row(Family::DeepseekV32, &["deepseek32"], &["deepseek_v32"]),
    row(Family::DeepseekV4, &["deepseek4"], &["deepseek_v4"]),
    row(Family::GlmDsa, &["glm-dsa"], &["glm_moe_dsa"]),
    row(Family::GptOss, &["gpt-oss"], &["gpt_oss"]),
    row(Family::Mamba, &["mamba"], &["mamba"]),
    row(Family::Mamba2, &["mamba2"], &["mamba2"]),
    row(Family::Jamba, &["jamba"], &["jamba"]),
    row(
        Family::NemotronH,
        &["nemotron_h", "nemotron_h_moe"],
        &["nemotron_h"],
    ),
    row(Family::FalconH1, &["falcon-h1"], &["falcon_h1"]),
    row(
        Family::GraniteHybrid,
        &["granitehybrid"],
        &["granitemoehybrid"],
    ),
    row(Family::Rwkv6, &["rwkv6"], &[]),
    row(Family::Rwkv7, &["rwkv7"], &[]),
    row(Family::Bert, &["bert"], &[]),
    row(Family::NomicBert, &["nomic-bert"], &[]),
    row(Family::JinaBertV2, &["jina-bert-v2"], &[]),
];

impl Family {
    /// The family `name` spells, GGUF's or config.json's spelling (a model's `family` may be
    /// either).
    pub fn parse(name: &str) -> Self {
        Self::find(|r| r.gguf.contains(&name) || r.config.contains(&name))
    }

    /// The family of a GGUF's `general.architecture`.
    pub fn from_gguf(architecture: &str) -> Self {
        Self::find(|r| r.gguf.contains(&architecture))
    }

    /// The family of a config.json's `model_type`, where gpumem reads it field by field.
    pub fn from_model_type(model_type: &str) -> Self {
        Self::find(|r| r.config.contains(&model_type))
    }

    /// Every config.json `model_type` gpumem reads field by field.
    pub fn model_types() -> impl Iterator<Item = &'static str> {
        FAMILIES.iter().flat_map(|r| r.config.iter().copied())
    }

    /// DeepSeek-V2, V3, V3.2 or GLM-5: the same graph (V3.2's and GLM-5's with the
    /// indexer), MLA and experts.
    pub fn is_deepseek(self) -> bool {
        matches!(
            self,
            Family::DeepseekV2 | Family::DeepseekV3 | Family::DeepseekV32 | Family::GlmDsa
        )
    }

    /// DeepSeek-V3.2's sparse attention (a lightning indexer over the latent): V3.2 and GLM-5.
    pub fn has_sparse_attention(self) -> bool {
        matches!(self, Family::DeepseekV32 | Family::GlmDsa)
    }

    /// Whether vLLM's class for the family declares `embedding_modules` (its token embedding
    /// and output head), so that `--enable-lora` wraps them with adapter slots of their own
    /// (vLLM 0.33: `llama.py`, `mixtral.py`, `qwen3.py`, `qwen3_moe.py`, `qwen3_5.py`,
    /// `jamba.py`, `nemotron_h.py`, `falcon_h1.py`, `granitemoehybrid.py`; Mistral's class
    /// declares none).
    pub fn vllm_lora_wraps_vocab(self) -> bool {
        matches!(
            self,
            Family::Llama
                | Family::Mixtral
                | Family::Qwen3
                | Family::Qwen3Moe
                | Family::Qwen35
                | Family::Jamba
                | Family::NemotronH
                | Family::FalconH1
                | Family::GraniteHybrid
        )
    }

    fn find(matches: impl Fn(&Spellings) -> bool) -> Self {
        FAMILIES
            .iter()
            .find(|r| matches(r))
            .map_or(Family::Other, |r| r.family)
    }
}

impl Family {
    /// The module a checkpoint names its MoE layers' shared expert by (what quantizers'
    /// ignore lists match): DeepSeek's layout and its descendants say `shared_experts`
    /// (vLLM 0.33's `deepseek_v2.py`, `glm4_moe.py`, `nemotron_h.py`), Qwen's and Llama 4's
    /// `shared_expert`.
    pub fn shared_expert_module(self) -> &'static str {
        match self {
            Family::DeepseekV2
            | Family::DeepseekV3
            | Family::DeepseekV32
            | Family::GlmDsa
            | Family::Glm4Moe
            | Family::NemotronH => "shared_experts",
            _ => "shared_expert",
        }
    }
}

impl super::ModelArch {
    /// The family this architecture's name spells.
    pub fn family_kind(&self) -> Family {
        Family::parse(&self.family)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_spelling_names_one_family_and_every_family_has_one() {
        let mut gguf: Vec<&str> = FAMILIES
            .iter()
            .flat_map(|r| r.gguf.iter().copied())
            .collect();
        let mut config: Vec<&str> = Family::model_types().collect();
        let (g, c) = (gguf.len(), config.len());
        gguf.sort_unstable();
        gguf.dedup();
        config.sort_unstable();
        config.dedup();
        assert_eq!(
            (gguf.len(), config.len()),
            (g, c),
            "a spelling listed twice"
        );
        for r in FAMILIES {
            assert!(!r.gguf.is_empty() || !r.config.is_empty(), "{:?}", r.family);
            assert!(r.gguf.iter().all(|n| Family::from_gguf(n) == r.family));
            assert!(r
                .config
                .iter()
                .all(|n| Family::from_model_type(n) == r.family));
            assert!(r
                .gguf
                .iter()
                .chain(r.config)
                .all(|n| Family::parse(n) == r.family));
        }
        assert_eq!(Family::parse("brand_new"), Family::Other);
        // A name of the other source is not taken for this one's.
        assert_eq!(Family::from_gguf("gpt_oss"), Family::Other);
        assert_eq!(Family::from_model_type("gpt-oss"), Family::Other);
    }
}
