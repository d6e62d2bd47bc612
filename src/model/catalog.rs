//! The built-in catalog: current open models with the architecture fields of their published
//! Hugging Face `config.json` (the longer configs in `catalog_configs/`, the constructors the
//! rows read through in `catalog_shapes.rs`).

use super::arch::{llama_like, Attention, Mlp, Moe, Norm, SlidingLayers, SlidingWindow};
pub use super::catalog_shapes::CatalogModel;
use super::catalog_shapes::{
    from_config, gemma, gemma2, gpt_oss_config, llama4_config, m, mixtral, phi3, qwen2, qwen3,
    with, with_window,
};

/// Qwen/Qwen3-Next-80B-A3B-Instruct: the architecture fields of the published config.json.
const QWEN3_NEXT_80B_CONFIG: &str = include_str!("catalog_configs/qwen3-next-80b-a3b.json");

/// Qwen/Qwen3.5-35B-A3B: the architecture fields of the published config.json's `text_config`
/// (its vision tower and MTP block are not the language model's).
const QWEN35_35B_A3B_CONFIG: &str = include_str!("catalog_configs/qwen3.5-35b-a3b.json");

/// zai-org/GLM-5: the architecture fields of the published config.json (DeepSeek-V3.2's
/// sparse latent attention at GLM's widths, an indexer in every layer), with the one MTP layer
/// GLM-5.1's config.json and safetensors header list (code-search index file 62604838642:
/// `num_nextn_predict_layers` 1, `model.layers.78.*`, 753,864,139,008 parameters in all).
const GLM5_CONFIG: &str = include_str!("catalog_configs/glm-5.json");

/// MiniMaxAI/MiniMax-M2: the architecture fields of the published config.json (its experts
/// `intermediate_size` wide, RoPE on `rotary_dim` of each head, q and k normed whole, a
/// sigmoid router with a correction bias) and its FP8 quantization_config (128 × 128 blocks;
/// the router, its bias and the head in higher precision), as vLLM and SGLang load it (code
/// search index files 6696898675 and 60488407499 quote it).
const MINIMAX_M2_CONFIG: &str = include_str!("catalog_configs/minimax-m2.json");

/// google/gemma-4-31B-it: its language model as the model cards (Google's and the conversions
/// from its checkpoint) give it: 60 layers, 5 sliding (16 KV heads of 256, a window of 1024) to
/// 1 full (4 KV heads of 512, V the K projection), no per-layer embeddings, tied. These give
/// the 30.7B parameters Google publishes.
const GEMMA4_31B_CONFIG: &str = include_str!("catalog_configs/gemma-4-31b.json");

/// google/gemma-4-26B-A4B-it: its text_config as a pinned conversion of the published
/// config.json checks it field by field (code-search index file 70198611268, the contract of
/// mlx-community/gemma-4-26b-a4b-it-4bit, upstream google/gemma-4-26B-A4B-it): 30 layers, 5
/// sliding (8 KV heads of 256, a window of 1024) to 1 full (2 KV heads of 512, V the K
/// projection), a dense MLP of 2112 beside 128 experts of 704 (8 a token) in every layer, no
/// per-layer embeddings, tied; the context as conversions of the same config give it (files
/// 53939116010, 57918583953). The vision tower (27 layers, 1152 wide) is not counted.
const GEMMA4_26B_A4B_CONFIG: &str = include_str!("catalog_configs/gemma-4-26b-a4b.json");

/// google/gemma-4-E2B-it: its text_config as conversions of the published config.json
/// reproduce it (hidden 1536, 35 layers, 4 sliding layers of one KV head of 256 to 1 full of
/// one of 512, V its own projection, per-layer embeddings of 256, the last 20 layers reusing
/// layers 13's and 14's caches with MLPs twice 6144, tied). These give 4.63B parameters, of
/// which the per-layer table is 2.35B (4.7 GB in bf16); the vision and audio towers are not
/// counted.
const GEMMA4_E2B_CONFIG: &str = include_str!("catalog_configs/gemma-4-e2b.json");

