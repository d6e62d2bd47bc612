//! `gpumem estimate`: exact bytes for catalog models, config.json, GGUF and safetensors, and
//! clean failures on bad input.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::gpumem;

use std::path::Path;

use serde_json::Value;

pub(crate) fn estimate_json(args: &[&str]) -> Value {
    common::json_ok(gpumem().args(["--json", "estimate"]).args(args))
}

pub(crate) fn fixture(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(path)
        .to_string_lossy()
        .into_owned()
}

pub(crate) fn expected(path: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture(path)).unwrap()).unwrap()
}

#[test]
fn mistral_7b_published_figures() {
    let doc = estimate_json(&["--model", "mistral-7b"]);
    assert_eq!(doc["schema_version"], 1);
    assert_eq!(doc["model"]["parameters"], 7_241_732_096u64);
    assert_eq!(doc["model"]["source"], "catalog");
    assert_eq!(doc["weights_bytes"], 14_483_464_192u64);
    assert_eq!(doc["kv_bytes_per_token"], 131_072);
    assert_eq!(doc["kv_cache_bytes"], 131_072u64 * 4096);
    // Inference's figures are llama.cpp's own: no generic reserve unless asked for.
    assert_eq!(doc["overhead_bytes"], 0);
    assert_eq!(doc["fragmentation_bytes"], 0);
    let parts: u64 = [
        "weights_bytes",
        "kv_cache_bytes",
        "activation_bytes",
        "overhead_bytes",
        "fragmentation_bytes",
    ]
    .iter()
    .map(|k| doc[k].as_u64().unwrap())
    .sum();
    assert_eq!(doc["total_bytes"].as_u64().unwrap(), parts);
    assert_eq!(doc["settings"]["dtype"], "bf16");
    assert_eq!(doc["settings"]["batch"], 1);
}

#[test]
fn llama_2_7b_and_settings() {
    let doc = estimate_json(&[
        "--model",
        "llama-2-7b",
        "--dtype",
        "f16",
        "--batch",
        "4",
        "--context",
        "2048",
        "--kv-dtype",
        "fp8",
    ]);
    assert_eq!(doc["model"]["parameters"], 6_738_415_616u64);
    assert_eq!(doc["kv_bytes_per_token"], 262_144);
    assert_eq!(doc["kv_cache_bytes"], 262_144u64 * 2048 * 4);
    let int4 = estimate_json(&["--model", "llama-2-7b", "--dtype", "int4"]);
    assert_eq!(int4["weights_bytes"], 6_738_415_616u64 / 2);
    // GPTQ's layout: a 16-bit scale for each group of 128 weights.
    let gptq = estimate_json(&["--model", "llama-2-7b", "--dtype", "gptq"]);
    assert_eq!(gptq["weights_bytes"], 6_738_415_616u64 / 128 * 66);
    let q8 = estimate_json(&["--model", "llama-2-7b", "--dtype", "q8_0"]);
    assert_eq!(q8["weights_bytes"], 6_738_415_616u64 / 32 * 34);
}

#[test]
fn mixtral_reports_active_parameters() {
    let doc = estimate_json(&["--model", "mixtral-8x7b"]);
    assert_eq!(doc["model"]["parameters"], 46_702_792_704u64);
    assert_eq!(doc["model"]["active_parameters"], 12_879_925_248u64);
}

/// `--recipe mixed` under DDP, which the walk does not cover: the closed formula (bf16 weights
/// and gradients, an fp32 master copy, fp32 AdamW moments, Korthikanti's activations).
#[test]
fn training_breakdown() {
    let doc = estimate_json(&[
        "--model",
        "mistral-7b",
        "--mode",
        "train",
        "--recipe",
        "mixed",
        "--ddp",
        "--optimizer",
        "adamw",
        "--context",
        "1024",
    ]);
    let p = 7_241_732_096u64;
    assert_eq!(doc["training"]["gradients_bytes"], 2 * p);
    assert_eq!(doc["training"]["optimizer_bytes"], 8 * p);
    assert_eq!(doc["training"]["master_weights_bytes"], 4 * p);
    assert_eq!(doc["kv_cache_bytes"], 0);
    let full = doc["activation_bytes"].as_u64().unwrap();
    let ckpt = estimate_json(&[
        "--model",
        "mistral-7b",
        "--mode",
        "train",
        "--recipe",
        "mixed",
        "--ddp",
        "--context",
        "1024",
        "--checkpointing",
    ]);
    assert!(ckpt["activation_bytes"].as_u64().unwrap() * 4 < full);
    // s·b·h·(34 + 5·a·s/h) per layer: 1024·4096·(34 + 5·32·1024/4096) × 32 layers.
    assert_eq!(full, 1024 * 4096 * (34 + 5 * 32 * 1024 / 4096) * 32);
}

