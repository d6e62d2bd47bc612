//! config.json readings against published configs, field by field.

use super::*;
use serde_json::json;

fn parse(v: Value) -> Result<(ModelArch, Vec<ModelWarning>), ModelError> {
    parse_config(Path::new("config.json"), "test", &v)
}

#[test]
fn mistral_config_json() {
    // mistralai/Mistral-7B-v0.1 config.json, verbatim fields.
    let (arch, warnings) = parse(json!({
        "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
        "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
        "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
        "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
        "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096,
        "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.34.0.dev0",
        "use_cache": true, "vocab_size": 32000
    }))
    .unwrap();
    assert!(warnings.is_empty());
    assert_eq!(arch.params().total, 7_241_732_096);
    assert_eq!(
        arch.kv_elements_per_token_layer() * arch.num_layers * 2,
        131_072
    );
    // llama.cpp caches the whole context for Mistral: its window is not applied.
    assert!(!arch.is_sliding_layer(5));
    assert!(arch.sliding_window.is_none());
}

#[test]
fn unknown_family_warns_with_fields() {
    let (arch, warnings) = parse(json!({
        "model_type": "brand_new", "hidden_size": 1024, "num_hidden_layers": 2,
        "num_attention_heads": 8, "vocab_size": 1000, "intermediate_size": 4096
    }))
    .unwrap();
    assert_eq!(arch.family, "brand_new");
    let ModelWarning::UnknownModelType { fields_used, .. } = &warnings[0] else {
        panic!("{warnings:?}")
    };
    assert_eq!(
        fields_used[..5],
        [
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "vocab_size",
            "intermediate_size"
        ]
    );
}

#[test]
fn bad_fields_are_named() {
    let err = parse(json!({"hidden_size": 1024})).unwrap_err();
    assert_eq!(
        err.to_string(),
        "config.json: missing field 'num_hidden_layers'"
    );
    let err = parse(json!({"hidden_size": "big", "num_hidden_layers": 2})).unwrap_err();
    assert_eq!(
        err.to_string(),
        "config.json: field 'hidden_size' is \"big\", expected a non-negative integer"
    );
    let err = parse(json!({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 3, "vocab_size": 10})).unwrap_err();
    assert!(err.to_string().contains("does not divide"));
    assert!(parse(json!([1, 2])).is_err());
}

#[test]
fn qwen3_next_layers_follow_layer_types_and_missing_fields_are_named() {
    let config = |extra: Value| {
        let mut v = json!({
            "model_type": "qwen3_next", "hidden_size": 256, "num_hidden_layers": 4,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
            "vocab_size": 1000, "intermediate_size": 512, "linear_num_key_heads": 2,
            "linear_num_value_heads": 4, "linear_key_head_dim": 32,
            "linear_value_head_dim": 32, "num_experts": 8, "num_experts_per_tok": 2,
            "moe_intermediate_size": 64, "shared_expert_intermediate_size": 64
        });
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        v
    };
    let (arch, _) = parse(config(json!({}))).unwrap();
    assert_eq!(arch.recurrent_layer_count(), 3);
    assert!(!arch.is_recurrent_layer(3));
    let listed = json!({"layer_types": ["full_attention", "linear_attention",
                                        "full_attention", "linear_attention"]});
    let (arch, _) = parse(config(listed)).unwrap();
    assert_eq!(arch.attention_layer_count(), 2);
    assert!(arch.is_recurrent_layer(1) && !arch.is_recurrent_layer(0));
    let mut broken = config(json!({}));
    broken
        .as_object_mut()
        .unwrap()
        .remove("linear_num_value_heads");
    assert_eq!(
        parse(broken).unwrap_err().to_string(),
        "config.json: missing field 'linear_num_value_heads'"
    );
}