/// google/gemma-4-E4B-it: its text_config as conversions of the published config.json
/// reproduce it (hidden 2560, 42 layers, 5 sliding layers of two KV heads of 256 to 1 full of
/// two of 512, V its own projection, MLP 10240, per-layer embeddings of 256, the last 18
/// layers reusing layers 22's and 23's caches, tied): 7.46B parameters without the vision and
/// audio towers.
const GEMMA4_E4B_CONFIG: &str = include_str!("catalog_configs/gemma-4-e4b.json");

/// moonshotai/Kimi-K2-Instruct: the architecture fields of the published config.json
/// (DeepSeek-V3's layout with 384 experts and 64 heads).
const KIMI_K2_CONFIG: &str = include_str!("catalog_configs/kimi-k2.json");

/// moonshotai/Kimi-Linear-48B-A3B-Instruct: the fields KimiLinearConfig's defaults give it
/// (transformers 5.24 documents the class with this checkpoint): KDA of 32 heads of 128 with
/// convolutions of 4, latent attention without RoPE or q compression, 256 experts of 1024 (8 a
/// token) beside one shared expert after one dense layer. Its `linear_attn_config` layer lists
/// are not reproduced: the latent-attention layers are the class's default (every fourth from
/// the fifth, 1-indexed).
const KIMI_LINEAR_48B_CONFIG: &str = include_str!("catalog_configs/kimi-linear-48b-a3b.json");

/// mistralai/Mamba-Codestral-7B-v0.1: the architecture fields of the published config.json.
const MAMBA_CODESTRAL_CONFIG: &str = include_str!("catalog_configs/mamba-codestral-7b.json");

/// nvidia/NVIDIA-Nemotron-Nano-9B-v2: the architecture fields of the published config.json
/// (27 Mamba-2, 4 attention and 25 squared-ReLU MLP blocks, one per layer).
const NEMOTRON_NANO_9B_V2_CONFIG: &str = include_str!("catalog_configs/nemotron-nano-9b-v2.json");

/// Every catalog model, in listing order.
pub fn catalog() -> Vec<CatalogModel> {
    [
        mistral_rows(),
        llama_rows(),
        qwen2_5_rows(),
        qwen3_rows(),
        gemma_and_phi_rows(),
        deepseek_rows(),
        others_rows(),
        architectures_2026_rows(),
    ]
    .concat()
}

/// Mistral's and Mixtral's models.
fn mistral_rows() -> Vec<CatalogModel> {
    vec![
        m(
            "mistral-7b",
            &["mistral-7b-v0.1", "mistral"],
            "mistralai/Mistral-7B-v0.1",
            with(
                llama_like("mistral-7b", 4096, 14336, 32, 32, 8, 32000),
                "mistral",
                32_768,
                // Its 4096-token window is not applied by llama.cpp, which caches the whole
                // context; transformers applies it.
                |a| a.transformers_window = Some(4096),
            ),
        ),
        m(
            "mistral-7b-v0.3",
            &["mistral-7b-instruct-v0.3"],
            "mistralai/Mistral-7B-v0.3",
            with(
                llama_like("mistral-7b-v0.3", 4096, 14336, 32, 32, 8, 32768),
                "mistral",
                32_768,
                |_| {},
            ),
        ),
        m(
            "mistral-nemo-12b",
            &["mistral-nemo"],
            "mistralai/Mistral-Nemo-Base-2407",
            with(
                llama_like("mistral-nemo-12b", 5120, 14336, 40, 32, 8, 131_072),
                "mistral",
                1_024_000,
                |a| a.head_dim = 128,
            ),
        ),
        m(
            "mixtral-8x7b",
            &["mixtral"],
            "mistralai/Mixtral-8x7B-v0.1",
            mixtral("mixtral-8x7b", 4096, 14336, 32, 32, 8, 32000),
        ),
        m(
            "mixtral-8x22b",
            &[],
            "mistralai/Mixtral-8x22B-v0.1",
            mixtral("mixtral-8x22b", 6144, 16384, 56, 48, 8, 32768),
        ),
    ]
}

