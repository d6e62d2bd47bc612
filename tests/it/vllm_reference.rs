//! `gpumem select` against vLLM's own start-up logs (`tests/fixtures/vllm/startup-logs.json`,
//! each run citing the public thread or file it was printed in): replayed with the settings vLLM
//! ran with, the plan must start where vLLM started and refuse where it refused, and its "GPU KV
//! cache size" must lie within [0.90, 1.10]× of vLLM's. Every failing run is named. Logs older
//! than vLLM 0.21, which did not take the CUDA-graph estimate from the KV budget, are replayed
//! with `--enforce-eager`, which drops that one term; the estimate is checked on its own against
//! the figure vLLM 0.19 printed.

#![allow(clippy::unwrap_used)]

use crate::common;

use serde_json::Value;

fn runs() -> Vec<Value> {
    let text = std::fs::read_to_string(common::fixture("vllm/startup-logs.json")).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    doc["runs"].as_array().unwrap().clone()
}

/// `select --json` with the model, context, utilization, devices and tensor-parallel size a
/// run was started with.
fn run_args(run: &Value) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "--json".into(),
        "select".into(),
        "--model".into(),
        run["model"].as_str().unwrap().into(),
        "--context".into(),
        run["max_model_len"].to_string(),
        "--gpu-memory-utilization".into(),
        run["gpu_memory_utilization"].to_string(),
    ];
    // vLLM ran with `-tp N`: the same size is asked for, not left to gpumem's fewest GPUs.
    let tp = run["tensor_parallel"].as_u64().unwrap();
    let gpus = tp * run["pipeline_parallel"].as_u64().unwrap_or(1);
    for _ in 0..gpus {
        args.push("--device".into());
        args.push(format!("sim:{}", run["total"].as_str().unwrap()));
    }
    args.push("--tensor-parallel-size".into());
    args.push(tp.to_string());
    // The run's other settings as gpumem spells them (`--dtype`, `--kv-dtype`, a pipeline's
    // layer partition).
    if let Some(extra) = run["extra_args"].as_array() {
        args.extend(extra.iter().map(|a| a.as_str().unwrap().to_string()));
    }
    args
}

pub(crate) fn replay(run: &Value) -> (i32, Value) {
    let args = replay_args(run);
    let out = common::gpumem().args(&args).output().unwrap();
    (
        out.status.code().unwrap(),
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
    )
}

/// `select --json`'s arguments for a run: [`run_args`], its batch limits, and `--enforce-eager`
/// where the run's KV cache was sized without the CUDA graphs.
pub(crate) fn replay_args(run: &Value) -> Vec<String> {
    let mut args = run_args(run);
    for flag in ["max_num_batched_tokens", "max_num_seqs"] {
        if let Some(n) = run[flag].as_u64() {
            args.push(format!("--{}", flag.replace('_', "-")));
            args.push(n.to_string());
        }
    }
    if run["cuda_graphs_subtracted"] == Value::Bool(false) {
        args.push("--enforce-eager".into());
    }
    args
}

/// What is wrong with one run's replay, if anything.
fn check(run: &Value) -> Option<String> {
    let (code, doc) = replay(run);
    let started = run["started"].as_bool().unwrap();
    let printed = run["kv_tokens"].as_u64().unwrap();
    let engine = &doc["plan"]["engine"];
    let ours = engine["kv_tokens"].as_u64()?;
    let tp = engine["tensor_parallel"].as_u64()?;
    let mut wrong = Vec::new();
    if (code == 0) != started {
        wrong.push(format!(
            "vLLM {} but gpumem exits {code} ({})",
            if started { "started" } else { "refused" },
            engine["outcome"]
        ));
    }
    if tp != run["tensor_parallel"].as_u64().unwrap() {
        wrong.push(format!("planned tensor parallel {tp}"));
    }
    let stages = engine["pipeline_parallel"].as_u64()?;
    if stages != run["pipeline_parallel"].as_u64().unwrap_or(1) {
        wrong.push(format!("planned {stages} pipeline stages"));
    }
    let ratio = ours as f64 / printed as f64;
    if run["kv_ratio_unchecked"].is_null() && !(0.90..=1.10).contains(&ratio) {
        wrong.push(format!(
            "KV cache {ours} tokens against vLLM's {printed} ({ratio:.3}×)"
        ));
    }
    (!wrong.is_empty()).then(|| wrong.join("; "))
}