#[test]
fn glm4_moe_biases_q_k_v_and_routes_with_a_bias() {
    let (arch, warnings) = parse(json!({
        "model_type": "glm4_moe", "hidden_size": 256, "intermediate_size": 512,
        "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 64, "attention_bias": true, "use_qk_norm": false,
        "n_routed_experts": 8, "n_shared_experts": 1, "num_experts_per_tok": 2,
        "moe_intermediate_size": 128, "first_k_dense_replace": 1, "vocab_size": 1000
    }))
    .unwrap();
    assert!(warnings.is_empty());
    // Embeddings, final norm; per layer 2 norms, q/k/v/o with q/k/v biases.
    let attention = 256 * 256 * 2 + 2 * 256 * 128 + 256 + 2 * 128;
    let dense = 3 * 256 * 512;
    let moe = 8 * 3 * 256 * 128 + 3 * 256 * 128 + 8 * 256 + 8;
    let expected = 2 * 1000 * 256 + 256 + 3 * (2 * 256 + attention) + dense + 2 * moe;
    assert_eq!(arch.params().total, expected);
}

#[test]
fn recurrent_fields_are_named_as_each_family_writes_them() {
    let err = parse(json!({
        "model_type": "granitemoehybrid", "hidden_size": 256, "num_hidden_layers": 2,
        "num_attention_heads": 4, "vocab_size": 100, "shared_intermediate_size": 64,
        "num_local_experts": 0, "mamba_n_groups": 100000
    }))
    .unwrap_err();
    assert!(err.to_string().contains("field 'mamba_n_groups'"), "{err}");
    let err = parse(json!({
        "model_type": "qwen3_next", "hidden_size": 256, "num_hidden_layers": 4,
        "num_attention_heads": 4, "vocab_size": 100, "linear_num_key_heads": 2,
        "linear_num_value_heads": 4, "linear_key_head_dim": 100000,
        "linear_value_head_dim": 32
    }))
    .unwrap_err();
    assert!(
        err.to_string().contains("field 'linear_key_head_dim'"),
        "{err}"
    );
}