#[test]
fn config_json_source() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json");
    std::fs::write(
        &path,
        r#"{"model_type":"qwen2","hidden_size":3584,"intermediate_size":18944,"num_hidden_layers":28,
            "num_attention_heads":28,"num_key_value_heads":4,"vocab_size":152064,"tie_word_embeddings":false,
            "max_position_embeddings":131072,"sliding_window":131072,"use_sliding_window":false}"#,
    )
    .unwrap();
    let doc = estimate_json(&["--config", path.to_str().unwrap()]);
    assert_eq!(doc["model"]["source"], "config");
    assert_eq!(doc["model"]["parameters"], 7_615_616_512u64);
    assert_eq!(doc["kv_bytes_per_token"], 2 * 28 * 4 * 128 * 2);
}

#[test]
fn gguf_written_by_the_reference_writer() {
    let exp = expected("tiny-llama.expected.json");
    let doc = estimate_json(&["--gguf", &fixture("tiny-llama.gguf")]);
    assert_eq!(doc["model"]["source"], "gguf");
    assert_eq!(doc["model"]["name"], "tiny-llama");
    assert_eq!(doc["model"]["parameters"], exp["parameters"]);
    assert_eq!(doc["weights_bytes"], exp["tensor_bytes"]);
    assert_eq!(doc["settings"]["dtype"], "file");
    // 2 layers × 2 KV heads × 64 dims × 2 (K and V) × 2 bytes.
    assert_eq!(doc["kv_bytes_per_token"], 2 * 2 * 64 * 2 * 2);
    let lib = gpumem::model::read_gguf(Path::new(&fixture("tiny-llama.gguf"))).unwrap();
    assert_eq!(lib.version as u64, exp["version"].as_u64().unwrap());
    assert_eq!(lib.tensors.len() as u64, exp["tensors"].as_u64().unwrap());
    assert_eq!(lib.bytes_by_type()[0].0, "Q8_0");
}

#[test]
fn safetensors_file_directory_and_index() {
    let exp = expected("tiny-sharded/expected.json");
    for source in ["tiny-sharded", "tiny-sharded/model.safetensors.index.json"] {
        let doc = estimate_json(&["--safetensors", &fixture(source)]);
        assert_eq!(doc["model"]["parameters"], exp["parameters"], "{source}");
        assert_eq!(doc["weights_bytes"], exp["bytes"], "{source}");
        // config.json beside the shards gives the KV layout: 1 layer, 2 KV heads of 16.
        assert_eq!(doc["kv_bytes_per_token"], 2 * 2 * 16 * 2, "{source}");
    }
    let one = gpumem::model::read_safetensors(Path::new(&fixture(
        "tiny-sharded/model-00002-of-00002.safetensors",
    )))
    .unwrap();
    assert_eq!(one.tensors, 3);
}

#[test]
fn list_models_has_the_catalog() {
    let out = gpumem()
        .args(["--json", "estimate", "--list-models"])
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let models = doc["models"].as_array().unwrap();
    assert!(models.len() >= 30);
    for name in [
        "mistral-7b",
        "llama-3-8b",
        "llama-3.1-70b",
        "mixtral-8x7b",
        "qwen2.5-7b",
        "gemma-2-9b",
        "phi-3-mini",
        "deepseek-v2-lite",
    ] {
        assert!(models.iter().any(|m| m["name"] == name), "{name} missing");
    }
}