/// Meta's Llama 2 and 3, and Llama's shape under other names (CodeLlama, TinyLlama, Yi).
fn llama_rows() -> Vec<CatalogModel> {
    let l = |name, h, i, layers, heads, kv, vocab, max_pos| {
        with(
            llama_like(name, h, i, layers, heads, kv, vocab),
            "llama",
            max_pos,
            |_| {},
        )
    };
    vec![
        m(
            "llama-2-7b",
            &["llama2-7b"],
            "meta-llama/Llama-2-7b-hf",
            l("llama-2-7b", 4096, 11008, 32, 32, 32, 32000, 4096),
        ),
        m(
            "llama-2-13b",
            &["llama2-13b"],
            "meta-llama/Llama-2-13b-hf",
            l("llama-2-13b", 5120, 13824, 40, 40, 40, 32000, 4096),
        ),
        m(
            "llama-2-70b",
            &["llama2-70b"],
            "meta-llama/Llama-2-70b-hf",
            l("llama-2-70b", 8192, 28672, 80, 64, 8, 32000, 4096),
        ),
        m(
            "codellama-7b",
            &[],
            "codellama/CodeLlama-7b-hf",
            l("codellama-7b", 4096, 11008, 32, 32, 32, 32016, 16384),
        ),
        m(
            "llama-3-8b",
            &["llama3-8b"],
            "meta-llama/Meta-Llama-3-8B",
            l("llama-3-8b", 4096, 14336, 32, 32, 8, 128_256, 8192),
        ),
        m(
            "llama-3-70b",
            &["llama3-70b"],
            "meta-llama/Meta-Llama-3-70B",
            l("llama-3-70b", 8192, 28672, 80, 64, 8, 128_256, 8192),
        ),
        m(
            "llama-3.1-8b",
            &["llama3.1-8b"],
            "meta-llama/Llama-3.1-8B",
            l("llama-3.1-8b", 4096, 14336, 32, 32, 8, 128_256, 131_072),
        ),
        m(
            "llama-3.1-70b",
            &["llama3.1-70b", "llama-3.3-70b"],
            "meta-llama/Llama-3.1-70B",
            l("llama-3.1-70b", 8192, 28672, 80, 64, 8, 128_256, 131_072),
        ),
        m(
            "llama-3.1-405b",
            &["llama3.1-405b"],
            "meta-llama/Llama-3.1-405B",
            l(
                "llama-3.1-405b",
                16384,
                53248,
                126,
                128,
                8,
                128_256,
                131_072,
            ),
        ),
        m(
            "llama-3.2-1b",
            &["llama3.2-1b"],
            "meta-llama/Llama-3.2-1B",
            with(
                l("llama-3.2-1b", 2048, 8192, 16, 32, 8, 128_256, 131_072),
                "llama",
                131_072,
                |a| a.tie_word_embeddings = true,
            ),
        ),
        m(
            "llama-3.2-3b",
            &["llama3.2-3b"],
            "meta-llama/Llama-3.2-3B",
            with(
                l("llama-3.2-3b", 3072, 8192, 28, 24, 8, 128_256, 131_072),
                "llama",
                131_072,
                |a| a.tie_word_embeddings = true,
            ),
        ),
        m(
            "tinyllama-1.1b",
            &["tinyllama"],
            "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T",
            l("tinyllama-1.1b", 2048, 5632, 22, 32, 4, 32000, 2048),
        ),
        m(
            "yi-34b",
            &[],
            "01-ai/Yi-34B",
            l("yi-34b", 7168, 20480, 60, 56, 8, 64000, 4096),
        ),
    ]
}

