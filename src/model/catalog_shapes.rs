//! The catalog's building blocks: the model record and the constructors its rows read like
//! their config.json files through (`src/model/catalog.rs` holds the rows).

// The constructors take one argument per config.json field, in config.json order, so each
// catalog line reads like the file it comes from.
#![allow(clippy::too_many_arguments)]

use super::arch::{llama_like, Attention, ModelArch, Moe, SlidingLayers, SlidingWindow};

/// A model whose shape is built in, so `estimate -m NAME` works offline.
#[derive(Debug, Clone)]
pub struct CatalogModel {
    /// Canonical name, e.g. `mistral-7b`.
    pub name: &'static str,
    /// Other names it answers to.
    pub aliases: &'static [&'static str],
    /// The Hugging Face repository whose config.json the fields come from.
    pub hf_repo: &'static str,
    /// Its shape, as its published config.json gives it.
    pub arch: ModelArch,
    /// The published checkpoint's weight bytes when its config fixes them (a
    /// `quantization_config` such as gpt-oss's MXFP4 experts); else weights follow `--dtype`.
    pub checkpoint_weights: Option<super::FileWeights>,
}

pub(super) fn with<F: FnOnce(&mut ModelArch)>(
    mut arch: ModelArch,
    family: &str,
    max_pos: u64,
    f: F,
) -> ModelArch {
    arch.family = family.to_string();
    arch.max_position_embeddings = Some(max_pos);
    f(&mut arch);
    arch
}

pub(super) fn qwen2(
    name: &str,
    h: u64,
    i: u64,
    l: u64,
    heads: u64,
    kv: u64,
    vocab: u64,
    tied: bool,
    max_pos: u64,
) -> ModelArch {
    with(
        llama_like(name, h, i, l, heads, kv, vocab),
        "qwen2",
        max_pos,
        |a| {
            a.tie_word_embeddings = tied;
            a.attention = Attention::Standard {
                qkv_bias: true,
                o_bias: false,
                qk_norm: false,
            };
        },
    )
}

pub(super) fn qwen3(
    name: &str,
    h: u64,
    i: u64,
    l: u64,
    heads: u64,
    kv: u64,
    tied: bool,
) -> ModelArch {
    with(
        llama_like(name, h, i, l, heads, kv, 151_936),
        "qwen3",
        40_960,
        |a| {
            a.head_dim = 128;
            a.tie_word_embeddings = tied;
            a.attention = Attention::Standard {
                qkv_bias: false,
                o_bias: false,
                qk_norm: true,
            };
        },
    )
}

pub(super) fn gemma(
    name: &str,
    h: u64,
    i: u64,
    l: u64,
    heads: u64,
    kv: u64,
    head_dim: u64,
) -> ModelArch {
    with(
        llama_like(name, h, i, l, heads, kv, 256_000),
        "gemma",
        8192,
        |a| {
            a.head_dim = head_dim;
            a.tie_word_embeddings = true;
            a.query_prescaled = true;
        },
    )
}

pub(super) fn gemma2(
    name: &str,
    h: u64,
    i: u64,
    l: u64,
    heads: u64,
    kv: u64,
    head_dim: u64,
) -> ModelArch {
    with(
        gemma(name, h, i, l, heads, kv, head_dim),
        "gemma2",
        8192,
        |a| {
            a.norms_per_layer = 4;
            a.sliding_window = Some(SlidingWindow {
                window: 4096,
                layers: SlidingLayers::Even,
            });
        },
    )
}

pub(super) fn phi3(
    name: &str,
    h: u64,
    i: u64,
    l: u64,
    heads: u64,
    kv: u64,
    vocab: u64,
    max_pos: u64,
) -> ModelArch {
    with(
        llama_like(name, h, i, l, heads, kv, vocab),
        "phi3",
        max_pos,
        |a| a.fused_projections = true,
    )
}

/// `a` with the sliding window transformers applies (config.json's `sliding_window`).
pub(super) fn with_window(mut a: ModelArch, window: u64) -> ModelArch {
    a.transformers_window = Some(window);
    a
}

pub(super) fn mixtral(
    name: &str,
    h: u64,
    i: u64,
    l: u64,
    heads: u64,
    kv: u64,
    vocab: u64,
) -> ModelArch {
    with(
        llama_like(name, h, i, l, heads, kv, vocab),
        "mixtral",
        32_768,
        |a| {
            a.moe = Some(Moe {
                experts: 8,
                experts_per_token: 2,
                expert_intermediate: i,
                shared_intermediate: 0,
                first_dense_layers: 0,
                layer_freq: 1,
                router_bias: false,
                shared_gate: false,
                scaled_weights: false,
                groups: (0, 0),
            });
        },
    )
}

pub(super) fn m(
    name: &'static str,
    aliases: &'static [&'static str],
    hf_repo: &'static str,
    arch: ModelArch,
) -> CatalogModel {
    CatalogModel {
        name,
        aliases,
        hf_repo,
        arch,
        checkpoint_weights: None,
    }
}

/// A catalog model read from (the architecture fields of) its published config.json, through
/// the same parser as `--config`, so the two can never disagree.
pub(super) fn from_config(
    name: &'static str,
    aliases: &'static [&'static str],
    hf_repo: &'static str,
    config: &str,
) -> CatalogModel {
    let value: serde_json::Value =
        serde_json::from_str(config).expect("catalog configs are valid JSON (tested)");
    let path = std::path::Path::new(hf_repo);
    let (mut arch, _) =
        super::parse_config(path, name, &value).expect("catalog configs parse (tested)");
    arch.name = name.to_string();
    let checkpoint_weights = super::hf_config::config_weights(path, &value, &arch)
        .expect("catalog quantization configs are known (tested)");
    CatalogModel {
        name,
        aliases,
        hf_repo,
        arch,
        checkpoint_weights,
    }
}

/// openai/gpt-oss-{20b,120b}: the architecture fields of the published config.json.
pub(super) fn gpt_oss_config(layers: u64, experts: u64) -> String {
    let types: Vec<&str> = (0..layers)
        .map(|i| {
            if i % 2 == 0 {
                "\"sliding_attention\""
            } else {
                "\"full_attention\""
            }
        })
        .collect();
    format!(
        r#"{{"model_type": "gpt_oss", "attention_bias": true, "head_dim": 64,
            "hidden_size": 2880, "intermediate_size": 2880, "num_attention_heads": 64,
            "num_key_value_heads": 8, "num_hidden_layers": {layers},
            "num_local_experts": {experts}, "num_experts_per_tok": 4,
            "layer_types": [{}], "sliding_window": 128, "max_position_embeddings": 131072,
            "tie_word_embeddings": false, "vocab_size": 201088,
            "quantization_config": {{"quant_method": "mxfp4"}}}}"#,
        types.join(", ")
    )
}

/// meta-llama/Llama-4-{Scout-17B-16E,Maverick-17B-128E}: the text model's fields.
pub(super) fn llama4_config(experts: u64, step: u64, max_pos: u64) -> String {
    format!(
        r#"{{"model_type": "llama4_text", "hidden_size": 5120, "intermediate_size": 8192,
            "intermediate_size_mlp": 16384, "num_hidden_layers": 48, "num_attention_heads": 40,
            "num_key_value_heads": 8, "head_dim": 128, "num_local_experts": {experts},
            "num_experts_per_tok": 1, "interleave_moe_layer_step": {step},
            "attention_chunk_size": 8192, "vocab_size": 202048, "tie_word_embeddings": false,
            "max_position_embeddings": {max_pos}}}"#
    )
}
