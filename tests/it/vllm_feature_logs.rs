//! `gpumem select` against public vLLM start-up logs that ran with speculative decoding or LoRA
//! (`tests/fixtures/vllm/feature-logs.json`, each run citing where it was printed): replayed as
//! `vllm_reference.rs` replays its runs, with the feature's own flags (`--speculative-config`,
//! `--enable-lora --max-loras K --max-lora-rank R`), the plan must start where vLLM started and
//! its "GPU KV cache size" lie within [0.90, 1.10]× of vLLM's. The table of every run is
//! printed (`--nocapture`) for docs/accuracy.md.

#![allow(clippy::unwrap_used)]

use serde_json::Value;

use crate::common;
use crate::vllm_reference::replay;

pub(crate) fn runs() -> Vec<Value> {
    let text = std::fs::read_to_string(common::fixture("vllm/feature-logs.json")).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    assert!(doc["about"].is_string());
    doc["runs"].as_array().unwrap().clone()
}

/// The feature's settings as the run passed them.
fn settings(run: &Value) -> String {
    run["extra_args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn kv_tokens_match_vllm_logs_with_speculative_decoding_and_lora() {
    let runs = runs();
    let count = |feature: &str| runs.iter().filter(|r| r["feature"] == feature).count();
    // Issue 61 asks for 4 speculative and 3 LoRA logs (docs/accuracy.md says what was
    // searched and rejected).
    assert!(
        count("speculative") >= 4,
        "{} speculative runs",
        count("speculative")
    );
    assert!(count("lora") >= 3, "{} LoRA runs", count("lora"));
    let mut table = String::from(
        "| run | GPU | model | TP | vLLM | settings | vLLM tokens | gpumem tokens | ratio |\n\
         | --- | --- | --- | --- | --- | --- | ---: | ---: | ---: |\n",
    );
    let mut failures = Vec::new();
    for run in &runs {
        let id = run["id"].as_str().unwrap();
        assert!(
            run["source"].as_str().is_some_and(|s| !s.is_empty()),
            "{id}: no source"
        );
        let (code, doc) = replay(run);
        let engine = &doc["plan"]["engine"];
        let printed = run["kv_tokens"].as_u64().unwrap();
        let ours = engine["kv_tokens"].as_u64().unwrap_or(0);
        let ratio = ours as f64 / printed as f64;
        table.push_str(&format!(
            "| {id} | {} | {} | {} | {} | `{}` | {printed} | {ours} | {ratio:.3} |\n",
            run["gpu_model"].as_str().unwrap(),
            run["model"].as_str().unwrap(),
            run["tensor_parallel"],
            run["vllm"]
                .as_str()
                .unwrap()
                .split([',', ' '])
                .next()
                .unwrap(),
            settings(run),
        ));
        if (code == 0) != run["started"].as_bool().unwrap() {
            failures.push(format!("{id}: gpumem exits {code} ({})", engine["outcome"]));
        }
        if !(0.90..=1.10).contains(&ratio) {
            failures.push(format!(
                "{id}: {ours} tokens against vLLM's {printed} ({ratio:.3}×)"
            ));
        }
    }
    println!("{table}");
    assert!(failures.is_empty(), "{table}\n{}", failures.join("\n"));
}
