//! A 70B-shaped, 30-shard safetensors repository behind the loopback Hub stand-in with 100 ms
//! added to every request, read by `gpumem estimate --model ORG/NAME` with an empty cache:
//! wall time per run, requests and bytes (the target: under 1.0 s, no more bytes than
//! hf-mem 0.5.6's 2.97 MB), then once more from the cache (no request).
//!
//! `cargo bench --bench hub_remote` measures; `cargo bench --bench hub_remote -- --serve` keeps
//! the stand-in up and prints its endpoint, to time a peer (hf-mem) against the same server.

#![allow(missing_docs, clippy::unwrap_used)]

#[path = "../tests/it/common/hub_standin.rs"]
mod hub_standin;

use std::process::Command;
use std::time::{Duration, Instant};

use hub_standin::{llama_tensors, repo, safetensors_repo, HubStandin};

fn main() {
    let config = serde_json::json!({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
        "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 128256,
        "max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "tie_word_embeddings": false,
        "rope_theta": 500000.0, "torch_dtype": "bfloat16"
    });
    let tensors = llama_tensors(&config, "BF16", false);
    let (files, total) = safetensors_repo(&config, &tensors, 30);
    let hub = HubStandin::start(
        vec![repo("bench/Llama-70B-shaped", files)],
        Duration::from_millis(100),
    );
    // `--serve-config ID CONFIG SHARDS`: a checkpoint laid out from a config.json's shapes
    // (Llama and Qwen3 layouts), served under a real id, for the README's examples.
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--serve-config") {
        let (id, path, shards) = (&args[i + 1], &args[i + 2], args[i + 3].parse().unwrap());
        let config: serde_json::Value =
            serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        let (files, total) =
            safetensors_repo(&config, &llama_tensors(&config, "BF16", false), shards);
        let hub = HubStandin::start(vec![repo(id, files)], Duration::ZERO);
        println!(
            "HF_ENDPOINT={} serving {id} ({total} bytes of tensors)",
            hub.endpoint
        );
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    if std::env::args().any(|a| a == "--serve") {
        println!("HF_ENDPOINT={} serving bench/Llama-70B-shaped ({} tensors, {total} bytes); Ctrl-C ends", hub.endpoint, tensors.len());
        loop {
            std::thread::sleep(Duration::from_secs(5));
            println!("requests {} bytes {}", hub.requests(), hub.bytes());
        }
    }
    let bin = env!("CARGO_BIN_EXE_gpumem");
    let mut times = Vec::new();
    let (mut requests, mut bytes) = (0, 0);
    for _ in 0..5 {
        let cache = tempfile::tempdir().unwrap();
        let (r0, b0) = (hub.requests(), hub.bytes());
        let start = Instant::now();
        let out = run(bin, &hub.endpoint, cache.path());
        times.push(start.elapsed());
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["weights_bytes"], total);
        (requests, bytes) = (hub.requests() - r0, hub.bytes() - b0);
        if times.len() == 5 {
            let r1 = hub.requests();
            let start = Instant::now();
            let again = run(bin, &hub.endpoint, cache.path());
            assert!(again.status.success());
            println!(
                "from the cache: {:.3} s, {} requests",
                start.elapsed().as_secs_f64(),
                hub.requests() - r1
            );
        }
    }
    times.sort();
    println!(
        "gpumem estimate, 30 shards, 100 ms a request: median {:.3} s (min {:.3}, max {:.3}), {requests} requests, {bytes} bytes",
        times[2].as_secs_f64(),
        times[0].as_secs_f64(),
        times[4].as_secs_f64()
    );
}

fn run(bin: &str, endpoint: &str, cache: &std::path::Path) -> std::process::Output {
    Command::new(bin)
        .args(["estimate", "--model", "bench/Llama-70B-shaped", "--json"])
        .env("HF_ENDPOINT", endpoint)
        .env("HF_HOME", cache.join("hf"))
        .env("GPUMEM_CACHE_DIR", cache.join("gpumem"))
        .env_remove("HF_TOKEN")
        .env_remove("HF_HUB_OFFLINE")
        .output()
        .unwrap()
}