#[test]
fn fits_exits_3_when_nothing_holds_the_model() {
    let out = gpumem()
        .args(["--json", "estimate", "--model", "llama-3.1-405b", "--fits"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["fits"]
        .as_array()
        .unwrap()
        .iter()
        .all(|d| d["fits"] == false));
    // Each row says what the device has and what the model needs there (they read 0 B once).
    // (llama.cpp does not run on the software GPUs: those rows say so, and need nothing.)
    for d in doc["fits"].as_array().unwrap() {
        assert!(d["available_bytes"].as_u64().unwrap() > 0, "{d}");
        let skips = d["engine_skips"].as_bool().unwrap();
        assert_eq!(skips, d["backend"] != "cpu", "{d}");
        assert!(
            skips || d["needed_bytes"].as_u64().unwrap() > 100 << 30,
            "{d}"
        );
    }
    let text = gpumem()
        .args(["estimate", "--model", "llama-3.1-405b", "--fits"])
        .output()
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("┆ not used   ┆ no   │"), "{text}");
    assert!(
        text.contains("not used: the engine does not run on that device"),
        "{text}"
    );
    let out = gpumem()
        .args([
            "estimate",
            "--model",
            "qwen2.5-0.5b",
            "--overhead",
            "0",
            "--fits",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub(crate) fn one_line_failure(args: &[&str], code: i32) -> String {
    let out = gpumem().args(args).output().unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    stderr
}

pub(crate) fn llama_config() -> serde_json::Value {
    serde_json::json!({
        "model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "vocab_size": 32000
    })
}

// llama.cpp's KV cells: the context padded to 256; gemma-2's sliding layers hold the window
// plus one micro-batch (llama-server) or everything with --swa-full.
#[test]
fn kv_cells_follow_llama_cpp() {
    let kv = |args: &[&str]| {
        let mut all = vec!["-m", "gemma-2-9b", "--kv-dtype", "f16"];
        all.extend_from_slice(args);
        estimate_json(&all)["kv_cache_bytes"].as_u64().unwrap()
    };
    // 42 layers × 8 KV heads × 256 dims × K and V × 2 bytes = 344,064 bytes per token.
    let per_layer_token = 8 * 256 * 2 * 2u64;
    let half = 21 * per_layer_token;
    assert_eq!(
        kv(&["--context", "8192", "--ubatch", "512"]),
        half * 8192 + half * 4608
    );
    assert_eq!(
        kv(&["--context", "8192", "--ubatch", "512", "--swa-full"]),
        2 * half * 8192
    );
    // 1000 tokens take 1024 cells.
    assert_eq!(kv(&["--context", "1000"]), 2 * half * 1024);
}

// Models where users keep them: the Hugging Face cache (ORG/NAME) and Ollama's store
// (ollama:NAME[:TAG]), both built here, read offline; a miss says where it looked.
#[test]
fn models_from_the_hugging_face_cache_and_ollama() {
    let home = tempfile::tempdir().unwrap();
    // HF cache: refs/main names the snapshot; the shards are the sharded fixture.
    let repo = home.path().join("hub/models--acme--tiny-sharded");
    let snapshot = repo.join("snapshots/0123abcd");
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), "0123abcd\n").unwrap();
    for f in std::fs::read_dir(fixture("tiny-sharded")).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, snapshot.join(f.file_name().unwrap())).unwrap();
    }
    // Ollama: a manifest whose model layer is the GGUF fixture, stored as its blob.
    let (models, manifests, digest) = common::ollama_store(home.path());
    std::fs::write(
        manifests.join("q4"),
        serde_json::json!({"schemaVersion": 2, "layers": [
            {"mediaType": "application/vnd.ollama.image.template", "digest": format!("sha256:{}", "cd".repeat(32))},
            {"mediaType": "application/vnd.ollama.image.model", "digest": format!("sha256:{digest}")}
        ]})
        .to_string(),
    )
    .unwrap();
    let run = |name: &str| {
        common::json_ok(
            gpumem()
                .env("HF_HOME", home.path())
                .env("OLLAMA_MODELS", &models)
                .args(["--json", "estimate", "--model", name]),
        )
    };
    let hf = run("acme/tiny-sharded");
    let exp = expected("tiny-sharded/expected.json");
    assert_eq!(hf["model"]["name"], "acme/tiny-sharded");
    assert_eq!(hf["weights_bytes"], exp["bytes"]);
    let ollama = run("ollama:tiny:q4");
    let gguf = expected("tiny-llama.expected.json");
    assert_eq!(ollama["weights_bytes"], gguf["tensor_bytes"]);
    assert_eq!(ollama["projector_bytes"], 0);
    // A vision model's manifest names its projector: it is found and counted.
    let projector = "ef".repeat(32);
    std::fs::copy(
        fixture("tiny-mmproj.gguf"),
        models.join(format!("blobs/sha256-{projector}")),
    )
    .unwrap();
    std::fs::write(
        manifests.join("vision"),
        serde_json::json!({"schemaVersion": 2, "layers": [
            {"mediaType": "application/vnd.ollama.image.model", "digest": format!("sha256:{digest}")},
            {"mediaType": "application/vnd.ollama.image.projector", "digest": format!("sha256:{projector}")}
        ]})
        .to_string(),
    )
    .unwrap();
    let vision = run("ollama:tiny:vision");
    assert_eq!(vision["weights_bytes"], gguf["tensor_bytes"]);
    assert_eq!(
        vision["projector_bytes"],
        expected("tiny-mmproj.expected.json")["tensor_bytes"]
    );
    // Misses: one line naming where it looked; an Ollama name exits 1, a Hub id offline and
    // in no cache 5.
    for (name, looked, code, says) in [
        (
            "acme/absent",
            "models--acme--absent/snapshots",
            5,
            "not in the Hugging Face cache",
        ),
        (
            "ollama:tiny",
            "library/tiny/latest",
            1,
            "not in the local store",
        ),
    ] {
        let err = common::one_line_error(
            gpumem()
                .env("HF_HOME", home.path())
                .env("OLLAMA_MODELS", &models)
                .args(["estimate", "--model", name]),
            code,
        );
        assert!(err.contains(says) && err.contains(looked), "{err}");
    }
}

// A multimodal projector (llama.cpp's mmproj) given beside a GGUF: its tensor bytes, as the
// reference reader counts them, are added and reserved for; a language model given as one is
// refused, naming what it is.
#[test]
fn mmproj_weights_are_counted_and_other_ggufs_refused() {
    let model = fixture("tiny-llama.gguf");
    let mmproj = fixture("tiny-mmproj.gguf");
    let plain = estimate_json(&["--gguf", &model, "--fragmentation-reserve", "0"]);
    let out = gpumem()
        .args([
            "--json",
            "estimate",
            "--gguf",
            &model,
            "--fragmentation-reserve",
            "0",
        ])
        .args(["--mmproj", &mmproj])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let with: Value = serde_json::from_slice(&out.stdout).unwrap();
    let bytes = expected("tiny-mmproj.expected.json")["tensor_bytes"]
        .as_u64()
        .unwrap();
    assert_eq!(with["projector_bytes"], bytes);
    assert_eq!(with["weights_bytes"], plain["weights_bytes"]);
    assert_eq!(
        with["total_bytes"].as_u64().unwrap(),
        plain["total_bytes"].as_u64().unwrap() + bytes
    );
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("compute buffer it needs to encode an image is not"),
        "{stderr}"
    );
    let e = one_line_failure(&["estimate", "--gguf", &model, "--mmproj", &model], 1);
    assert!(
        e.contains("general.architecture") && e.contains("is 'llama', not clip"),
        "{e}"
    );
}