#[test]
fn nemotron_h_layers_are_one_block_each() {
    let config = |pattern: &str| {
        json!({
            "model_type": "nemotron_h", "hidden_size": 256, "num_hidden_layers": 4,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
            "intermediate_size": 512, "vocab_size": 1000, "tie_word_embeddings": false,
            "hybrid_override_pattern": pattern, "mamba_num_heads": 8,
            "mamba_head_dim": 32, "n_groups": 2, "ssm_state_size": 16, "conv_kernel": 4
        })
    };
    let (arch, warnings) = parse(config("M-*-")).unwrap();
    assert!(warnings.is_empty());
    assert_eq!(
        (arch.recurrent_layer_count(), arch.attention_layer_count()),
        (1, 1)
    );
    assert_eq!(arch.ffn_layer_count(), 2);
    // Embeddings and output, final norm; one norm per layer; the Mamba-2 mixer (in_proj to
    // z, x, B, C and Δ; the convolution with bias; Δ bias, A, D; the gated norm; out_proj),
    // q/k/v/o, and two squared-ReLU MLPs of up and down projections.
    let inner = 8 * 32;
    let conv = inner + 2 * 2 * 16;
    let mixer = 256 * (inner + conv + 8) + conv * 4 + conv + 3 * 8 + inner + inner * 256;
    let attention = 2 * 256 * 256 + 2 * 256 * 128;
    let mlp = 2 * 256 * 512;
    let expected = 2 * 1000 * 256 + 256 + 4 * 256 + mixer + attention + 2 * mlp;
    assert_eq!(arch.params().total, expected);
    // Only the attention block caches K and V.
    assert_eq!(arch.kv_elements(100), 2 * 2 * 64 * 100);

    let err = parse(config("M-*")).unwrap_err().to_string();
    assert_eq!(
        err,
        "config.json: field 'hybrid_override_pattern' has 3 blocks for 4 layers \
         (num_hidden_layers)"
    );
    let err = parse(config("----")).unwrap_err().to_string();
    assert!(err.contains("has no M or * block"), "{err}");
    let err = parse(config("MX*-")).unwrap_err().to_string();
    assert!(
        err.contains("field 'hybrid_override_pattern' has 'X'"),
        "{err}"
    );
    let err = parse(config("ME*-")).unwrap_err().to_string();
    assert!(err.contains("mixes - (MLP) and E (experts)"), "{err}");
    // E blocks without expert fields take NemotronHConfig's: 8 experts of 7688, 2 a token.
    let (defaulted, _) = parse(config("ME*E")).unwrap();
    let m = defaulted.moe.as_ref().unwrap();
    assert_eq!(
        (m.experts, m.experts_per_token, m.expert_intermediate),
        (8, 2, 7688)
    );
    let mut none = config("ME*E");
    none["n_routed_experts"] = 0.into();
    assert_eq!(
        parse(none).unwrap_err().to_string(),
        "config.json: missing field 'n_routed_experts'"
    );
    // E blocks: 8 squared-ReLU experts of 64 (up and down, no gate), 2 routed, one shared
    // expert of 128, a router with a correction bias per expert.
    let mut moe = config("ME*E");
    for (k, v) in [
        ("n_routed_experts", 8),
        ("num_experts_per_tok", 2),
        ("moe_intermediate_size", 64),
        ("moe_shared_expert_intermediate_size", 128),
    ] {
        moe[k] = v.into();
    }
    let (arch, _) = parse(moe).unwrap();
    assert_eq!(arch.moe_layers(), 2);
    let experts = 256 * 8 + 8 + 8 * 2 * 256 * 64 + 2 * 256 * 128;
    let expected_moe = 2 * 1000 * 256 + 256 + 4 * 256 + mixer + attention + 2 * experts;
    assert_eq!(arch.params().total, expected_moe);
    let mut missing = config("M-*-");
    missing
        .as_object_mut()
        .unwrap()
        .remove("hybrid_override_pattern");
    assert_eq!(
        parse(missing).unwrap_err().to_string(),
        "config.json: missing field 'hybrid_override_pattern'"
    );
}

#[test]
fn falcon_h1_attends_beside_its_mixer_in_every_layer() {
    let config = |rms_norm: bool| {
        json!({
            "model_type": "falcon_h1", "hidden_size": 256, "num_hidden_layers": 3,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
            "intermediate_size": 512, "vocab_size": 1000, "mamba_d_ssm": 256,
            "mamba_n_heads": 8, "mamba_n_groups": 1, "mamba_d_state": 16,
            "mamba_d_conv": 4, "mamba_rms_norm": rms_norm
        })
    };
    let (with_norm, warnings) = parse(config(true)).unwrap();
    assert!(warnings.is_empty());
    // Every layer holds a KV cache and a recurrent state.
    assert_eq!(with_norm.attention_layer_count(), 3);
    assert_eq!(with_norm.recurrent_layer_count(), 3);
    assert_eq!(with_norm.kv_elements(100), 3 * 2 * 2 * 64 * 100);
    let conv = 256 + 2 * 16;
    let mixer = 256 * (256 + conv + 8) + conv * 4 + conv + 3 * 8 + 256 + 256 * 256;
    let attention = 2 * 256 * 256 + 2 * 256 * 128;
    let mlp = 3 * 256 * 512;
    let layer = 2 * 256 + mixer + attention + mlp;
    assert_eq!(with_norm.params().total, 2 * 1000 * 256 + 256 + 3 * layer);
    // Without mamba_rms_norm the mixer has no gated norm.
    let (without, _) = parse(config(false)).unwrap();
    assert_eq!(with_norm.params().total - without.params().total, 3 * 256);
}

