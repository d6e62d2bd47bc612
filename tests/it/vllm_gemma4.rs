//! vLLM's KV cache for Gemma 4 (sliding layers of 256-wide heads beside full layers of 512-wide
//! ones, E4B's last layers reading earlier layers' caches) against public start-up logs
//! (tests/fixtures/vllm/gemma4-kv-logs.json): the memory each log says was left for the cache,
//! turned into blocks and tokens by gpumem's page arithmetic, against the "GPU KV cache size"
//! vLLM printed.

#![allow(clippy::unwrap_used)]

use serde_json::Value;

use gpumem::model::find_model;
use gpumem::plan::engines::vllm::{kv_of_available, VllmConfig, VllmModel};

use crate::common;

const GIB: f64 = (1u64 << 30) as f64;

fn runs() -> Vec<Value> {
    let text = std::fs::read_to_string(common::fixture("vllm/gemma4-kv-logs.json")).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    doc["runs"].as_array().unwrap().clone()
}

/// A run's `vllm serve` settings.
fn config(run: &Value) -> VllmConfig {
    VllmConfig {
        kv_element_bytes: run["kv_element_bytes"].as_u64().unwrap(),
        max_num_batched_tokens: run["max_num_batched_tokens"].as_u64(),
        in_flight_batches: run["in_flight_batches"].as_u64().unwrap(),
        ..VllmConfig::defaults(run["max_model_len"].as_u64().unwrap())
    }
}

/// The tokens gpumem makes of `bytes` left for the cache of `name` under `cfg` on `tp` ranks.
fn tokens_of(name: &str, tp: u64, cfg: &VllmConfig, bytes: u64) -> (u64, u64) {
    let arch = find_model(name).unwrap().arch;
    let model = VllmModel {
        arch: &arch,
        weights_bytes: 0,
        activation_bytes: 2,
        vision: None,
    };
    let kv = kv_of_available(&model, tp, cfg, bytes).unwrap();
    (kv.tokens, kv.blocks)
}

#[test]
fn gemma4_kv_pages_match_vllm_start_up_logs() {
    let runs = runs();
    assert!(runs.len() >= 2, "{} runs", runs.len());
    let mut table = String::from("| run | vLLM | gpumem | ratio |\n| --- | --- | --- | --- |\n");
    let mut failures = Vec::new();
    for run in &runs {
        let id = run["id"].as_str().unwrap();
        let printed = run["kv_tokens"].as_u64().unwrap();
        let cfg = config(run);
        let tp = run["tensor_parallel"].as_u64().unwrap();
        let gib = run["available_gib"].as_f64().unwrap();
        let at = |g: f64| tokens_of(run["model"].as_str().unwrap(), tp, &cfg, (g * GIB) as u64).0;
        let (lo, hi) = (at(gib - 0.005), at(gib + 0.005));
        let ours = printed.clamp(lo, hi);
        let ratio = ours as f64 / printed as f64;
        table.push_str(&format!("| {id} | {printed} | {lo}–{hi} | {ratio:.4} |\n"));
        if !(0.90..=1.10).contains(&ratio) {
            failures.push(format!("{id}: {lo}–{hi} tokens against vLLM's {printed}"));
        }
    }
    println!("{table}");
    assert!(failures.is_empty(), "{table}\n{}", failures.join("\n"));
}

// No public vLLM log of E2B was found; its pages by vLLM 0.33's source, worked by hand. Of its
// 35 layers the last 20 read layers 13's and 14's caches (`kv_sharing_target_layer_name`, no
// KV spec), leaving 12 sliding layers (one KV head of 256: 2 × 256 × 2 = 1,024 bytes a token)
// and 3 full ones (one of 512: 2,048 bytes). `unify_kv_cache_spec_page_size` makes every page
// the full layers' 16 × 2,048 = 32,768 bytes, the sliding layers' block 32 tokens; groups of 3
// layers (the fewest of a kind; 12 ≥ 1.5 × 3): 4 sliding groups and 1 full, a block spanning 3
// pages (98,304 bytes). 1 GiB is 10,922 blocks. A request of 32,768 tokens (2,048 batched, two
// in flight) takes 32,768 ÷ 16 = 2,048 full blocks and 4 × (⌈(511 + 4,096) ÷ 32⌉ + 1) = 580
// sliding ones: 2,628 blocks, so 10,922 × 32,768 ÷ 2,628 = 136,184 tokens.
#[test]
fn gemma4_e2b_pages_are_vllms_by_hand() {
    let cfg = VllmConfig {
        max_num_batched_tokens: Some(2048),
        ..VllmConfig::defaults(32_768)
    };
    assert_eq!(
        tokens_of("gemma-4-e2b", 1, &cfg, 1 << 30),
        (136_184, 10_922)
    );
}
