//! `gpumem select` against public vLLM start-up logs of vision-language models
//! (`tests/fixtures/vllm/vlm-logs.json`, each run citing where it was printed): replayed with the
//! model's published config.json, the settings the run gave and its multimodal flags, the plan
//! must start where vLLM started, refuse where it refused, and its "GPU KV cache size" (or its
//! shortfall, where vLLM printed a negative available memory) lie within [0.90, 1.10]× of
//! vLLM's. Runs marked 'outside' are tabled, not held to the ratio. The table of every run is
//! printed (`--nocapture`) for docs/accuracy.md. Also: the multimodal flags reach the launch,
//! and a tower gpumem does not model is refused by name.

#![allow(clippy::unwrap_used)]

use serde_json::Value;

use crate::common;

const GIB: f64 = (1u64 << 30) as f64;

pub(crate) fn runs() -> Vec<Value> {
    let text = std::fs::read_to_string(common::fixture("vllm/vlm-logs.json")).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    assert!(doc["about"].is_string());
    doc["runs"].as_array().unwrap().clone()
}

/// `select --json` as the run was started.
fn replay(run: &Value) -> (i32, Value) {
    let args = replay_args(run);
    let out = common::gpumem().args(&args).output().unwrap();
    (
        out.status.code().unwrap(),
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
    )
}

/// `select --json`'s arguments for a run, as it was started.
pub(crate) fn replay_args(run: &Value) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "--json".into(),
        "select".into(),
        "--config".into(),
        common::fixture(run["config"].as_str().unwrap()),
        "--engine".into(),
        "vllm".into(),
        "--context".into(),
        run["max_model_len"].to_string(),
        "--gpu-memory-utilization".into(),
        run["gpu_memory_utilization"].to_string(),
        "--device".into(),
        format!("sim:{}", run["total"].as_str().unwrap()),
        "--tensor-parallel-size".into(),
        run["tensor_parallel"].to_string(),
    ];
    for flag in ["max_num_batched_tokens", "max_num_seqs"] {
        if let Some(n) = run[flag].as_u64() {
            args.push(format!("--{}", flag.replace('_', "-")));
            args.push(n.to_string());
        }
    }
    if run["cuda_graphs_subtracted"] == Value::Bool(false) {
        args.push("--enforce-eager".into());
    }
    args.extend(
        run["extra_args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string()),
    );
    args
}

/// gpumem's figure for the run and vLLM's: KV tokens where it started, else the GiB the budget
/// is short by (vLLM's negative available memory), where printed.
fn figures(run: &Value, engine: &Value) -> Option<(f64, f64)> {
    if run["started"].as_bool().unwrap() {
        // vLLM up to 0.20 printed the blocks a KV-cache group gets; later ones the concurrency
        // times max_model_len, as gpumem's kv_tokens does.
        let ours = if run["printed_as"] == "blocks" {
            let n = |k: &str| engine[k].as_u64().unwrap_or(0);
            n("num_blocks") / n("kv_groups").max(1) * n("block_size")
        } else {
            engine["kv_tokens"].as_u64().unwrap_or(0)
        };
        return Some((ours as f64, run["kv_tokens"].as_u64().unwrap() as f64));
    }
    let printed = -run["available_kv_gib"].as_f64()?;
    let short = engine["outcome"]["short_bytes"].as_u64().unwrap_or(0) as f64 / GIB;
    Some((short, printed))
}

#[test]
fn kv_tokens_match_vllm_logs_of_vision_language_models() {
    let runs = runs();
    let mut table = String::from(
        "| run | GPU | model | vLLM | vLLM printed | gpumem | ratio | note |\n\
         | --- | --- | --- | --- | ---: | ---: | ---: | --- |\n",
    );
    let mut failures = Vec::new();
    let mut held = 0;
    for run in &runs {
        let id = run["id"].as_str().unwrap();
        assert!(
            run["source"].as_str().is_some_and(|s| !s.is_empty()),
            "{id}: no source"
        );
        let (code, doc) = replay(run);
        let engine = &doc["plan"]["engine"];
        let started = run["started"].as_bool().unwrap();
        if (code == 0) != started {
            failures.push(format!("{id}: gpumem exits {code} ({})", engine["outcome"]));
        }
        assert!(
            engine["encoder"].is_object(),
            "{id}: no encoder profile in {doc}"
        );
        let Some((ours, printed)) = figures(run, engine) else {
            continue;
        };
        let ratio = ours / printed;
        let outside = run["outside"].as_str();
        table.push_str(&format!(
            "| {id} | {} | {} | {} | {printed} | {ours:.2} | {ratio:.3} | {} |\n",
            run["gpu_model"].as_str().unwrap(),
            run["model"].as_str().unwrap(),
            run["vllm"].as_str().unwrap().split(' ').next().unwrap(),
            if started { "KV tokens" } else { "GiB short" },
        ));
        if outside.is_none() {
            held += 1;
            if !(0.90..=1.10).contains(&ratio) {
                failures.push(format!(
                    "{id}: {ours:.2} against vLLM's {printed} ({ratio:.3}×)"
                ));
            }
        }
    }
    println!("{table}");
    // Issue 61 asks for 4 logs within the ratio (docs/accuracy.md says what was searched and
    // why the others are outside).
    assert!(held >= 4, "{held} runs held to the ratio");
    assert!(failures.is_empty(), "{table}\n{}", failures.join("\n"));
}

