//! Gemma 4's GGUF headers and config.json files beside the measured ones
//! (`tests/fixtures/llamacpp/gemma-4-*.json`): what gpumem does not model is refused by name,
//! and the forms transformers saves read as the ones published.

#![allow(clippy::unwrap_used)]

use crate::common;
use common::described_file;

use gpumem::model::{arch_from_gguf, GgufValue};
use serde_json::Value;
use std::path::Path;

fn fixture(name: &str) -> Value {
    let text = std::fs::read_to_string(common::fixture(&format!("llamacpp/{name}"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

// What gpumem does not model of Gemma 4 is refused by name, from a GGUF header and from
// config.json: experts other than 26B-A4B's (or beside per-layer embeddings), per-layer
// embeddings without their table, KV sharing that leaves a kind of layer no cache of its own or
// keeps K weights in a sharing layer, MLP widths varying otherwise than E2B's.
#[test]
fn gemma4_variants_not_modelled_are_refused_by_name() {
    let refused = |name: &str, edits: &[(&str, GgufValue)], what: &str| {
        let doc = fixture(name);
        let mut file = described_file(name, &doc);
        for (key, value) in edits {
            file.metadata.insert(format!("gemma4.{key}"), value.clone());
        }
        let err = arch_from_gguf(Path::new(name), &file)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("gemma4.{}", edits[0].0))
                && err.contains(what)
                && err.contains("not modelled yet"),
            "{err}"
        );
    };
    let dense = "gemma-4-layout.json";
    let edge = "gemma-4-e2b-layout.json";
    let int = GgufValue::Int;
    // Experts without 26B-A4B's router scale and per-expert scales in every layer.
    refused(
        dense,
        &[("expert_count", int(256))],
        "not every layer has experts",
    );
    refused(
        edge,
        &[("expert_count", int(8))],
        "experts beside per-layer embeddings",
    );
    refused(
        dense,
        &[("embedding_length_per_layer_input", int(256))],
        "per_layer_token_embd is not a table",
    );
    // 31B's last layer keeps its K projection.
    refused(
        dense,
        &[("attention.shared_kv_layers", int(1))],
        "has K weights of its own",
    );
    let list = |w: &[i128]| GgufValue::Array {
        len: w.len() as u64,
        ints: w.to_vec(),
    };
    // Layers 1 full and 2 sliding: the sharing layers would read caches of the other kind.
    refused(
        "gemma-4-e4b-layout.json",
        &[
            ("attention.shared_kv_layers", int(3)),
            (
                "attention.sliding_window_pattern",
                list(&[1, 0, 1, 1, 1, 0]),
            ),
        ],
        "not a sliding then a full one",
    );
    refused(
        edge,
        &[(
            "feed_forward_length",
            list(&[6144, 6144, 6144, 12288, 12288, 6144]),
        )],
        "varies by layer",
    );
    let config = |extra: serde_json::Value| {
        let mut text = serde_json::json!({
            "model_type": "gemma4_text", "hidden_size": 1536, "num_hidden_layers": 35,
            "num_attention_heads": 8, "num_key_value_heads": 1, "vocab_size": 262144,
            "num_kv_shared_layers": 20
        });
        text.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let doc = serde_json::json!({ "model_type": "gemma4", "text_config": text });
        gpumem::model::parse_config(Path::new("config.json"), "g", &doc)
    };
    for (extra, field, what) in [
        (
            serde_json::json!({"vocab_size_per_layer_input": 128}),
            "vocab_size_per_layer_input",
            "differs from vocab_size",
        ),
        (
            serde_json::json!({"enable_moe_block": true, "num_experts": 8, "top_k_experts": 2,
                               "moe_intermediate_size": 256}),
            "enable_moe_block",
            "beside per-layer embeddings",
        ),
        (
            serde_json::json!({"num_kv_shared_layers": 35}),
            "num_kv_shared_layers",
            "leaves no layer a KV cache",
        ),
        // 5 sliding to 1 full: layers 12 and 13 are both sliding.
        (
            serde_json::json!({"num_kv_shared_layers": 21}),
            "num_kv_shared_layers",
            "not a sliding then a full one",
        ),
    ] {
        let err = config(extra).unwrap_err().to_string();
        assert!(
            err.contains(field) && err.contains(what) && err.contains("not modelled yet"),
            "{err}"
        );
    }
    // Gemma4TextConfig's defaults where the config gives none: per-layer embeddings of 256,
    // 5 sliding layers to 1 full, so that 17 shared layers read layers 16 (sliding) and 17
    // (full).
    let arch = config(serde_json::json!({"num_kv_shared_layers": 17}))
        .unwrap()
        .0;
    let edge = arch.edge.unwrap();
    assert_eq!((edge.per_layer_input, edge.kv_shared_layers), (256, 17));
    assert_eq!(
        (arch.kv_source(17), arch.kv_source(18), arch.kv_source(23)),
        (None, Some(16), Some(17))
    );
}

// Gemma 4's full layers as transformers saves them (`per_layer_config`) read as from the
// kwargs a published config.json gives.
#[test]
fn gemma4_per_layer_config_reads_as_its_kwargs() {
    let text = |extra: serde_json::Value| {
        let mut t = serde_json::json!({
            "model_type": "gemma4_text", "hidden_size": 5376, "num_hidden_layers": 4,
            "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 256,
            "attention_k_eq_v": true, "intermediate_size": 21504, "vocab_size": 262144,
            "sliding_window": 1024, "hidden_size_per_layer_input": 0,
            "layer_types": ["sliding_attention", "full_attention",
                            "sliding_attention", "full_attention"]
        });
        t.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        gpumem::model::parse_config(Path::new("config.json"), "g", &t)
    };
    let kwargs = text(serde_json::json!({
        "global_head_dim": 512, "num_global_key_value_heads": 4
    }))
    .unwrap()
    .0;
    let saved = text(serde_json::json!({ "per_layer_config": {
        "01": { "head_dim": 512, "num_key_value_heads": 4 },
        "03": { "head_dim": 512, "num_key_value_heads": 4 }
    }}))
    .unwrap()
    .0;
    assert_eq!(saved, kwargs);
    let full = kwargs.full_attention.unwrap();
    assert_eq!((full.head_dim, full.kv_heads, full.k_eq_v), (512, 4, true));
    let err = text(serde_json::json!({ "per_layer_config": {
        "01": { "head_dim": 512, "num_key_value_heads": 4 },
        "03": { "head_dim": 256, "num_key_value_heads": 4 }
    }}))
    .unwrap_err()
    .to_string();
    assert!(err.contains("per_layer_config"), "{err}");
}