/// Qwen2.5, dense.
fn qwen2_5_rows() -> Vec<CatalogModel> {
    vec![
        m(
            "qwen2.5-0.5b",
            &[],
            "Qwen/Qwen2.5-0.5B",
            qwen2("qwen2.5-0.5b", 896, 4864, 24, 14, 2, 151_936, true, 32_768),
        ),
        m(
            "qwen2.5-1.5b",
            &[],
            "Qwen/Qwen2.5-1.5B",
            qwen2(
                "qwen2.5-1.5b",
                1536,
                8960,
                28,
                12,
                2,
                151_936,
                true,
                131_072,
            ),
        ),
        m(
            "qwen2.5-3b",
            &[],
            "Qwen/Qwen2.5-3B",
            qwen2("qwen2.5-3b", 2048, 11008, 36, 16, 2, 151_936, true, 32_768),
        ),
        m(
            "qwen2.5-7b",
            &["qwen2-7b"],
            "Qwen/Qwen2.5-7B",
            qwen2(
                "qwen2.5-7b",
                3584,
                18944,
                28,
                28,
                4,
                152_064,
                false,
                131_072,
            ),
        ),
        m(
            "qwen2.5-14b",
            &[],
            "Qwen/Qwen2.5-14B",
            qwen2(
                "qwen2.5-14b",
                5120,
                13824,
                48,
                40,
                8,
                152_064,
                false,
                131_072,
            ),
        ),
        m(
            "qwen2.5-32b",
            &[],
            "Qwen/Qwen2.5-32B",
            qwen2(
                "qwen2.5-32b",
                5120,
                27648,
                64,
                40,
                8,
                152_064,
                false,
                131_072,
            ),
        ),
        m(
            "qwen2.5-72b",
            &["qwen2-72b"],
            "Qwen/Qwen2.5-72B",
            qwen2(
                "qwen2.5-72b",
                8192,
                29568,
                80,
                64,
                8,
                152_064,
                false,
                131_072,
            ),
        ),
    ]
}

/// Qwen3, dense and mixture of experts.
fn qwen3_rows() -> Vec<CatalogModel> {
    vec![
        m(
            "qwen3-0.6b",
            &[],
            "Qwen/Qwen3-0.6B",
            qwen3("qwen3-0.6b", 1024, 3072, 28, 16, 8, true),
        ),
        m(
            "qwen3-4b",
            &[],
            "Qwen/Qwen3-4B",
            qwen3("qwen3-4b", 2560, 9728, 36, 32, 8, true),
        ),
        m(
            "qwen3-8b",
            &[],
            "Qwen/Qwen3-8B",
            qwen3("qwen3-8b", 4096, 12288, 36, 32, 8, false),
        ),
        m(
            "qwen3-14b",
            &[],
            "Qwen/Qwen3-14B",
            qwen3("qwen3-14b", 5120, 17408, 40, 40, 8, false),
        ),
        m(
            "qwen3-32b",
            &[],
            "Qwen/Qwen3-32B",
            qwen3("qwen3-32b", 5120, 25600, 64, 64, 8, false),
        ),
        m(
            "qwen3-30b-a3b",
            &["qwen3-moe"],
            "Qwen/Qwen3-30B-A3B",
            with(
                qwen3("qwen3-30b-a3b", 2048, 6144, 48, 32, 4, false),
                "qwen3_moe",
                40_960,
                |a| {
                    a.moe = Some(Moe {
                        experts: 128,
                        experts_per_token: 8,
                        expert_intermediate: 768,
                        shared_intermediate: 0,
                        first_dense_layers: 0,
                        layer_freq: 1,
                        router_bias: false,
                        shared_gate: false,
                        scaled_weights: false,
                        groups: (0, 0),
                    });
                },
            ),
        ),
    ]
}

