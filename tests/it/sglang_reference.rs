//! `gpumem select --engine sglang` against SGLang's own start-up logs
//! (`tests/fixtures/sglang/startup-logs.json`, each run citing where it was printed): replayed
//! with the fraction, context and tensor-parallel size SGLang ran with, its
//! `max_total_num_tokens` must lie within [0.90, 1.10]× of SGLang's. Every failing run is named.

#![allow(clippy::unwrap_used)]

use crate::common;

use serde_json::Value;

fn runs() -> Vec<Value> {
    let text = std::fs::read_to_string(common::fixture("sglang/startup-logs.json")).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    doc["runs"].as_array().unwrap().clone()
}

/// SGLang's pool and gpumem's, for one replayed run.
fn replay(run: &Value) -> Result<(u64, u64), String> {
    let args: Vec<&str> = run["replay"]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let out = common::gpumem()
        .args(["--json", "select", "--engine", "sglang"])
        .args(&args)
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "{}: no JSON ({e}): {}",
            run["id"],
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    let fit = &doc["plan"]["sglang"];
    let tp = run["tp_size"].as_u64().unwrap();
    if fit["tensor_parallel"].as_u64() != Some(tp) {
        return Err(format!(
            "{}: TP {} planned, SGLang ran {tp}",
            run["id"], fit["tensor_parallel"]
        ));
    }
    Ok((
        run["max_total_num_tokens"].as_u64().unwrap(),
        fit["max_total_num_tokens"].as_u64().unwrap(),
    ))
}

#[test]
fn max_total_num_tokens_within_ten_percent_of_sglangs_logs() {
    let mut failures = Vec::new();
    let mut replayed = 0;
    let mut gpus = std::collections::BTreeSet::new();
    let mut tensor_parallel = 0;
    for run in runs().iter().filter(|r| !r["replay"].is_null()) {
        replayed += 1;
        gpus.insert(run["gpu_model"].as_str().unwrap_or("").to_string());
        if run["tp_size"].as_u64().unwrap() > 1 {
            tensor_parallel += 1;
        }
        match replay(run) {
            Ok((printed, ours)) => {
                let ratio = ours as f64 / printed as f64;
                if !(0.90..=1.10).contains(&ratio) {
                    failures.push(format!(
                        "{}: {ours} against {printed} ({ratio:.4})",
                        run["id"]
                    ));
                }
            }
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The references span GPUs and tensor-parallel sizes; a run left out says why.
    assert!(replayed >= 8, "{replayed}");
    assert!(gpus.len() >= 4, "{gpus:?}");
    assert!(tensor_parallel >= 2);
    for run in runs().iter().filter(|r| r["replay"].is_null()) {
        assert!(run["not_replayed"].is_string(), "{}", run["id"]);
    }
}