/// The weights term holds the RoPE cos/sin caches vLLM tabulates past `max_position_embeddings`,
/// which its "Model loading took" includes: Gemma 3's linearly scaled RoPE (131,072 × 8
/// positions) and Qwen2.5-VL's multimodal RoPE (4 × 128,000 positions). Printed figures: vLLM
/// 0.11.0 loading gemma-3-4b-it on an RTX 4080, "Model loading took 8.5834 GiB" (search-index
/// file id 47625275442), and vLLM 0.27.1 and 0.23.0 loading Qwen2.5-VL-7B-Instruct, "Model
/// loading took 15.67 GiB" (the RTX 4090 and A100 runs of vlm-logs.json); each within 1 %, as
/// vllm_reference.rs holds the weights it prints.
#[test]
fn weights_hold_the_rope_caches_vllm_builds() {
    for (config, printed) in [
        ("hf-configs-as-published/gemma-3-4b-it.json", 8.5834),
        ("hf-configs-as-published/qwen2.5-vl-7b-instruct.json", 15.67),
    ] {
        let out = common::gpumem()
            .args(["--json", "select", "--config"])
            .arg(common::fixture(config))
            .args([
                "--engine",
                "vllm",
                "--context",
                "4096",
                "--device",
                "sim:h100",
            ])
            .output()
            .unwrap();
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        let terms = doc["plan"]["engine"]["terms"].as_array().unwrap();
        let weights = terms.iter().find(|t| t["term"] == "weights").unwrap()["bytes"]
            .as_u64()
            .unwrap() as f64
            / GIB;
        let ratio = weights / printed;
        assert!(
            (0.99..=1.01).contains(&ratio),
            "{config}: {weights:.3} GiB against vLLM's {printed} ({ratio:.3}×)"
        );
    }
}