/// openai/gpt-oss config.json (the fields gpumem reads, as published).
fn gpt_oss_config(layers: u64, experts: u64) -> serde_json::Value {
    let layer_types: Vec<&str> = (0..layers)
        .map(|i| {
            if i % 2 == 0 {
                "sliding_attention"
            } else {
                "full_attention"
            }
        })
        .collect();
    serde_json::json!({
        "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss",
        "attention_bias": true, "head_dim": 64, "hidden_size": 2880, "intermediate_size": 2880,
        "num_attention_heads": 64, "num_key_value_heads": 8, "num_hidden_layers": layers,
        "num_local_experts": experts, "num_experts_per_tok": 4, "experts_per_token": 4,
        "layer_types": layer_types, "sliding_window": 128, "max_position_embeddings": 131072,
        "tie_word_embeddings": false, "vocab_size": 201088, "torch_dtype": "bfloat16",
        "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert":
            ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
    })
}

// OpenAI's model card: gpt-oss-20b 20.91 B parameters, 3.61 B active (embeddings excluded),
// 120b 116.83 B and 5.13 B; MXFP4 experts (17 bytes per 32 weights, the rest bf16) make the
// checkpoints 13.76 GB and 65.25 GB.
#[test]
fn gpt_oss_counts_and_mxfp4_weights() {
    let dir = tempfile::tempdir().unwrap();
    for (layers, experts, total, active, bytes) in [
        (
            24,
            32,
            20_914_757_184u64,
            3_608_307_264u64,
            13_761_264_768u64,
        ),
        (36, 128, 116_829_156_672, 5_132_849_472, 65_248_815_744),
    ] {
        let path = dir.path().join(format!("gpt-oss-{experts}.json"));
        std::fs::write(&path, gpt_oss_config(layers, experts).to_string()).unwrap();
        let doc = estimate_json(&["--config", path.to_str().unwrap()]);
        assert_eq!(doc["model"]["parameters"], total, "{doc}");
        assert_eq!(doc["model"]["active_parameters"], active);
        assert_eq!(doc["weights_bytes"], bytes);
        assert_eq!(doc["settings"]["dtype"], "file");
        assert!(doc["warnings"].as_array().unwrap().is_empty());
    }
}

/// meta-llama/Llama-4-{Scout,Maverick} config.json: the text model's fields as published, and
/// a vision tower.
fn llama4_config(experts: u64, step: u64) -> serde_json::Value {
    serde_json::json!({
        "architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4",
        "vision_config": {"model_type": "llama4_vision_model", "hidden_size": 1408},
        "text_config": {
            "model_type": "llama4_text", "hidden_size": 5120, "intermediate_size": 8192,
            "intermediate_size_mlp": 16384, "num_hidden_layers": 48, "num_attention_heads": 40,
            "num_key_value_heads": 8, "head_dim": 128, "num_local_experts": experts,
            "num_experts_per_tok": 1, "interleave_moe_layer_step": step, "use_qk_norm": true,
            "attention_chunk_size": 8192, "vocab_size": 202048, "tie_word_embeddings": false,
            "max_position_embeddings": 10485760
        }
    })
}

// Published: Scout 17 B active of 109 B (with its vision encoder), Maverick 17 B of 400 B. The
// text models count 107.77 B / 17.17 B and 400.71 B / 17.18 B; the vision tower is named as
// not counted.
#[test]
fn llama_4_text_models_and_the_vision_tower_named() {
    let dir = tempfile::tempdir().unwrap();
    for (experts, step, total, active) in [
        (16, 1, 107_769_861_120u64, 17_172_894_720u64),
        (128, 2, 400_711_848_960, 17_184_691_200),
    ] {
        let path = dir.path().join(format!("llama4-{experts}.json"));
        std::fs::write(&path, llama4_config(experts, step).to_string()).unwrap();
        let doc = estimate_json(&["--config", path.to_str().unwrap()]);
        assert_eq!(doc["model"]["parameters"], total, "{doc}");
        assert_eq!(doc["model"]["active_parameters"], active);
        assert!(doc["warnings"][0]
            .as_str()
            .unwrap()
            .contains("vision tower"));
    }
}

// A Mamba GGUF (written by tools/llamacpp-reference/make_hybrid_gguf.py mamba): no KV cache but an
// f32 recurrent state per sequence that does not grow with the context — 2 layers × (3 conv
// steps + 16 state) × 128 channels × 4 bytes, what llama.cpp's RS buffer holds (0.02 MiB).
#[test]
fn mamba_keeps_a_recurrent_state_not_a_kv_cache() {
    for context in ["512", "65536"] {
        let doc = estimate_json(&["--gguf", &fixture("tiny-mamba.gguf"), "--context", context]);
        assert_eq!(doc["model"]["family"], "mamba");
        assert_eq!(
            doc["kv_cache_bytes"],
            2 * (3 + 16) * 128 * 4,
            "context {context}"
        );
        assert_eq!(doc["kv_bytes_per_token"], 0);
    }
    let doc = estimate_json(&["--gguf", &fixture("tiny-mamba.gguf"), "--batch", "3"]);
    assert_eq!(doc["kv_cache_bytes"], 3 * 2 * (3 + 16) * 128 * 4);
}

