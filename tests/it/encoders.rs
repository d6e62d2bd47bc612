//! Encoders llama-server serves (BERT embeddings, an XLM-RoBERTa reranker) through the binary:
//! the GGUF a `llamacpp/` fixture describes, written here as a sparse file, is estimated with no
//! KV cache and llama.cpp's own compute and output buffers, and `select` launches llama-server
//! with `--embedding` or `--rerank`.

#![allow(clippy::unwrap_used)]

use crate::common;

use serde_json::Value;

fn written(name: &str, dir: &std::path::Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(common::fixture(&format!("llamacpp/{name}.json"))).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    let path = dir.join(format!("{name}.gguf"));
    common::write_described_gguf(name, &doc, &path);
    path
}

#[test]
fn an_encoder_has_no_kv_cache_and_llama_cpp_s_buffers() {
    let dir = tempfile::tempdir().unwrap();
    let gguf = written("bge-small-en-v1.5-shape", dir.path());
    let json = common::json_ok(common::gpumem().args([
        "--json",
        "estimate",
        "--gguf",
        gguf.to_str().unwrap(),
        "--context",
        "512",
        "--flash-attention",
    ]));
    assert_eq!(json["kv_cache_bytes"], 0);
    assert_eq!(json["kv_bytes_per_token"], 0);
    assert_eq!(json["activations_basis"], "graph_replay");
    // llama.cpp's CPU compute buffer for this shape at 512 tokens with flash attention
    // (breakdown, BREAKDOWN_EMBEDDINGS=1: 6,035,488 bytes) and its output buffer: one
    // sequence's logits and embedding, (30,522 + 384) × 4 bytes.
    assert_eq!(json["activation_bytes"], 6_035_488 + (30_522 + 384) * 4);
    assert_eq!(json["weights_bytes"], 66_547_200);
    assert_eq!(json["model"]["pooling"], "cls");
    let out = common::gpumem()
        .args([
            "estimate",
            "--gguf",
            gguf.to_str().unwrap(),
            "--context",
            "512",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("encoder: no KV cache; each input is one micro-batch of up to 512 tokens"),
        "{text}"
    );
    assert!(!text.contains("KV cache per token"), "{text}");
}

#[test]
fn select_serves_embeddings_and_rerankers() {
    let dir = tempfile::tempdir().unwrap();
    for (name, flag) in [
        ("bge-small-en-v1.5-shape", "--embedding"),
        ("bge-reranker-v2-m3-shape", "--rerank"),
    ] {
        let gguf = written(name, dir.path());
        let json = common::json_ok(common::gpumem().args([
            "--json",
            "select",
            "--engine",
            "llama.cpp",
            "--gguf",
            gguf.to_str().unwrap(),
            "--context",
            "512",
            "--device",
            "sim:4GiB",
        ]));
        let argv: Vec<&str> = json["launch"][0]["commands"][0]["argv"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(argv[0], "llama-server", "{name}: {argv:?}");
        assert!(argv.contains(&flag), "{name}: {argv:?}");
        // No KV cache, so no capacity in tokens of one.
        assert!(
            json["plan"]["capacity"].is_null(),
            "{name}: {}",
            json["plan"]
        );
    }
}