/// Google's Gemma 1-3 and Microsoft's Phi-3 and Phi-4.
fn gemma_and_phi_rows() -> Vec<CatalogModel> {
    vec![
        m(
            "gemma-2b",
            &[],
            "google/gemma-2b",
            gemma("gemma-2b", 2048, 16384, 18, 8, 1, 256),
        ),
        m(
            "gemma-7b",
            &[],
            "google/gemma-7b",
            gemma("gemma-7b", 3072, 24576, 28, 16, 16, 256),
        ),
        m(
            "gemma-2-2b",
            &["gemma2-2b"],
            "google/gemma-2-2b",
            gemma2("gemma-2-2b", 2304, 9216, 26, 8, 4, 256),
        ),
        m(
            "gemma-2-9b",
            &["gemma2-9b"],
            "google/gemma-2-9b",
            gemma2("gemma-2-9b", 3584, 14336, 42, 16, 8, 256),
        ),
        m(
            "gemma-2-27b",
            &["gemma2-27b"],
            "google/gemma-2-27b",
            gemma2("gemma-2-27b", 4608, 36864, 46, 32, 16, 128),
        ),
        m(
            "gemma-3-1b",
            &["gemma3-1b"],
            "google/gemma-3-1b-pt",
            with(
                gemma("gemma-3-1b", 1152, 6912, 26, 4, 1, 256),
                "gemma3_text",
                32_768,
                |a| {
                    a.vocab_size = 262_144;
                    a.norms_per_layer = 4;
                    a.attention = Attention::Standard {
                        qkv_bias: false,
                        o_bias: false,
                        qk_norm: true,
                    };
                    a.sliding_window = Some(SlidingWindow {
                        window: 512,
                        layers: SlidingLayers::AllButEvery(6),
                    });
                },
            ),
        ),
        m(
            "phi-3-mini",
            &["phi3-mini", "phi-3.5-mini"],
            "microsoft/Phi-3-mini-4k-instruct",
            with_window(
                phi3("phi-3-mini", 3072, 8192, 32, 32, 32, 32064, 4096),
                2047,
            ),
        ),
        m(
            "phi-3-medium",
            &["phi3-medium"],
            "microsoft/Phi-3-medium-4k-instruct",
            with_window(
                phi3("phi-3-medium", 5120, 17920, 40, 40, 10, 32064, 4096),
                2047,
            ),
        ),
        m(
            "phi-4",
            &["phi4"],
            "microsoft/phi-4",
            phi3("phi-4", 5120, 17920, 40, 40, 10, 100_352, 16_384),
        ),
    ]
}

/// DeepSeek-V2, V3, V3.2 and V4: latent attention, its sparse indexer, compressed caches.
fn deepseek_rows() -> Vec<CatalogModel> {
    vec![
        m(
            "deepseek-v2-lite",
            &["deepseek-v2-lite-chat"],
            "deepseek-ai/DeepSeek-V2-Lite",
            with(
                llama_like("deepseek-v2-lite", 2048, 10944, 27, 16, 16, 102_400),
                "deepseek_v2",
                163_840,
                |a| {
                    a.head_dim = 192;
                    a.attention = Attention::Mla {
                        q_lora_rank: None,
                        kv_lora_rank: 512,
                        qk_nope_head_dim: 128,
                        qk_rope_head_dim: 64,
                        v_head_dim: 128,
                    };
                    a.moe = Some(Moe {
                        experts: 64,
                        experts_per_token: 6,
                        expert_intermediate: 1408,
                        shared_intermediate: 2 * 1408,
                        first_dense_layers: 1,
                        layer_freq: 1,
                        router_bias: false,
                        shared_gate: false,
                        scaled_weights: false,
                        groups: (1, 1),
                    });
                },
            ),
        ),
        // Published in FP8 (128×128 blocks, f32 scales; embeddings, norms and the router in
        // bf16): its quantization_config fixes the weights, as vLLM and SGLang load them. The
        // repository's one multi-token-prediction layer is not loaded to serve: it is counted
        // apart, in the unloaded parameters.
        from_config(
            "deepseek-v3",
            &["deepseek-r1"],
            "deepseek-ai/DeepSeek-V3",
            include_str!("catalog_configs/deepseek-v3.json"),
        ),
        // deepseek-ai/DeepSeek-V4-Flash's published config.json (quoted verbatim in the code
        // search index, file id 60241045088): 284,334,567,511 parameters, 13,801,959,511
        // active, the multi-token-prediction layer not among them. Its checkpoint: fp4 experts
        // (`expert_dtype`) beside fp8 blocks and bf16 embeddings, 155,537,977,431 bytes.
        from_config(
            "deepseek-v4-flash",
            &["deepseek-v4"],
            "deepseek-ai/DeepSeek-V4-Flash",
            include_str!("catalog_configs/deepseek-v4-flash.json"),
        ),
        // DeepSeek-V3's architecture fields and FP8 checkpoint with V3.2's lightning indexer
        // (64 heads, 128-wide keys, the 2,048 best tokens a query).
        from_config(
            "deepseek-v3.2",
            &["deepseek-v3.2-exp"],
            "deepseek-ai/DeepSeek-V3.2",
            include_str!("catalog_configs/deepseek-v3.2.json"),
        ),
    ]
}