/// `select` plans Qwen2.5-VL-3B for vLLM with an image limit and a smaller max_pixels: the
/// encoder is profiled with one image of max_pixels / 28² tokens, and the launch carries both
/// flags as given.
#[test]
fn multimodal_flags_reach_the_profile_and_the_launch() {
    let limit = r#"{"image":2,"video":0}"#;
    let kwargs = r#"{"max_pixels":1003520}"#;
    let out = common::gpumem()
        .args(["--json", "select", "--config"])
        .arg(common::fixture("vllm/configs/qwen2.5-vl-3b-instruct.json"))
        .args([
            "--engine",
            "vllm",
            "--context",
            "8192",
            "--device",
            "sim:l4",
        ])
        .args([
            "--limit-mm-per-prompt",
            limit,
            "--mm-processor-kwargs",
            kwargs,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let encoder = &doc["plan"]["engine"]["encoder"];
    // 1,003,520 / 28² = 1,280 tokens an image; the budget is the 2,048 batched tokens, which
    // hold one such image.
    assert_eq!(encoder["modality"], "image");
    assert_eq!(encoder["tokens_per_item"], 1280);
    assert_eq!(encoder["items"], 1);
    assert_eq!(encoder["budget"], 2048);
    let launch = doc["launch"].to_string();
    for flag in ["--limit-mm-per-prompt", "--mm-processor-kwargs"] {
        assert!(launch.contains(flag), "{launch}");
    }
    assert!(
        launch.contains(&serde_json::to_string(limit).unwrap()),
        "{launch}"
    );
}

// vLLM builds no tower whose every modality is limited to 0 (`_mark_tower_model`): the tower's
// weights (Qwen2.5-VL-3B's, 668,684,288 parameters in bf16) leave the plan with its profile
// run, and the cache takes what they held. An image limit alone keeps the tower for video.
#[test]
fn a_tower_limited_to_nothing_is_not_built() {
    let plan = |limit: &str| {
        let out = common::gpumem()
            .args(["--json", "select", "--config"])
            .arg(common::fixture("vllm/configs/qwen2.5-vl-3b-instruct.json"))
            .args(["--engine", "vllm", "--device", "sim:h100"])
            .args(["--limit-mm-per-prompt", limit])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        let engine = doc["plan"]["engine"].clone();
        let term = |name: &str| {
            engine["terms"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["term"] == name)
                .and_then(|t| t["bytes"].as_u64())
                .unwrap()
        };
        (term("weights"), term("kv_cache"), engine["encoder"].clone())
    };
    let (built, built_kv, encoder) = plan(r#"{"image":1,"video":0}"#);
    let (video_only, _, video_encoder) = plan(r#"{"image":0}"#);
    let (unbuilt, unbuilt_kv, none) = plan(r#"{"image":0,"video":0}"#);
    assert_eq!(built - unbuilt, 1_337_368_576);
    assert_eq!(video_only, built);
    assert_eq!(encoder["modality"], "image");
    assert_eq!(video_encoder["modality"], "video");
    assert!(none.is_null(), "{none}");
    assert!(unbuilt_kv > built_kv);
}

// Gemma 4's towers are counted (the JSON's `tower_parameters`) but vLLM's profile run of them
// is not modelled: vLLM refuses the model by name unless every modality its towers serve is
// limited to 0, which leaves them unbuilt, and then plans the language model.
#[test]
fn gemma4s_towers_are_counted_and_planned_only_when_left_out() {
    let run = |config: &str, limit: Option<&str>| {
        let mut cmd = common::gpumem();
        cmd.args(["--json", "select", "--config"])
            .arg(common::fixture(&format!("gemma4-configs/{config}.json")))
            .args(["--engine", "vllm", "--device", "sim:h100"]);
        if let Some(l) = limit {
            cmd.args(["--limit-mm-per-prompt", l]);
        }
        cmd.output().unwrap()
    };
    let out = run("gemma-4-e4b-it", Some(r#"{"image":0,"video":0}"#));
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(out.stderr)
            .unwrap()
            .lines()
            .last()
            .unwrap(),
        "gpumem: error: gemma-4-e4b-it is a multimodal model ('gemma4'): vLLM loads and \
         profiles its vision and audio towers (478.1 M parameters), whose profile run gpumem \
         does not model; --limit-mm-per-prompt '{\"image\":0,\"video\":0,\"audio\":0}' \
         leaves them out and plans the language model"
    );
    let out = run("gemma-4-31b-it", None);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("its vision tower (575.7 M parameters)")
            && err.contains(r#"'{"image":0,"video":0}'"#),
        "{err}"
    );
    let out = run("gemma-4-e4b-it", Some(r#"{"image":0,"video":0,"audio":0}"#));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["plan"]["engine"]["encoder"].is_null());
    let est = common::gpumem()
        .args(["--json", "estimate", "--config"])
        .arg(common::fixture("gemma4-configs/gemma-4-e4b-it.json"))
        .output()
        .unwrap();
    let est: Value = serde_json::from_slice(&est.stdout).unwrap();
    assert_eq!(est["model"]["tower_parameters"], 478_087_456);
    assert_eq!(est["model"]["unloaded_parameters"], 55_055_616);
    // Side by side, vLLM's row says what `--engine vllm` refuses rather than planning the text
    // model alone.
    let vllm_row = |extra: &[&str]| {
        let all = common::json_ok(
            common::gpumem()
                .args(["--json", "estimate", "--config"])
                .arg(common::fixture("gemma4-configs/gemma-4-e4b-it.json"))
                .args(["--engine", "all", "--device", "sim:h100"])
                .args(extra),
        );
        all["engines"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["engine"] == "vllm")
            .unwrap()
            .clone()
    };
    let vllm = vllm_row(&[]);
    assert_eq!(vllm["serves"], false);
    assert_eq!(
        vllm["not_for"],
        "loads and profiles towers gpumem does not model (--engine vllm says more)"
    );
    // vLLM's flags plan its row as `--engine vllm` does: with every modality at 0, the
    // language model, and its tokens those of `select`'s plan above.
    let vllm = vllm_row(&[
        "--limit-mm-per-prompt",
        r#"{"image":0,"video":0,"audio":0}"#,
    ]);
    assert_eq!(vllm["serves"], true);
    assert!(vllm["kv_tokens"].as_u64().unwrap() > 0, "{vllm}");
    assert_eq!(vllm["kv_tokens"], doc["plan"]["capacity"]["kv_tokens"]);
    assert_eq!(
        est["warnings"][0],
        "multimodal model: its towers (478.1 M parameters) are in no engine's figures here \
         (vLLM's plan takes the model with --limit-mm-per-prompt setting every modality to 0, \
         which leaves them out; --json: model.tower_parameters)"
    );
}

/// A vision-language model whose tower gpumem does not model is refused by name for vLLM, and
/// the multimodal flags need vLLM and a model with a tower.
#[test]
fn unmodelled_towers_and_misplaced_flags_are_refused() {
    let llava = common::gpumem()
        .args(["select", "--config"])
        .arg(common::fixture(
            "hf-configs-as-published/llava-1.5-7b-hf.json",
        ))
        .args([
            "--engine",
            "vllm",
            "--context",
            "4096",
            "--device",
            "sim:h100",
        ])
        .output()
        .unwrap();
    assert_eq!(llava.status.code(), Some(2));
    let err = String::from_utf8_lossy(&llava.stderr);
    assert!(
        err.contains("'llava'") && err.contains("not model"),
        "{err}"
    );
    let text_only = common::gpumem()
        .args(["select", "--model", "qwen3-8b", "--engine", "vllm"])
        .args([
            "--device",
            "sim:h100",
            "--limit-mm-per-prompt",
            r#"{"image":1}"#,
        ])
        .output()
        .unwrap();
    assert_eq!(text_only.status.code(), Some(2));
    let err = String::from_utf8_lossy(&text_only.stderr);
    assert!(err.contains("no vision tower"), "{err}");
}