// Mamba from an HF config.json (MambaConfig): the same shape as the tiny GGUF gives the same
// parameters and recurrent state; and state-spaces/mamba-370m-hf's own config gives the state
// llama.cpp allocated for that shape (tests/fixtures/llamacpp/mamba-370m-shape.json: 7.12 MiB,
// 48 layers × (3 conv steps + 16 state) × 2048 channels × 4 bytes).
#[test]
fn mamba_from_config_json() {
    let dir = tempfile::tempdir().unwrap();
    let tiny = dir.path().join("config.json");
    std::fs::write(
        &tiny,
        r#"{"model_type": "mamba", "hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 32,
            "state_size": 16, "conv_kernel": 4, "expand": 2, "time_step_rank": "auto",
            "tie_word_embeddings": true}"#,
    )
    .unwrap();
    let from_config = estimate_json(&["--config", tiny.to_str().unwrap()]);
    let from_gguf = estimate_json(&["--gguf", &fixture("tiny-mamba.gguf")]);
    assert_eq!(from_config["model"]["family"], "mamba");
    assert_eq!(
        from_config["model"]["parameters"],
        from_gguf["model"]["parameters"]
    );
    assert_eq!(from_config["kv_cache_bytes"], from_gguf["kv_cache_bytes"]);
    assert_eq!(from_config["kv_bytes_per_token"], 0);
    assert!(from_config["warnings"].as_array().unwrap().is_empty());

    let real = dir.path().join("mamba-370m-hf.json");
    std::fs::write(
        &real,
        r#"{"architectures": ["MambaForCausalLM"], "model_type": "mamba", "hidden_size": 1024,
            "intermediate_size": 2048, "num_hidden_layers": 48, "vocab_size": 50280,
            "state_size": 16, "conv_kernel": 4, "expand": 2, "time_step_rank": 64,
            "use_bias": false, "use_conv_bias": true, "tie_word_embeddings": true,
            "layer_norm_epsilon": 1e-05, "torch_dtype": "float32"}"#,
    )
    .unwrap();
    let doc = estimate_json(&["--config", real.to_str().unwrap(), "--context", "4096"]);
    assert_eq!(doc["kv_cache_bytes"], 48 * (3 + 16) * 2048 * 4);
    // Every tensor of the checkpoint: embeddings (tied), 48 × (norm, in_proj, conv1d and bias,
    // x_proj, dt_proj and bias, A, D, out_proj), the final norm.
    assert_eq!(doc["model"]["parameters"], 371_516_416u64);
}

// A split GGUF (gguf-py's split writer, 3 shards): whichever shard is named, the whole model is
// counted — llama.cpp maps 0.05 + 0.09 + 0.02 MiB of weights across the three.
#[test]
fn split_ggufs_are_counted_whole() {
    for k in 1..=3 {
        let shard = fixture(&format!("tiny-split/tiny-split-0000{k}-of-00003.gguf"));
        let doc = estimate_json(&["--gguf", &shard]);
        assert_eq!(doc["model"]["parameters"], 78_144, "shard {k}");
        assert_eq!(doc["weights_bytes"], 156_928, "shard {k}");
    }
    let dir = tempfile::tempdir().unwrap();
    for k in [1, 2] {
        let name = format!("tiny-split-0000{k}-of-00003.gguf");
        std::fs::copy(
            fixture(&format!("tiny-split/{name}")),
            dir.path().join(&name),
        )
        .unwrap();
    }
    let first = dir.path().join("tiny-split-00001-of-00003.gguf");
    let e = one_line_failure(&["estimate", "--gguf", first.to_str().unwrap()], 1);
    assert!(e.contains("tiny-split-00003-of-00003.gguf"), "{e}");
}

/// The JSON says how the activations were obtained: a replay of llama.cpp's graph where its
/// builder is modelled, the stage formulas elsewhere, the training formula under `--mode train`.
#[test]
fn activations_say_how_they_were_obtained() {
    let basis = |args: &[&str]| estimate_json(args)["activations_basis"].clone();
    assert_eq!(basis(&["--model", "llama-3.1-8b"]), "graph_replay");
    assert_eq!(basis(&["--model", "gpt-oss-20b"]), "graph_replay");
    assert_eq!(basis(&["--model", "qwen3-next-80b-a3b"]), "graph_replay");
    assert_eq!(basis(&["--model", "gpt-neox-20b"]), "graph_replay");
    assert_eq!(basis(&["--model", "gemma-7b"]), "graph_replay");
    // A family no builder is modelled for: the stage formulas.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json");
    let mut config = llama_config();
    config["model_type"] = "frobnicator".into();
    std::fs::write(&path, config.to_string()).unwrap();
    let generic = ["--allow-generic", "--config", path.to_str().unwrap()];
    assert_eq!(basis(&generic), "stage_estimate");
    assert_eq!(
        basis(&["--model", "llama-3.1-8b", "--mode", "train"]),
        "pytorch_step"
    );
    assert_eq!(
        basis(&[
            "--model",
            "llama-3.1-8b",
            "--mode",
            "train",
            "--recipe",
            "mixed",
            "--ddp"
        ]),
        "training"
    );
}