/// Falcon, GPT-NeoX, gpt-oss and Llama 4.
fn others_rows() -> Vec<CatalogModel> {
    vec![
        m(
            "falcon-7b",
            &[],
            "tiiuae/falcon-7b",
            with(
                llama_like("falcon-7b", 4544, 4 * 4544, 32, 71, 1, 65024),
                "falcon",
                2048,
                |a| {
                    a.head_dim = 64;
                    a.tie_word_embeddings = true;
                    a.mlp = Mlp::Plain;
                    a.norm = Norm::Layer;
                    a.norms_per_layer = 1;
                    a.parallel_attention = true;
                },
            ),
        ),
        m(
            "gpt-neox-20b",
            &["neox-20b"],
            "EleutherAI/gpt-neox-20b",
            with(
                llama_like("gpt-neox-20b", 6144, 24576, 44, 64, 64, 50432),
                "gpt_neox",
                2048,
                |a| {
                    a.attention = Attention::Standard {
                        qkv_bias: true,
                        o_bias: true,
                        qk_norm: false,
                    };
                    a.mlp = Mlp::Plain;
                    a.mlp_bias = true;
                    a.norm = Norm::Layer;
                    a.parallel_attention = true;
                },
            ),
        ),
        from_config(
            "gpt-oss-20b",
            &["gpt-oss"],
            "openai/gpt-oss-20b",
            &gpt_oss_config(24, 32),
        ),
        from_config(
            "gpt-oss-120b",
            &[],
            "openai/gpt-oss-120b",
            &gpt_oss_config(36, 128),
        ),
        from_config(
            "llama-4-scout",
            &["llama-4-scout-17b-16e", "llama4-scout"],
            "meta-llama/Llama-4-Scout-17B-16E",
            &llama4_config(16, 1, 10_485_760),
        ),
        from_config(
            "llama-4-maverick",
            &["llama-4-maverick-17b-128e", "llama4-maverick"],
            "meta-llama/Llama-4-Maverick-17B-128E",
            &llama4_config(128, 2, 1_048_576),
        ),
    ]
}

/// The hybrid, sparse and multimodal architectures of 2026 (Qwen3-Next and Qwen3.5, Gemma 4, MiniMax, Kimi) and the state-space models.
fn architectures_2026_rows() -> Vec<CatalogModel> {
    vec![
        from_config(
            "qwen3-next-80b-a3b",
            &["qwen3-next", "qwen3-next-80b"],
            "Qwen/Qwen3-Next-80B-A3B-Instruct",
            QWEN3_NEXT_80B_CONFIG,
        ),
        from_config(
            "qwen3.5-35b-a3b",
            &["qwen3.5-35b", "qwen3.5-moe"],
            "Qwen/Qwen3.5-35B-A3B",
            QWEN35_35B_A3B_CONFIG,
        ),
        from_config("glm-5", &["glm5"], "zai-org/GLM-5", GLM5_CONFIG),
        from_config(
            "gemma-4-31b",
            &["gemma4-31b"],
            "google/gemma-4-31B-it",
            GEMMA4_31B_CONFIG,
        ),
        from_config(
            "gemma-4-26b-a4b",
            &["gemma4-26b-a4b", "gemma-4-26b"],
            "google/gemma-4-26B-A4B-it",
            GEMMA4_26B_A4B_CONFIG,
        ),
        from_config(
            "gemma-4-e2b",
            &["gemma4-e2b"],
            "google/gemma-4-E2B-it",
            GEMMA4_E2B_CONFIG,
        ),
        from_config(
            "gemma-4-e4b",
            &["gemma4-e4b"],
            "google/gemma-4-E4B-it",
            GEMMA4_E4B_CONFIG,
        ),
        from_config(
            "minimax-m2",
            &["minimax-m2-230b-a10b"],
            "MiniMaxAI/MiniMax-M2",
            MINIMAX_M2_CONFIG,
        ),
        // MiniMaxAI/MiniMax-M3's config.json as its fields are printed (revision f0e1c1e,
        // code-search index file 59245552846 checks each against the file; 54496182674 lists
        // the rest): its language model in text_config, the vision tower and the 7 MTP
        // modules not counted.
        from_config(
            "minimax-m3",
            &["minimax-m3-428b-a23b"],
            "MiniMaxAI/MiniMax-M3",
            include_str!("catalog_configs/minimax-m3.json"),
        ),
        from_config(
            "kimi-k2",
            &["kimi-k2-instruct"],
            "moonshotai/Kimi-K2-Instruct",
            KIMI_K2_CONFIG,
        ),
        // moonshotai/Kimi-K3's published config.json (its language model in text_config, the
        // vision tower not counted): MXFP4 routed experts (compressed-tensors, the `re:`
        // patterns of its ignore list keeping attention, the dense and shared MLPs and the
        // head in bf16).
        from_config(
            "kimi-k3",
            &[],
            "moonshotai/Kimi-K3",
            include_str!("catalog_configs/kimi-k3.json"),
        ),
        from_config(
            "kimi-linear-48b-a3b",
            &["kimi-linear", "kimi-linear-48b"],
            "moonshotai/Kimi-Linear-48B-A3B-Instruct",
            KIMI_LINEAR_48B_CONFIG,
        ),
        from_config(
            "nemotron-nano-9b-v2",
            &["nvidia-nemotron-nano-9b-v2", "nemotron-h-9b"],
            "nvidia/NVIDIA-Nemotron-Nano-9B-v2",
            NEMOTRON_NANO_9B_V2_CONFIG,
        ),
        from_config(
            "mamba-codestral-7b",
            &["mamba-codestral"],
            "mistralai/Mamba-Codestral-7B-v0.1",
            MAMBA_CODESTRAL_CONFIG,
        ),
    ]
}