#[test]
fn kv_tokens_and_refusals_match_vllm_start_up_logs() {
    let runs = runs();
    let tensor_parallel = runs
        .iter()
        .filter(|r| r["tensor_parallel"].as_u64() > Some(1))
        .count();
    let gpu_models: std::collections::BTreeSet<&str> = runs
        .iter()
        .filter_map(|r| r["gpu_model"].as_str())
        .collect();
    assert!(runs.len() >= 20, "the fixture holds {} runs", runs.len());
    assert!(tensor_parallel >= 8, "{tensor_parallel} runs at TP > 1");
    assert!(gpu_models.len() >= 4, "GPU models: {gpu_models:?}");
    let failures: Vec<String> = runs
        .iter()
        .filter_map(|r| check(r).map(|why| format!("{}: {why}", r["id"].as_str().unwrap_or("?"))))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// gpumem's modelled terms for one run, as vLLM 0.33 takes them (CUDA graphs included), in GiB.
fn modelled_terms(run: &Value) -> Value {
    let args = run_args(run);
    let out = common::gpumem().args(&args).output().unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let terms = doc["plan"]["engine"]["terms"].as_array().unwrap();
    let gib = |name: &str| {
        terms.iter().find(|t| t["term"] == name).map_or(0.0, |t| {
            t["bytes"].as_f64().unwrap() / f64::from(1u32 << 30)
        })
    };
    serde_json::json!({
        "weights": gib("weights"),
        "profile_peak": gib("profile_peak"),
        "non_torch": gib("non_torch"),
        "cuda_graphs_estimate": gib("cuda_graphs"),
    })
}

// The terms vLLM 0.19 printed on H100s (weights, the profile's peak, what the forward pass took
// outside torch, and the CUDA-graph estimate 0.33 subtracts) against gpumem's: weights within
// 1 %, the non-torch memory (0.25 GiB, 2.1 GiB where ranks all-reduce over NVLink SHARP) within
// 10 %, the profile peak never above vLLM's and within 15 % (the sampler's Triton buffer and
// the MoE router's tensors are not modelled), and the CUDA-graph estimate, a measurement that
// varies by a few MiB a graph from run to run, within [0.35, 1.6]× a run and within 15 % over
// all the runs.
#[test]
fn modelled_terms_match_what_vllm_printed() {
    let mut failures = Vec::new();
    let (mut ours_graphs, mut theirs_graphs) = (0.0, 0.0);
    let bands = [
        ("weights", 0.99, 1.01),
        ("non_torch", 0.90, 1.10),
        ("profile_peak", 0.85, 1.00),
        ("cuda_graphs_estimate", 0.35, 1.6),
    ];
    let printed: Vec<Value> = runs()
        .into_iter()
        .filter(|r| r["printed_terms_gib"].is_object())
        .collect();
    assert!(
        printed.len() >= 15,
        "{} runs print their terms",
        printed.len()
    );
    for run in &printed {
        let ours = modelled_terms(run);
        let theirs = &run["printed_terms_gib"];
        for (term, lo, hi) in bands {
            let (o, t) = (ours[term].as_f64().unwrap(), theirs[term].as_f64().unwrap());
            // vLLM prints two decimals of a GiB.
            let ratio = o / t;
            if !(lo..=hi).contains(&ratio) && (o - t).abs() > 0.005 {
                failures.push(format!(
                    "{} {term}: {o:.2} GiB against vLLM's {t:.2} ({ratio:.2}×)",
                    run["id"]
                ));
            }
        }
        ours_graphs += ours["cuda_graphs_estimate"].as_f64().unwrap();
        theirs_graphs += theirs["cuda_graphs_estimate"].as_f64().unwrap();
    }
    let overall = ours_graphs / theirs_graphs;
    if !(0.85..=1.15).contains(&overall) {
        failures.push(format!("CUDA graphs over all runs: {overall:.3}×"));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `select --json` for `model` at `context` on `n` GPUs of `size`.
fn plan_on(model: &str, context: &str, n: usize, size: &str) -> Value {
    let mut args = vec!["--json", "select", "--model", model, "--context", context];
    let device = format!("sim:{size}");
    for _ in 0..n {
        args.extend(["--device", device.as_str()]);
    }
    let out = common::gpumem().args(&args).output().unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

// No plan has a tensor-parallel size vLLM would reject: Llama-3.1-70B has 64 heads and 8 KV
// heads, so three H100s give TP 2.
#[test]
fn tensor_parallel_sizes_divide_the_heads() {
    let doc = plan_on("llama-3.1-70b", "8192", 3, "79.19GiB");
    assert_eq!(doc["plan"]["kind"], "tensor_parallel");
    assert_eq!(doc["plan"]["engine"]["tensor_parallel"], 2);
    let shell = doc["launch"][0]["commands"][0]["shell"].as_str().unwrap();
    assert!(shell.ends_with("--tensor-parallel-size 2"), "{shell}");
    // A model whose 40 heads and 8 KV heads allow 1, 2, 4 or 8 ranks: never 3.
    let doc = plan_on("qwen2.5-14b", "32768", 3, "16GiB");
    assert_ne!(doc["plan"]["engine"]["tensor_parallel"], 3, "{doc}");
    // Falcon-7B's 71 heads and one KV head: two ranks would hold the KV head whole, but the
    // heads do not divide, so vLLM takes no tensor-parallel pair.
    let doc = plan_on("falcon-7b", "2048", 2, "12GiB");
    assert_ne!(doc["plan"]["kind"], "tensor_parallel", "{doc}");
    assert_eq!(doc["plan"]["engine"]["tensor_parallel"], 1, "{doc}");
}

/// Llama-3.1-8B served at 8,192 tokens.
const LLAMA_8K: [&str; 4] = ["--model", "llama-3.1-8b", "--context", "8192"];

// VLLM_PP_LAYER_PARTITION (`--pp-layer-partition`): Llama-3.1-8B's 32 layers as 12 + 20 over
// two 24 GiB GPUs. Only two-stage layouts are planned, the 20-layer stage binds (vLLM gives
// every rank the smallest rank's blocks), and the launch sets the variable; vLLM's own even
// split needs none; a partition of other than the model's layers is refused as vLLM refuses it.
#[test]
fn a_layer_partition_is_planned_and_launched_as_vllm_takes_it() {
    use crate::select::select;
    let base = [
        &LLAMA_8K[..],
        &["--device", "sim:24GiB", "--device", "sim:24GiB"],
    ]
    .concat();
    let (code, uneven) = select(&[&base[..], &["--pp-layer-partition", "12,20"]].concat());
    assert_eq!(code, 0);
    let fit = &uneven["plan"]["engine"];
    assert_eq!(fit["pipeline_parallel"], 2, "{fit}");
    assert_eq!(fit["stage_layers"], serde_json::json!([12, 20]));
    assert_eq!(fit["binding_stage"], 1);
    let env = &uneven["launch"][0]["commands"][0]["env"];
    assert!(
        env.as_array()
            .unwrap()
            .contains(&serde_json::json!(["VLLM_PP_LAYER_PARTITION", "12,20"])),
        "{env}"
    );
    let (_, even) = select(&[&base[..], &["--pp-layer-partition", "16,16"]].concat());
    assert_eq!(
        even["plan"]["engine"]["stage_layers"],
        serde_json::json!([16, 16])
    );
    assert!(
        even["plan"]["engine"]["kv_tokens"].as_u64() > fit["kv_tokens"].as_u64(),
        "{even}"
    );
    assert_eq!(
        even["launch"][0]["commands"][0]["env"],
        serde_json::json!([["CUDA_VISIBLE_DEVICES", "0,1"]])
    );
    let err = common::one_line_error(
        common::gpumem()
            .args(["select"])
            .args(base)
            .args(["--pp-layer-partition", "12,21"]),
        2,
    );
    assert_eq!(
        err,
        "gpumem: error: --pp-layer-partition gives 33 layers; the model has 32\n"
    );
}

// --cpu-offload-gb: vLLM's UVA offloader keeps that much of each rank's decoder-layer weights in
// host memory; the weights on the GPU are that much less and the KV cache that much more. The
// launch passes the flag on; a size that is not a number of GiB is a usage error.
#[test]
fn cpu_offload_moves_layer_weights_to_host_memory() {
    use crate::select::select;
    let base = [&LLAMA_8K[..], &["--device", "sim:24GiB"]].concat();
    let (_, plain) = select(&base);
    let (code, offloaded) = select(&[&base[..], &["--cpu-offload-gb", "4"]].concat());
    assert_eq!(code, 0);
    let term = |doc: &serde_json::Value, name: &str| {
        doc["plan"]["engine"]["terms"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["term"] == name)
            .map(|t| t["bytes"].as_u64().unwrap())
    };
    assert_eq!(term(&plain, "cpu_offload"), None);
    assert_eq!(term(&offloaded, "cpu_offload"), Some(4 << 30));
    assert_eq!(
        term(&plain, "weights").unwrap() - term(&offloaded, "weights").unwrap(),
        4 << 30
    );
    assert_eq!(
        term(&offloaded, "kv_cache").unwrap() - term(&plain, "kv_cache").unwrap(),
        4 << 30
    );
    assert!(
        offloaded["plan"]["engine"]["kv_tokens"].as_u64()
            > plain["plan"]["engine"]["kv_tokens"].as_u64()
    );
    let argv = offloaded["launch"][0]["commands"][0]["argv"].to_string();
    assert!(argv.contains(r#""--cpu-offload-gb","4""#), "{argv}");
    let err = common::one_line_error(
        common::gpumem()
            .args(["select"])
            .args(base)
            .args(["--cpu-offload-gb", "lots"]),
        2,
    );
    assert!(err.contains("'lots' is not a number of GiB"), "{err}");
}

// `--tensor-parallel-size N` plans exactly N ranks, as `vllm serve -tp N` runs. By itself
// gpumem serves Llama-3.1-70B on four H100s as people do, TP 4 over the host, and names TP 2 as
// the fewest GPUs that serve it; forced to TP 2 it plans TP 2, whose KV cache is far smaller,
// and the launch says so. A size vLLM would reject, one the GPUs cannot give, or another
// engine's plan is a usage error, as printed.
#[test]
fn a_forced_tensor_parallel_size_is_planned_or_refused_as_vllm_would() {
    let base = ["--model", "llama-3.1-70b", "--context", "8192"];
    let four: Vec<&str> = ["--device", "sim:79.19GiB"].repeat(4);
    let run = |extra: &[&str], devices: &[&str]| {
        let out = common::gpumem()
            .arg("--json")
            .arg("select")
            .args(base)
            .args(devices)
            .args(extra)
            .output()
            .unwrap();
        let doc = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.code().unwrap(), doc, err)
    };
    let (code, chosen, _) = run(&[], &four);
    assert_eq!(code, 0);
    assert_eq!(chosen["plan"]["engine"]["tensor_parallel"], 4);
    assert_eq!(
        chosen["plan"]["engine"]["fewest_gpus"]["tensor_parallel"],
        2
    );
    assert_eq!(chosen["plan"]["engine"]["fewest_gpus"]["gpus"], 2);
    let (code, fewest, _) = run(&["--tensor-parallel-size", "2"], &four);
    assert_eq!(code, 0);
    assert_eq!(fewest["plan"]["engine"]["tensor_parallel"], 2);
    assert_eq!(fewest["plan"]["engine"]["fewest_gpus"], Value::Null);
    assert_eq!(
        fewest["plan"]["engine"]["kv_tokens"],
        chosen["plan"]["engine"]["fewest_gpus"]["kv_tokens"]
    );
    let (code, forced, _) = run(&["--tensor-parallel-size", "4"], &four);
    assert_eq!(code, 0);
    assert_eq!(forced["plan"]["engine"]["tensor_parallel"], 4);
    assert_eq!(forced["plan"]["placements"].as_array().unwrap().len(), 4);
    let kv = |d: &Value| d["plan"]["engine"]["kv_tokens"].as_u64().unwrap();
    assert!(
        kv(&forced) > 4 * kv(&fewest),
        "{} vs {}",
        kv(&forced),
        kv(&fewest)
    );
    let shell = forced["launch"][0]["commands"][0]["shell"]
        .as_str()
        .unwrap();
    assert!(shell.ends_with("--tensor-parallel-size 4"), "{shell}");
    let refused: [(&[&str], &[&str], &str); 3] = [
        (
            &["--tensor-parallel-size", "3"],
            &four,
            "--tensor-parallel-size 3: vLLM requires it to divide the model's 64 attention heads",
        ),
        (
            &["--tensor-parallel-size", "8"],
            &four,
            "--tensor-parallel-size 8 needs 8 identical GPUs on one host; the most here is 4",
        ),
        (
            &["--tensor-parallel-size", "2", "--engine", "llama.cpp"],
            &four,
            "--tensor-parallel-size is vLLM's: it needs --engine vllm or a model vLLM serves",
        ),
    ];
    for (extra, devices, want) in refused {
        let (code, doc, _) = run(extra, devices);
        assert_eq!(code, 2, "{extra:?}");
        assert_eq!(doc["error"]["message"], want, "{extra:?}");
        assert_eq!(doc["error"]["exit_code"], 2, "{extra:?}");
    }
    // The same refusal as a human reads it.
    let out = common::gpumem()
        .arg("select")
        .args(base)
        .args(&four)
        .args(["--tensor-parallel-size", "3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "gpumem: error: --tensor-parallel-size 3: vLLM requires it to divide the model's 64 attention heads\n"
    );
}

// The launch starts vLLM as it was planned: a precision it loads in (`--quantization fp8`,
// `--dtype float32`), an fp8 cache, the batch limits and eager mode are passed on; a precision
// only a stored checkpoint gives gets no flag but a note saying so.
#[test]
fn the_launch_carries_the_settings_the_plan_was_made_under() {
    use crate::select::select;
    let base = [&LLAMA_8K[..], &["--device", "sim:24GiB"]].concat();
    let argv = |doc: &Value| doc["launch"][0]["commands"][0]["argv"].to_string();
    let (code, doc) = select(
        &[
            &base[..],
            &[
                "--dtype",
                "fp8",
                "--kv-dtype",
                "fp8",
                "--max-num-seqs",
                "64",
                "--enforce-eager",
            ],
        ]
        .concat(),
    );
    assert_eq!(code, 0);
    assert!(
        argv(&doc).ends_with(
            r#""--quantization","fp8","--kv-cache-dtype","fp8","--max-num-seqs","64","--enforce-eager"]"#
        ),
        "{}",
        argv(&doc)
    );
    let (_, doc) = select(&[&base[..], &["--dtype", "f32", "--device", "sim:24GiB"]].concat());
    assert!(
        argv(&doc).contains(r#""--dtype","float32""#),
        "{}",
        argv(&doc)
    );
    // vLLM's cache follows the model's dtype unless asked: a block of 16 tokens over 32 layers
    // of K and V for the 4 KV heads of 128 a rank holds at TP 2, in 4-byte elements.
    assert_eq!(doc["plan"]["engine"]["tensor_parallel"], 2);
    assert_eq!(doc["plan"]["engine"]["block_bytes"], 16 * 32 * 2 * 512 * 4);
    let (_, doc) = select(&[&base[..], &["--dtype", "int4"]].concat());
    assert!(!argv(&doc).contains("int4"), "{}", argv(&doc));
    assert_eq!(
        doc["launch"][0]["notes"],
        serde_json::json!([{"note": "stored_quantized"}])
    );
    let (_, plain) = select(&base);
    assert_eq!(plain["launch"][0]["notes"], serde_json::json!([]));
}
