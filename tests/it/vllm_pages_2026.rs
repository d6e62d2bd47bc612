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

// `--speculative-config` as vLLM takes it: an MTP draft's weights and KV layer join the plan,
// the hybrid's attention block grows as vLLM's log says (2,144 tokens for Qwen3.6-35B-A3B with
// 3 MTP tokens and an fp8 cache), and the launch carries the JSON as given.
#[test]
fn a_speculative_config_joins_the_plan_and_the_launch() {
    let json = r#"{"method":"qwen3_5_mtp","num_speculative_tokens":3}"#;
    let run = |spec: Option<&str>| {
        let mut args = vec![
            "--json",
            "select",
            "--model",
            "qwen3.5-35b-a3b",
            "--engine",
            "vllm",
            "--device",
            "sim:h200",
            "--kv-dtype",
            "fp8",
        ];
        if let Some(s) = spec {
            args.extend(["--speculative-config", s]);
        }
        let out = common::gpumem().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(0));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let (with, without) = (run(Some(json)), run(None));
    let draft = &with["plan"]["engine"]["draft"];
    assert_eq!(draft["algorithm"], "MTP");
    assert_eq!(
        (draft["layers"].as_u64(), draft["tokens"].as_u64()),
        (Some(1), Some(3))
    );
    assert!(draft["weights_bytes"].as_u64().unwrap() > 1 << 30);
    assert_eq!(with["plan"]["engine"]["block_size"], 2144);
    assert_eq!(without["plan"]["engine"]["block_size"], 2096);
    assert!(without["plan"]["engine"]["draft"].is_null());
    let kv = |doc: &Value| doc["plan"]["engine"]["kv_tokens"].as_u64().unwrap();
    assert!(kv(&with) < kv(&without), "{} {}", kv(&with), kv(&without));
    assert!(with
        .to_string()
        .contains(&serde_json::to_string(json).unwrap()));
    // A draft model of its own, or JSON vLLM would not take, is a usage error.
    for (spec, why) in [
        (
            r#"{"model":"Qwen/Qwen3.5-0.8B","num_speculative_tokens":3}"#,
            "method (none: a draft model) is not modelled (gpumem models eagle, eagle3, mtp and \
             ngram drafts; a draft model of its own is not)",
        ),
        (
            r#"{"method":"eagle3"}"#,
            "num_speculative_tokens is missing",
        ),
        (
            r#"{"method":"mtp","num_speculative_tokens":0}"#,
            "num_speculative_tokens 0 is not from 1 to 64",
        ),
    ] {
        let out = common::gpumem()
            .args(["select", "--model", "qwen3.5-35b-a3b", "--engine", "vllm"])
            .args(["--device", "sim:h200", "--speculative-config", spec])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{spec}");
        assert_eq!(
            String::from_utf8(out.stderr).unwrap().trim_end(),
            format!("gpumem: error: --speculative-config: {why}")
        );
    }
}
