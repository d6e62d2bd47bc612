//! vLLM's KV cache for the architectures of 2026 (Qwen3.5/3.6's hybrid gated DeltaNet, GLM-5's
//! sparse MLA) against public start-up logs (tests/fixtures/vllm/kv-pages-2026.json): the
//! memory each log says was left for the cache, turned into blocks and tokens by gpumem's page
//! arithmetic, against the "GPU KV cache size" vLLM printed.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use serde_json::Value;

use gpumem::model::{find_model, parse_config, ModelArch};
use gpumem::plan::engines::speculative::SpecAlgorithm;
use gpumem::plan::engines::vllm::{kv_of_available, VllmConfig, VllmModel, VllmSpeculative};

use crate::common;

const GIB: f64 = (1u64 << 30) as f64;

fn runs() -> Vec<Value> {
    let text = std::fs::read_to_string(common::fixture("vllm/kv-pages-2026.json")).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    doc["runs"].as_array().unwrap().clone()
}

fn arch_of(model: &Value) -> ModelArch {
    match model {
        Value::String(name) => find_model(name).unwrap().arch,
        config => {
            parse_config(Path::new("config.json"), "run", config)
                .unwrap()
                .0
        }
    }
}

/// The tokens gpumem makes of a run's printed available memory, at the least and the most the
/// two printed decimals allow, printed as that vLLM printed them.
fn tokens(run: &Value) -> (u64, u64) {
    let arch = arch_of(&run["model"]);
    let model = VllmModel {
        arch: &arch,
        weights_bytes: 0,
        activation_bytes: 2,
        vision: None,
    };
    let speculative = run.get("speculative").map(|s| VllmSpeculative {
        method: SpecAlgorithm::Mtp,
        tokens: s["num_speculative_tokens"].as_u64().unwrap(),
        json: s.to_string(),
    });
    let cfg = VllmConfig {
        speculative,
        kv_element_bytes: run["kv_element_bytes"].as_u64().unwrap(),
        max_num_batched_tokens: run["max_num_batched_tokens"].as_u64(),
        ..VllmConfig::defaults(run["max_model_len"].as_u64().unwrap())
    };
    let tp = run["tensor_parallel"].as_u64().unwrap();
    let dcp = run["decode_context_parallel"].as_u64().unwrap();
    let gib = run["available_gib"].as_f64().unwrap();
    let per_group = run["printed_as"] == "blocks";
    let at = |g: f64| {
        let kv = kv_of_available(&model, tp, &cfg, (g * GIB) as u64).unwrap();
        let tokens = if per_group {
            kv.blocks / kv.groups.max(1) * kv.block_size
        } else {
            kv.tokens
        };
        tokens * dcp
    };
    (at(gib - 0.005), at(gib + 0.005))
}

#[test]
fn kv_pages_of_2026_architectures_match_vllm_start_up_logs() {
    let runs = runs();
    assert!(runs.len() >= 6, "{} runs", runs.len());
    let mut table = String::from("| run | vLLM | gpumem | ratio |\n| --- | --- | --- | --- |\n");
    let mut failures = Vec::new();
    for run in &runs {
        let id = run["id"].as_str().unwrap();
        let printed = run["kv_tokens"].as_u64().unwrap();
        let (lo, hi) = tokens(run);
        // Within the printed GiB's rounding the figure is exact; otherwise the nearer bound.
        let ours = if (lo..=hi).contains(&printed) {
            printed
        } else if printed < lo {
            lo
        } else {
            hi
        };
        let ratio = ours as f64 / printed as f64;
        table.push_str(&format!("| {id} | {printed} | {lo}–{hi} | {ratio:.4} |\n"));
        if !(0.90..=1.10).contains(&ratio) {
            failures.push(format!("{id}: {lo}–{hi} tokens against vLLM's {printed}"));
        }
    }
    println!("{table}");
    assert!(failures.is_empty(), "{table}\n{}", failures.join("\n"));
}