/// `--mode train` walks PyTorch's step where the family is modelled: the parts are its peak's
/// categories (the weights' 16-bit dtype implies the bf16 recipe; f32 weights, autocast), the
/// phase is named, and overhead and reserve come on top. Elsewhere the formula says why.
#[test]
fn training_walks_pytorch_step() {
    let args = |extra: &[&'static str]| {
        let mut a = vec![
            "--model",
            "llama-3.1-8b",
            "--mode",
            "train",
            "--context",
            "2048",
        ];
        a.extend_from_slice(extra);
        a.extend_from_slice(&["--overhead", "0", "--fragmentation-reserve", "0"]);
        a
    };
    let doc = estimate_json(&args(&[]));
    let step = &doc["training_step"];
    assert_eq!(step["recipe"], "bf16");
    assert_eq!(step["peak"]["phase"], "optimizer");
    let p = 8_030_261_248u64 * 2;
    assert_eq!(step["peak"]["parameters"], p);
    assert_eq!(doc["training"]["gradients_bytes"], p);
    // Two bf16 moments, a step count per tensor (291), one foreach list in the step.
    assert_eq!(doc["training"]["optimizer_bytes"], 3 * p + 4 * 291);
    assert_eq!(doc["total_bytes"], step["peak"]["total"]);
    // LoRA (PEFT's all-linear, rank 16): f32 adapters (41,943,040 parameters) beside the frozen
    // bf16 model; only they have gradients and AdamW state.
    let lora = estimate_json(&args(&["--recipe", "lora", "--lora-rank", "16"]));
    let adapters = 41_943_040u64 * 4;
    assert_eq!(lora["training_step"]["recipe"]["lora"]["rank"], 16);
    assert_eq!(lora["training_step"]["peak"]["parameters"], p + adapters);
    assert_eq!(lora["training"]["gradients_bytes"], 0);
    // QLoRA: the layers' projections packed in NF4 (6,979,321,856 weights, half a byte each),
    // the other 1,050,939,392 weights in f32, the same adapters; the quantization state
    // (absmax bytes, nested scales, codes) as buffers.
    let qlora = estimate_json(&args(&["--recipe", "qlora", "--lora-rank", "16"]));
    let step = &qlora["training_step"];
    assert_eq!(step["recipe"]["qlora"]["rank"], 16);
    assert_eq!(
        step["peak"]["parameters"],
        6_979_321_856u64 / 2 + 1_050_939_392 * 4 + adapters
    );
    assert_eq!(step["peak"]["buffers"], 111_000_960);
    // Mixed precision is walked as FSDP2's: f32 shards (a quarter of the f32 model each) under
    // the bf16 layers gathered for compute; on one GPU as FSDP2 over it; under DDP it stays
    // the closed formula.
    let mixed = estimate_json(&args(&["--recipe", "mixed", "--fsdp", "4"]));
    let step = &mixed["training_step"];
    assert_eq!(step["recipe"], "mixed-fp32-master");
    assert_eq!(step["fsdp"]["world"], 4);
    assert!(step["peak"]["parameters"].as_u64().unwrap() > 8_030_261_248);
    // LoRA under FSDP2: the adapters in bf16 (one dtype a group), sharded with the model.
    let lora_fsdp = estimate_json(&args(&["--recipe", "lora", "--fsdp", "4"]));
    let step = &lora_fsdp["training_step"];
    assert_eq!(step["recipe"]["lora"]["rank"], 16);
    assert_eq!(step["fsdp"]["world"], 4);
    let single = estimate_json(&args(&["--recipe", "mixed"]));
    let step = &single["training_step"];
    assert_eq!(step["recipe"], "mixed-fp32-master");
    assert_eq!(step["fsdp"]["world"], 1);
    // At its optimizer step: the f32 master weights and their f32 gradients, whole.
    assert_eq!(step["peak"]["parameters"], 4 * 8_030_261_248u64);
    assert_eq!(step["peak"]["gradients"], 4 * 8_030_261_248u64);
    let ddp = estimate_json(&args(&["--recipe", "mixed", "--ddp"]));
    assert!(ddp["training_step"].is_null());
    assert_eq!(
        ddp["training_unwalked"],
        "PyTorch's step is not yet walked with an f32 master copy of bf16 weights under DDP or \
         DeepSpeed"
    );
    let f32 = estimate_json(&args(&["--dtype", "f32"]));
    assert_eq!(f32["training_step"]["recipe"], "fp32-autocast");
    assert_eq!(f32["training_step"]["peak"]["parameters"], 2 * p);
    let out = common::gpumem()
        .args(["estimate", "--model", "falcon-7b", "--mode", "train"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        joined.contains(
            "PyTorch's step is walked for Llama, Mistral, Mixtral, Qwen2, Qwen3, Qwen3-MoE, Phi-3, \
             Gemma 2, Gemma 3, DeepSeek-V2 and gpt-oss; not yet falcon"
        ),
        "{text}"
    );
}

// `estimate --fits` judges this machine's devices exactly as `select --engine llama.cpp` does (its
// figures are llama.cpp's): the same devices,
// the same need on each, the same verdict (a model far inside and one far outside them, so
// free memory moving between the two runs cannot change the answer).
#[test]
fn fits_and_select_judge_devices_by_one_rule() {
    let json = |args: &[&str]| -> Value {
        let out = gpumem().arg("--json").args(args).output().unwrap();
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let key = |d: &Value| {
        (
            d["backend"].to_string(),
            d["device"].as_u64(),
            d["needed_bytes"].as_u64(),
            d["fits"].as_bool(),
        )
    };
    for model in ["qwen2.5-0.5b", "llama-3.1-70b"] {
        let estimate = json(&["estimate", "--model", model, "--fits"]);
        let select = json(&["select", "--model", model, "--engine", "llama.cpp"]);
        let fits: Vec<_> = estimate["fits"]
            .as_array()
            .unwrap()
            .iter()
            .map(key)
            .collect();
        let verdicts: Vec<_> = select["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .map(key)
            .collect();
        assert!(!fits.is_empty());
        assert_eq!(fits, verdicts, "{model}");
    }
}

/// `--engine transformers`: `generate`'s peak (the prefill's, for Llama-3.2-1B with a 2,048-token
/// prompt: MemTracker's 2,673,512,704 bytes in `tests/fixtures/pytorch/`), the parts its
/// categories; with `--mode train` a usage error.
#[test]
fn generate_under_transformers() {
    let doc = estimate_json(&[
        "--model",
        "llama-3.2-1b",
        "--engine",
        "transformers",
        "--context",
        "2048",
        "--new-tokens",
        "16",
        "--overhead",
        "0",
        "--fragmentation-reserve",
        "0",
    ]);
    assert_eq!(doc["activations_basis"], "transformers_generate");
    assert_eq!(doc["generate"]["phase"], "prefill");
    assert_eq!(doc["generate"]["total"], 2_673_512_704u64);
    assert_eq!(doc["total_bytes"], 2_673_512_704u64);
    let out = gpumem()
        .args([
            "estimate",
            "--model",
            "llama-3.2-1b",
            "--engine",
            "transformers",
        ])
        .args(["--mode", "train"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--engine transformers estimates generation")
    );
}

/// The catalog's text fits 80 columns; aliases and repositories are in the JSON.
#[test]
fn list_models_fits_80_columns() {
    let out = gpumem()
        .args(["estimate", "--list-models", "--color", "never"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("mixtral-8x7b"), "{text}");
    for line in text.lines() {
        assert!(line.chars().count() <= 80, "{line}");
    }
}

// llama.cpp refuses a quantized V cache without flash attention; `estimate` runs it as
// llama-server does (-fa auto, on), so only `--flash-attn off` is refused, in one line (exit 2).
#[test]
fn a_quantized_cache_needs_flash_attention() {
    let out = common::gpumem()
        .args([
            "estimate",
            "--model",
            "llama-3.1-8b",
            "--kv-dtype",
            "q8_0",
            "--flash-attn",
            "off",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "gpumem: error: llama.cpp quantizes the V cache only with flash attention: --kv-dtype \
         q8_0 needs --flash-attn on or auto\n"
    );
    let doc = estimate_json(&["--model", "llama-3.1-8b", "--kv-dtype", "q8_0"]);
    // 32 layers × 2 × 8 heads × 128 values in Q8_0 (34 bytes a block of 32).
    assert_eq!(doc["kv_bytes_per_token"], 32 * 2 * 1024 / 32 * 34);
    assert_eq!(doc["settings"]["flash_attention"], true);
}

/// `estimate --engine vllm` is the need `select --engine vllm` reports on the same GPUs, with
/// vLLM's accounting of one rank and its own lines; it exits 3 where vLLM would not start, and
/// without a GPU to plan for it says to name one.
#[test]
fn estimate_for_vllm_is_selects_need() {
    let args = [
        "--model",
        "llama-3.1-8b",
        "--context",
        "32768",
        "--engine",
        "vllm",
        "--device",
        "sim:24GiB",
    ];
    let est = common::json_ok(gpumem().args(["estimate", "--json"]).args(args));
    let sel = common::json_ok(gpumem().args(["select", "--json"]).args(args));
    assert_eq!(est["needed_bytes"], sel["required_bytes"]);
    assert_eq!(est["account"], sel["plan"]["engine"]);
    assert_eq!(est["account"]["kv_tokens"], 47_840);
    let text = gpumem().args(["estimate"]).args(args).output().unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.starts_with(
            "llama-3.1-8b needs 20.24 GiB on each GPU under vLLM, with one request of the\n    \
             full context (1 × sim:24.00 GiB)\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("Maximum concurrency for 32,768 tokens per request: 1.46x"),
        "{text}"
    );
    let out = gpumem()
        .args([
            "estimate",
            "--model",
            "llama-3.1-70b",
            "--engine",
            "vllm",
            "--device",
            "sim:24GiB",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stdout).contains("; it does not start there"));
    let err = common::one_line_error(
        gpumem().args([
            "estimate",
            "--model",
            "llama-3.1-8b",
            "--engine",
            "transformers",
            "--device",
            "sim:24GiB",
        ]),
        2,
    );
    assert_eq!(
        err,
        "gpumem: error: --device is the GPUs an engine's need is planned on: give it with \
         --engine vllm, sglang or llama.cpp (`select --mode train --device` plans a training \
         step)\n"
    );
}

/// One question, one answer: `estimate`'s inference total is llama.cpp's buffers as `select
/// --engine llama.cpp` plans them (on this machine's CPU: the test machines have no GPU), the
/// one term apart being the logits' output buffer, which the process holds and llama.cpp's own
/// breakdown leaves out; with `--device` its need there is `select`'s on the same devices; no
/// generic reserve is stacked on it unless asked for, and the engine is named.
#[test]
fn estimate_is_llama_cpps_need() {
    let model = ["--model", "llama-3.1-8b", "--context", "32k"];
    let est = common::json_ok(gpumem().args(["--json", "estimate"]).args(model));
    let sel = common::json_ok(
        gpumem()
            .args(["--json", "select", "--engine", "llama.cpp"])
            .args(model),
    );
    assert_eq!(sel["plan"]["placements"][0]["backend"], "cpu", "{sel}");
    let output_buffer = 128_256 * 4;
    assert_eq!(
        est["total_bytes"].as_u64().unwrap(),
        sel["required_bytes"].as_u64().unwrap() + output_buffer
    );
    assert_eq!(est["total_bytes"], 20_511_204_384u64);
    assert_eq!(
        est["engine"],
        serde_json::json!({"name": "llama.cpp", "chosen_by": "default"})
    );
    let on_gpu = [&model[..], &["--device", "sim:h100"]].concat();
    let est = common::json_ok(gpumem().args(["--json", "estimate"]).args(&on_gpu));
    let sel = common::json_ok(
        gpumem()
            .args(["--json", "select", "--engine", "llama.cpp"])
            .args(&on_gpu),
    );
    assert_eq!(est["llamacpp"]["needed_bytes"], sel["required_bytes"]);
    assert_eq!(est["llamacpp"]["account"], sel["plan"]["llamacpp"]);
    let out = gpumem()
        .args(["estimate", "--color", "never"])
        .args(&on_gpu)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains("fragmentation reserve"), "{text}");
    assert!(
        text.contains(
            "total: llama.cpp's model, KV-cache and compute buffers on a CPU, as `select\n    \
             --engine llama.cpp` plans them (gpumem's default engine; vLLM's need:\n    \
             `estimate --engine vllm --device sim:h100`)\n\nOn NVIDIA H100 80GB HBM3: \
             llama.cpp needs 18.12 GiB\n"
        ),
        "{text}"
    );
    // A reserve asked for is added and said.
    let asked = common::json_ok(
        gpumem()
            .args(["--json", "estimate", "--overhead", "500MiB"])
            .args(model),
    );
    assert_eq!(
        asked["total_bytes"].as_u64().unwrap(),
        20_511_204_384 + (500 << 20)
    );
}

/// `estimate --engine all`: every engine side by side on the same devices, each row the need
/// and KV tokens `select --engine E` reports there; a GGUF is not the checkpoint engines'.
#[test]
fn every_engine_side_by_side() {
    let model = [
        "--model",
        "llama-3.1-8b",
        "--context",
        "32k",
        "--device",
        "sim:h100",
    ];
    let doc = common::json_ok(
        gpumem()
            .args(["--json", "estimate", "--engine", "all"])
            .args(model),
    );
    let rows = doc["engines"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["engine"].as_str().unwrap()).collect();
    assert_eq!(names, ["llama.cpp", "ollama", "vllm", "sglang"]);
    for row in rows {
        let engine = row["engine"].as_str().unwrap();
        let sel = common::json_ok(
            gpumem()
                .args(["--json", "select", "--engine", engine])
                .args(model),
        );
        assert_eq!(row["needed_bytes"], sel["required_bytes"], "{engine}");
        assert_eq!(
            row["kv_tokens"], sel["plan"]["capacity"]["kv_tokens"],
            "{engine}"
        );
        assert_eq!(row["serves"], true, "{engine}");
    }
    let out = gpumem()
        .args(["estimate", "--engine", "all", "--color", "never"])
        .args(model)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("│ vLLM 0.33        ┆ 21.79 GiB ┆ 1    ┆ 32,768  ┆ 454,576   ┆ yes    │"),
        "{text}"
    );
    let gguf = common::json_ok(gpumem().args([
        "--json",
        "estimate",
        "--engine",
        "all",
        "--gguf",
        &fixture("tiny-llama.gguf"),
        "--device",
        "sim:h100",
    ]));
    assert_eq!(
        gguf["engines"][2]["not_for"],
        "loads Hugging Face checkpoints, not a GGUF"
    );
    assert_eq!(gguf["engines"][0]["serves"], true);
}
