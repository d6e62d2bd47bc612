//! The defaults table, and config.json readings, against transformers 5.24 itself: each row
//! against its class's own default, each multimodal class's rules against what it builds, and
//! published configs (tests/fixtures/hf-configs-as-published/) against the fields transformers
//! resolves for them (expected.json there, written by resolve.py).

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::{Fill, Tie, WhenAbsent, CLASSES, COMPOSITES};
use crate::model::arch::{Attention, ModelArch};
use crate::model::hf_config::{language_model, parse_config};

fn folder() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hf-configs-as-published")
}

fn expected() -> Value {
    let text = std::fs::read_to_string(folder().join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The language model gpumem reads from `config`, with its defaults filled in.
fn resolve(config: Value) -> language_model::LanguageModel {
    language_model::resolve(Path::new("config.json"), config.as_object().unwrap()).unwrap()
}

/// A default as the JSON value it stands for (`None` for the derived ones).
fn constant(fill: Fill) -> Option<Value> {
    Some(match fill {
        Fill::Uint(v) => json!(v),
        Fill::Float(v) => json!(v),
        Fill::Bool(v) => json!(v),
        Fill::Text(v) => json!(v),
        Fill::Null => Value::Null,
        _ => return None,
    })
}

/// Class defaults the table does not apply (each says why where its class's row is).
const LEFT_OUT: &[(&str, &str)] = &[
    ("mamba2", "num_heads"),
    ("deepseek_v32", "head_dim"),
    ("glm_moe_dsa", "head_dim"),
];

#[test]
fn the_transformers_version_is_the_one_the_table_cites() {
    assert_eq!(expected()["transformers"], "5.24.0");
}

#[test]
fn every_row_is_its_class_default_and_every_default_read_is_a_row() {
    let expected = expected();
    let mut wrong = Vec::new();
    for class in CLASSES {
        let e = &expected["classes"][class.model_type];
        assert_eq!(e["class"], class.class, "{}", class.model_type);
        let defaults = e["defaults"].as_object().unwrap();
        for (field, fill) in class.fields {
            let theirs = defaults.get(*field);
            if constant(*fill).as_ref() != theirs {
                wrong.push(format!("{}.{field}: {fill:?}, {theirs:?}", class.class));
            }
        }
        // Every field gpumem reads that the class defaults to a value is in the table, but
        // the ones left out on purpose.
        for (field, value) in defaults {
            let left_out = LEFT_OUT.contains(&(class.model_type, field.as_str()));
            if !value.is_null() && !left_out && !class.fields.iter().any(|(f, _)| f == field) {
                wrong.push(format!("{}.{field} = {value} missing", class.class));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn derived_values_are_what_each_class_computes() {
    let expected = expected();
    let mut wrong = Vec::new();
    for class in CLASSES {
        let resolved = &expected["classes"][class.model_type]["resolved"];
        let lm = resolve(json!({ "model_type": class.model_type }));
        for (field, _) in class.derived {
            if lm.map.get(*field) != resolved.get(*field) {
                wrong.push(format!("{}.{field}: {:?}", class.class, lm.map.get(*field)));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn multimodal_classes_find_their_language_model_as_transformers_does() {
    let expected = expected();
    let shape = [
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "vocab_size",
        "intermediate_size",
        "sliding_window",
    ];
    for c in COMPOSITES {
        let e = &expected["composites"][c.model_type];
        assert_eq!(e["class"], c.class);
        assert_eq!(e["text_model_type"], c.text_model_type, "{}", c.class);
        assert_eq!(e["by_model_type"], c.by_model_type, "{}", c.class);
        assert_eq!(e["flat"], c.when_absent == WhenAbsent::Flat, "{}", c.class);
        let (default, carried) = (&e["tie_default"], &e["tie_carried_from_text"]);
        match c.tie {
            Tie::Own(d) => assert_eq!((default, carried), (&json!(d), &json!(false))),
            Tie::OwnOrText(d) => assert_eq!((default, carried), (&json!(d), &json!(true))),
            // The one exception, Mistral3: its class says tied, its checkpoints are not.
            Tie::Text => assert_eq!(default, &json!(true), "{}", c.class),
        }
        // With no text_config, the language model the class builds on its own.
        let lm = resolve(json!({ "model_type": c.model_type }));
        for field in shape {
            let theirs = &e["bare_text"][field];
            if !theirs.is_null() {
                assert_eq!(lm.map.get(field), Some(theirs), "{}.{field}", c.class);
            }
        }
    }
}

/// Where gpumem's reading of a fixture differs from transformers', one line a field.
fn differences(name: &str, arch: &ModelArch, e: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut check = |field: &str, ours: Option<u64>, theirs: Option<u64>| {
        if ours != theirs {
            out.push(format!("{name}: {field} {ours:?}, transformers {theirs:?}"));
        }
    };
    let get = |k: &str| e[k].as_u64();
    check("hidden_size", Some(arch.hidden_size), get("hidden_size"));
    check("layers", Some(arch.num_layers), get("num_hidden_layers"));
    check("heads", Some(arch.num_heads), get("num_attention_heads"));
    check(
        "kv heads",
        Some(arch.num_kv_heads),
        get("num_key_value_heads"),
    );
    // MLA's head size is its no-RoPE and RoPE parts (DeepSeek's head_dim names the latter).
    let head_dim = match arch.attention {
        Attention::Mla { .. } => get("qk_nope_head_dim").zip(get("qk_rope_head_dim")),
        _ => None,
    }
    .map(|(nope, rope)| nope + rope)
    .or_else(|| get("head_dim"));
    check("head_dim", Some(arch.head_dim), head_dim);
    check("vocab", Some(arch.vocab_size), get("vocab_size"));
    check(
        "max positions",
        arch.max_position_embeddings,
        get("max_position_embeddings"),
    );
    // Llama 4's dense layers are intermediate_size_mlp wide (its experts intermediate_size);
    // Falcon's MLP is ffn_hidden_size.
    let mlp = [
        "intermediate_size_mlp",
        "intermediate_size",
        "ffn_hidden_size",
    ]
    .into_iter()
    .find_map(get);
    // A model of experts in every layer (Qwen3.5-MoE's class has no MLP width) runs no dense
    // MLP: the width gpumem falls back to is never read.
    let all_experts = arch
        .moe
        .as_ref()
        .is_some_and(|m| m.first_dense_layers == 0 && m.layer_freq <= 1);
    if mlp.is_some() || !all_experts {
        check("intermediate", Some(arch.intermediate_size), mlp);
    }
    let experts = get("num_local_experts").or_else(|| get("num_experts"));
    check("experts", arch.moe.as_ref().map(|m| m.experts), experts);
    let per_token = arch.moe.as_ref().map(|m| m.experts_per_token);
    check(
        "experts a token",
        per_token,
        experts.and(get("num_experts_per_tok")),
    );
    // Gemma 4's per-layer embeddings and KV-sharing layers.
    let edge = arch.edge.unwrap_or_default();
    let set = |n: Option<u64>| n.filter(|&n| n > 0);
    check(
        "per-layer input",
        set(Some(edge.per_layer_input)),
        set(get("hidden_size_per_layer_input")),
    );
    check(
        "KV-sharing layers",
        set(Some(edge.kv_shared_layers)),
        set(get("num_kv_shared_layers")),
    );
    out.extend(window_differences(name, arch, e));
    out
}

/// Sliding (and Llama 4's chunked) layers and their window, against transformers' layer_types.
fn window_differences(name: &str, arch: &ModelArch, e: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if arch.family_kind().window_ignored_by_llama_cpp() {
        // llama.cpp caches the whole context; the window transformers applies is kept apart.
        // Qwen2-MoE writes 0 for no window.
        let theirs = e["sliding_window"].as_u64().filter(|&w| w > 0);
        if arch.sliding_window.is_some() || arch.transformers_window != theirs {
            out.push(format!("{name}: window {:?}", arch.transformers_window));
        }
        return out;
    }
    let types = e["layer_types"].as_array().cloned().unwrap_or_default();
    let windowed =
        |t: &Value| matches!(t.as_str(), Some("sliding_attention" | "chunked_attention"));
    for (i, t) in (0..).zip(&types) {
        if arch.is_sliding_layer(i) != windowed(t) {
            out.push(format!("{name}: layer {i} is {t}"));
        }
    }
    let window = match types.iter().find(|t| windowed(t)).and_then(Value::as_str) {
        Some("chunked_attention") => e["attention_chunk_size"].as_u64(),
        Some(_) => e["sliding_window"].as_u64(),
        None => None,
    };
    if arch.sliding_window.as_ref().map(|w| w.window) != window {
        out.push(format!(
            "{name}: window {:?}, transformers {window:?}",
            arch.sliding_window
        ));
    }
    out
}

#[test]
fn published_configs_read_as_transformers_resolves_them() {
    let expected = expected();
    let fixtures = expected["fixtures"].as_object().unwrap();
    assert!(fixtures.len() >= 10, "{}", fixtures.len());
    let mut wrong = Vec::new();
    for (name, e) in fixtures {
        let path = folder().join(format!("{name}.json"));
        let config: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let lm = resolve(config.clone());
        if Some(lm.model_type.as_str()) != e["text_model_type"].as_str() {
            wrong.push(format!("{name}: read as {}", lm.model_type));
        }
        let arch = match parse_config(&path, name, &config) {
            Ok((arch, _)) => arch,
            Err(err) => {
                wrong.push(format!("{name}: {err}"));
                continue;
            }
        };
        wrong.extend(differences(name, &arch, e));
        let composite = super::composite_of(e["model_type"].as_str().unwrap_or(""));
        let tie_key = match composite.map(|c| c.tie) {
            Some(Tie::Text) => "text_tie_word_embeddings",
            _ => "tie_word_embeddings",
        };
        if Some(arch.tie_word_embeddings) != e[tie_key].as_bool() {
            wrong.push(format!("{name}: tied {}", arch.tie_word_embeddings));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn gemma_3_4b_takes_its_heads_and_vocabulary_from_gemma3_text_config() {
    let config = std::fs::read(folder().join("gemma-3-4b-it.json")).unwrap();
    let config: Value = serde_json::from_slice(&config).unwrap();
    let (arch, warnings) =
        parse_config(Path::new("config.json"), "gemma-3-4b-it", &config).unwrap();
    assert_eq!(arch.family, "gemma3_text");
    assert_eq!(
        (
            arch.num_heads,
            arch.num_kv_heads,
            arch.head_dim,
            arch.vocab_size
        ),
        (8, 4, 256, 262_208)
    );
    // 5 local layers of 1024 tokens, then a global one.
    assert!(arch.is_sliding_layer(4) && !arch.is_sliding_layer(5));
    assert!(arch.tie_word_embeddings);
    assert_eq!(warnings.len(), 1, "only the vision tower: {warnings:?}");
}

#[test]
fn qwen_vl_language_models_are_read_by_qwen2s_rules() {
    let config = std::fs::read(folder().join("qwen2.5-vl-7b-instruct.json")).unwrap();
    let config: Value = serde_json::from_slice(&config).unwrap();
    let (arch, _) = parse_config(Path::new("config.json"), "qwen2.5-vl", &config).unwrap();
    assert_eq!(arch.family, "qwen2");
    // Qwen2's biased q/k/v: 28 layers × (3584 + 2 × 512) biases.
    let mut unbiased = arch.clone();
    unbiased.attention = crate::model::arch::Attention::Standard {
        qkv_bias: false,
        o_bias: false,
        qk_norm: false,
    };
    assert_eq!(
        arch.params().total - unbiased.params().total,
        28 * (3584 + 2 * 512)
    );
}

#[test]
fn given_fields_are_kept_and_none_takes_what_the_class_derives() {
    // A null num_key_value_heads is None to LlamaConfig: it takes num_attention_heads.
    let lm = resolve(json!({ "model_type": "llama", "num_attention_heads": 8,
                             "hidden_size": 1024, "num_key_value_heads": null }));
    assert_eq!(lm.map["num_key_value_heads"], 8);
    assert_eq!(lm.map["head_dim"], 128);
    // A null with a constant default stays None (Mistral Small's window).
    let lm = resolve(json!({ "model_type": "mistral", "sliding_window": null }));
    assert_eq!(lm.map["sliding_window"], Value::Null);
    // A field written under another spelling is that field: no default beside it
    // (NemotronHConfig reads mamba_n_groups as n_groups).
    let lm = resolve(json!({ "model_type": "nemotron_h", "mamba_n_groups": 2 }));
    assert!(!lm.map.contains_key("n_groups"));
    // Nothing is filled for a model_type with no class in the table.
    let lm = resolve(json!({ "model_type": "brand_new" }));
    assert_eq!(
        lm.map,
        Map::from_iter([("model_type".to_string(), json!("brand_new"))])
    );
}

#[test]
fn a_text_config_that_is_no_object_is_named() {
    let config = json!({ "model_type": "gemma3", "text_config": [1] });
    let err = parse_config(Path::new("config.json"), "x", &config).unwrap_err();
    assert_eq!(
        err.to_string(),
        "config.json: field 'text_config' is not an object (Gemma3Config nests its language \
         model there)"
    );
}

/// Bare classes whose model gpumem cannot read, and why.
const UNREADABLE_BARE: &[(&str, &str)] = &[
    (
        "deepseek_v2",
        "DeepseekV2Config leaves num_experts_per_tok None for its 64 experts",
    ),
    (
        "nemotron_h",
        "NemotronHConfig's default layers mix MLP and expert blocks",
    ),
];

#[test]
fn bare_classes_read_as_transformers_builds_them() {
    let expected = expected();
    let mut wrong = Vec::new();
    for class in CLASSES {
        let e = &expected["classes"][class.model_type]["model"];
        let config = json!({ "model_type": class.model_type });
        let read = parse_config(Path::new("config.json"), class.model_type, &config);
        let unreadable = UNREADABLE_BARE.iter().any(|(t, _)| *t == class.model_type);
        match read {
            Ok(_) if unreadable => wrong.push(format!("{}: now read", class.class)),
            Err(_) if unreadable => {}
            Err(err) => wrong.push(format!("{}: {err}", class.class)),
            Ok((arch, _)) if arch.ssm.is_some() && arch.num_heads == 0 => {
                wrong.extend(state_space_differences(class.class, &arch, e));
            }
            Ok((arch, _)) => wrong.extend(differences(class.class, &arch, e)),
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// A state-space model's mixer against MambaConfig's and Mamba2Config's fields.
fn state_space_differences(name: &str, arch: &ModelArch, e: &Value) -> Vec<String> {
    let get = |k: &str| e[k].as_u64();
    let Some(ssm) = &arch.ssm else {
        return vec![format!("{name}: no mixer")];
    };
    let inner = get("intermediate_size").or_else(|| Some(get("expand")? * get("hidden_size")?));
    // Mamba's Δ rank; Mamba-2's Δ is one a head.
    let heads = get("num_heads").or_else(|| get("time_step_rank"));
    let pairs = [
        ("hidden_size", arch.hidden_size, get("hidden_size")),
        ("layers", arch.num_layers, get("num_hidden_layers")),
        ("vocab", arch.vocab_size, get("vocab_size")),
        ("inner", ssm.inner, inner),
        ("state", ssm.state, get("state_size")),
        ("conv kernel", ssm.conv_kernel, get("conv_kernel")),
        ("dt rank / heads", ssm.dt_rank, heads),
        ("groups", ssm.groups, get("n_groups").or(Some(0))),
    ];
    let mut out: Vec<String> = pairs
        .iter()
        .filter(|(_, ours, theirs)| Some(*ours) != *theirs)
        .map(|(field, ours, theirs)| format!("{name}: {field} {ours}, transformers {theirs:?}"))
        .collect();
    if Some(arch.tie_word_embeddings) != e["tie_word_embeddings"].as_bool() {
        out.push(format!("{name}: tied {}", arch.tie_word_embeddings));
    }
    out
}