#[test]
fn glm5_2_layers_sharing_an_indexer_are_read_from_indexer_types() {
    // GLM-5 and GLM-5.1: an indexer in every layer (the class's default), read.
    let (arch, _) = parse(json!({ "model_type": "glm_moe_dsa" })).unwrap();
    let i = arch.indexer.unwrap();
    assert_eq!((i.heads, i.head_dim, i.top_k), (32, 128, 2048));
    assert!(!arch.indexer_shared.contains(1));
    // GLM-5.2's indexer_types: a shared layer has no indexer weights and no indexer cache.
    let types = |t: Value| json!({ "model_type": "glm_moe_dsa", "indexer_types": t });
    let (shared, _) = parse(types(json!(["full", "shared"]))).unwrap();
    let (full, _) = parse(types(json!(["full", "full"]))).unwrap();
    assert!(shared.indexer_shared.contains(1) && !shared.indexer_shared.contains(0));
    assert_eq!(
        full.layer_kv_elements_per_token(1) - shared.layer_kv_elements_per_token(1),
        128
    );
    assert!(full.params().total > shared.params().total);
    // The first layer has no earlier top-k to reuse; a frequency or pattern is another
    // spelling gpumem does not read.
    assert!(parse(types(json!(["shared", "full"])))
        .unwrap_err()
        .to_string()
        .contains("first layer"));
    for other in [
        json!({ "model_type": "glm_moe_dsa", "index_topk_freq": 4 }),
        json!({ "model_type": "glm_moe_dsa", "index_topk_pattern": "FFSS" }),
    ] {
        assert!(parse(other)
            .unwrap_err()
            .to_string()
            .contains("index_topk_freq"));
    }
}

#[test]
fn mtp_layers_are_read_from_num_nextn_predict_layers() {
    // GLM-5.1's config.json (code-search index file 62604838642): one MTP layer of 9,952,920,576
    // parameters, without an embedding or head of its own; none where the field is absent.
    let glm = |n: Value| json!({ "model_type": "glm_moe_dsa", "num_nextn_predict_layers": n });
    let (arch, _) = parse(glm(json!(1))).unwrap();
    assert_eq!(arch.mtp.layers, 1);
    assert!(!arch.mtp.own_embeddings);
    assert_eq!(arch.unloaded_params(), 9_952_920_576);
    let (none, _) = parse(json!({ "model_type": "glm_moe_dsa" })).unwrap();
    assert_eq!(none.unloaded_params(), 0);
    assert_eq!(none.params().total, arch.params().total);
    // More MTP layers than decoder layers is no checkpoint's.
    assert!(parse(glm(json!(1000)))
        .unwrap_err()
        .to_string()
        .contains("num_nextn_predict_layers"));
}