/// Finds a model by name or alias (case-insensitive; `_` and `.` in `-` positions tolerated).
pub fn find_model(name: &str) -> Option<CatalogModel> {
    let want = name.trim().to_ascii_lowercase().replace('_', "-");
    let models = catalog();
    if let Some(&(base, instruct, repo)) = super::catalog_instruct::INSTRUCT
        .iter()
        .find(|(_, instruct, _)| *instruct == want)
    {
        // The instruction-tuned checkpoint: the base model's shape, its own name and repository.
        let mut m = models.into_iter().find(|m| m.name == base)?;
        m.name = instruct;
        m.aliases = &[];
        m.hf_repo = repo;
        m.arch.name = instruct.to_string();
        return Some(m);
    }
    models
        .into_iter()
        .find(|m| m.name == want || m.aliases.contains(&want.as_str()))
}

/// The instruction-tuned variant of catalog model `name`: its name and repository.
pub fn instruct_of(name: &str) -> Option<(&'static str, &'static str)> {
    super::catalog_instruct::INSTRUCT
        .iter()
        .find(|(base, _, _)| *base == name)
        .map(|&(_, instruct, repo)| (instruct, repo))
}

/// The catalog model (or instruct variant) published as Hub repository `id` (case ignored):
/// its bundled shape answers for the id when the Hub cannot be asked.
pub fn find_by_hub_id(id: &str) -> Option<CatalogModel> {
    let want = id.to_ascii_lowercase();
    if let Some(m) = catalog()
        .into_iter()
        .find(|m| m.hf_repo.to_ascii_lowercase() == want)
    {
        return Some(m);
    }
    let (_, instruct, _) = super::catalog_instruct::INSTRUCT
        .iter()
        .find(|(_, _, repo)| repo.to_ascii_lowercase() == want)?;
    find_model(instruct)
}

/// The catalog name closest to `name` (a typo's likely meaning), when one is within a few
/// edits of it (aliases count, and answer with their model's name).
pub fn closest_model(name: &str) -> Option<&'static str> {
    let want = name.trim().to_ascii_lowercase().replace('_', "-");
    let models = catalog();
    let words = models
        .iter()
        .flat_map(|m| std::iter::once(m.name).chain(m.aliases.iter().copied()));
    let word = crate::spelling::closest(&want, words)?;
    models
        .iter()
        .find(|m| m.name == word || m.aliases.contains(&word))
        .map(|m| m.name)
}
