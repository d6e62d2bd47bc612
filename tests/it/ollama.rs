//! `--engine ollama`: Ollama 0.33's defaults (context by VRAM, one request, its environment),
//! llama-server's placement under them, and what llama-server and `ollama ps` print.

#![allow(clippy::unwrap_used)]

use crate::common::{self, gpumem};

/// Llama-3.1-8B on one RTX 4090 with Ollama's defaults: 24 GiB of VRAM is the 32,768-token
/// tier; every layer on the GPU, which `ollama ps` shows as 100% GPU with the GPU's buffers as
/// its SIZE.
#[test]
fn defaults_by_vram_and_a_full_offload() {
    let args = [
        "--model",
        "llama-3.1-8b",
        "--engine",
        "ollama",
        "--device",
        "sim:rtx4090",
    ];
    let out = gpumem()
        .args(["select", "--color", "never"])
        .args(args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    for line in [
        "Ollama 0.33: num_ctx 32,768 (its default for 23.99 GiB of GPU memory), 1\n    \
         parallel request, --flash-attn auto; llama-server places the layers:\n",
        "  llama-server would print:\n    load_tensors: offloaded 33/33 layers to GPU\n  \
         ollama ps would show: SIZE 19 GB, PROCESSOR 100% GPU, CONTEXT 32768\n",
    ] {
        assert!(text.contains(line), "{line:?} missing from\n{text}");
    }
    let sel = common::json_ok(gpumem().args(["--json", "select"]).args(args));
    let est = common::json_ok(gpumem().args(["--json", "estimate"]).args(args));
    let a = &sel["plan"]["ollama"];
    assert_eq!(sel["plan"]["accounting"], "ollama");
    assert_eq!(est["account"], *a);
    assert_eq!(est["needed_bytes"], sel["required_bytes"]);
    assert_eq!(a["num_ctx"], 32_768);
    assert_eq!(a["num_ctx_from"], "vram_tier");
    assert_eq!(a["processor"]["processor"], "gpu");
    // The llama.cpp placement is llama.cpp's own at that context.
    let direct = common::json_ok(gpumem().args([
        "--json",
        "select",
        "--model",
        "llama-3.1-8b",
        "--engine",
        "llama.cpp",
        "--device",
        "sim:rtx4090",
        "--context",
        "32768",
    ]));
    assert_eq!(a["llamacpp"], direct["plan"]["llamacpp"]);
    assert_eq!(a["size_bytes"], a["size_vram_bytes"]);
    // On an 80 GB GPU the tier is 262,144 tokens, cut to the model's trained 131,072.
    let h100 = common::json_ok(gpumem().args([
        "--json",
        "estimate",
        "--model",
        "llama-3.1-8b",
        "--engine",
        "ollama",
        "--device",
        "sim:h100",
    ]));
    assert_eq!(h100["account"]["num_ctx"], 131_072);
    assert_eq!(h100["account"]["num_ctx_from"], "trained");
}

/// A model too big for the GPU: llama-server offloads some layers, and `ollama ps` splits
/// SIZE (every buffer) by what is on the GPU, rounded as Ollama rounds it.
#[test]
fn a_partial_offload_as_ollama_ps_shows_it() {
    let doc = common::json_ok(gpumem().args([
        "--json",
        "select",
        "--model",
        "llama-3.1-70b",
        "--engine",
        "ollama",
        "--device",
        "sim:rtx4090",
        "--ram",
        "128GiB",
    ]));
    let a = &doc["plan"]["ollama"];
    assert_eq!(a["layers_total"], 81);
    assert_eq!(a["layers_offloaded"], a["llamacpp"]["n_gpu_layers"]);
    let (size, vram) = (
        a["size_bytes"].as_u64().unwrap(),
        a["size_vram_bytes"].as_u64().unwrap(),
    );
    let cpu = ((size - vram) as f64 / size as f64 * 100.0).round() as u64;
    assert_eq!(a["processor"]["cpu_percent"], cpu);
    assert!(cpu > 50 && cpu < 100, "{cpu}");
    let out = gpumem()
        .args([
            "select",
            "--model",
            "llama-3.1-70b",
            "--engine",
            "ollama",
            "--device",
            "sim:rtx4090",
            "--ram",
            "128GiB",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(&format!("PROCESSOR {cpu}%/{}% CPU/GPU", 100 - cpu)),
        "{text}"
    );
}

/// Ollama's environment is read as Ollama reads it (flags first), a malformed value is a usage
/// error, and a model from its store launches as `ollama serve` with the plan's settings, then
/// `ollama run NAME`.
#[test]
fn environment_and_launch() {
    let doc = common::json_ok(
        gpumem()
            .env("OLLAMA_NUM_PARALLEL", "4")
            .env("OLLAMA_KV_CACHE_TYPE", "q8_0")
            .env("OLLAMA_CONTEXT_LENGTH", "8192")
            .args([
                "--json",
                "estimate",
                "--model",
                "llama-3.1-8b",
                "--engine",
                "ollama",
                "--device",
                "sim:rtx4090",
            ]),
    );
    let a = &doc["account"];
    assert_eq!(a["num_parallel"], 4);
    assert_eq!(a["num_ctx"], 8192);
    assert_eq!(a["num_ctx_from"], "asked");
    assert_eq!(a["kv_cache_type"], "q8_0");
    // Four requests of 8,192 tokens: llama-server's -c 32768 -np 4.
    assert_eq!(a["llamacpp"]["context"], 32_768);
    let err = common::one_line_error(
        gpumem().env("OLLAMA_NUM_PARALLEL", "four").args([
            "estimate",
            "--model",
            "llama-3.1-8b",
            "--engine",
            "ollama",
            "--device",
            "sim:rtx4090",
        ]),
        2,
    );
    assert_eq!(
        err,
        "gpumem: error: OLLAMA_NUM_PARALLEL=\"four\" is not a whole number\n"
    );
    // A model in Ollama's store: its manifest's model layer is the GGUF fixture.
    let home = tempfile::tempdir().unwrap();
    let (models, manifests, digest) = common::ollama_store(home.path());
    std::fs::write(
        manifests.join("q4"),
        serde_json::json!({"schemaVersion": 2, "layers": [
            {"mediaType": "application/vnd.ollama.image.model", "digest": format!("sha256:{digest}")}
        ]})
        .to_string(),
    )
    .unwrap();
    let doc = common::json_ok(gpumem().env("OLLAMA_MODELS", &models).args([
        "--json",
        "select",
        "--model",
        "ollama:tiny:q4",
        "--engine",
        "ollama",
        "--device",
        "sim:rtx4090",
        "--parallel",
        "2",
    ]));
    let commands = &doc["launch"][0]["commands"];
    assert_eq!(doc["launch"][0]["engine"], "ollama");
    assert_eq!(commands[0]["role"], "server");
    assert_eq!(
        commands[0]["shell"],
        "OLLAMA_CONTEXT_LENGTH=2048 OLLAMA_NUM_PARALLEL=2 ollama serve"
    );
    assert_eq!(commands[1]["role"], "client");
    assert_eq!(commands[1]["shell"], "ollama run tiny:q4");
}