#[test]
fn kimi_linear_reads_its_linear_attn_config_and_its_own_spellings() {
    let config = |extra: Value| {
        let mut v = json!({
            "model_type": "kimi_linear", "hidden_size": 256, "num_hidden_layers": 4,
            "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1000, "intermediate_size": 512,
            "moe_intermediate_size": 64, "num_experts": 8, "num_experts_per_token": 2,
            "num_shared_experts": 2, "num_expert_group": 1, "kv_lora_rank": 32,
            "qk_rope_head_dim": 16, "qk_nope_head_dim": 32, "v_head_dim": 32,
            "model_max_length": 4096
        });
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        v
    };
    let nested = json!({"linear_attn_config": {
        "full_attn_layers": [2, 4], "kda_layers": [1, 3], "head_dim": 16, "num_heads": 4,
        "short_conv_kernel_size": 3
    }});
    let (arch, warnings) = parse(config(nested)).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let ssm = arch.ssm.unwrap();
    assert_eq!(
        (ssm.kind, ssm.dt_rank, ssm.state, ssm.inner, ssm.conv_kernel),
        (SsmKind::Kda, 4, 16, 64, 3)
    );
    // 1-indexed: layers 2 and 4 attend.
    assert!(arch.is_recurrent_layer(0) && !arch.is_recurrent_layer(1));
    assert!(arch.is_recurrent_layer(2) && !arch.is_recurrent_layer(3));
    // The q, k and v tails (3 × 2 steps × 64) and a 16 × 16 state per head.
    assert_eq!(ssm.state_elements_per_layer(), 3 * 2 * 64 + 16 * 64);
    let moe = arch.moe.unwrap();
    // KimiLinearConfig's first_k_dense_replace default: the first layer is dense.
    assert_eq!(
        (moe.experts, moe.experts_per_token, moe.shared_intermediate),
        (8, 2, 128)
    );
    assert_eq!((moe.first_dense_layers, moe.router_bias), (1, true));
    assert_eq!(arch.max_position_embeddings, Some(4096));
    // Without the nested config: the flat fields, and transformers' default layers (attention
    // in every fourth from the fifth, 1-indexed).
    let flat = json!({"linear_num_heads": 2, "linear_head_dim": 32, "num_hidden_layers": 6});
    let (arch, _) = parse(config(flat)).unwrap();
    let ssm = arch.ssm.unwrap();
    assert_eq!((ssm.dt_rank, ssm.state, ssm.conv_kernel), (2, 32, 4));
    assert_eq!(arch.attention_layer_count(), 1);
    assert!(!arch.is_recurrent_layer(4));
}

/// moonshotai/Kimi-K3's published config.json (the catalog's copy): the language model nested
/// in `text_config` as `kimi_linear`, read as Kimi-K3 by the top level's `kimi_k3`.
fn kimi_k3_config() -> Value {
    serde_json::from_str(include_str!("../catalog_configs/kimi-k3.json")).unwrap()
}

#[test]
fn kimi_k3_reads_its_text_config_as_kimi_k3() {
    let (arch, warnings) = parse(kimi_k3_config()).unwrap();
    assert_eq!(arch.family_kind(), crate::model::Family::KimiK3);
    assert_eq!(warnings, vec![ModelWarning::VisionTowerNotCounted]);
    // 69 KDA layers of 96 heads of 128 and 24 latent-attention ones (1-indexed 4, 8, …, 92, 93).
    assert_eq!(
        (arch.recurrent_layer_count(), arch.attention_layer_count()),
        (69, 24)
    );
    assert!(!arch.is_recurrent_layer(3) && !arch.is_recurrent_layer(92));
    let ssm = arch.ssm.unwrap();
    assert_eq!((ssm.kind, ssm.dt_rank, ssm.state), (SsmKind::Kda, 96, 128));
    let k3 = arch.kimi_k3.unwrap();
    assert_eq!((k3.res_block, k3.latent, k3.latent_norm), (12, 3584, true));
    assert!(k3.gate_lower_bound && k3.mla_gate && k3.situ_up && k3.renormalize);
    let moe = arch.moe.clone().unwrap();
    assert_eq!(
        (moe.experts, moe.experts_per_token, moe.shared_intermediate),
        (896, 16, 6144)
    );
    assert_eq!(arch.expert_width(), 3584);
}

#[test]
fn kimi_k3_layouts_llama_cpp_does_not_build_are_refused_by_name() {
    let refused = |path: &[&str], v: Value| {
        let mut config = kimi_k3_config();
        let mut at = &mut config["text_config"];
        for key in &path[..path.len() - 1] {
            at = &mut at[*key];
        }
        at[path[path.len() - 1]] = v;
        parse(config).unwrap_err().to_string()
    };
    let err = refused(&["linear_attn_config", "use_full_rank_gate"], json!(false));
    assert!(err.contains("use_full_rank_gate"), "{err}");
    let err = refused(&["mla_use_nope"], json!(false));
    assert!(err.contains("mla_use_nope"), "{err}");
    let err = refused(&["hidden_act"], json!("silu"));
    assert!(err.contains("hidden_act") && err.contains("SiTU"), "{err}");
}
