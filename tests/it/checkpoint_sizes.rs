//! Published checkpoints' sizes at their own dtype against gpumem's weights for the same model
//! (tests/fixtures/checkpoint-sizes.json, each row with its source). `--nocapture` prints the
//! table.

use crate::common::{self, fixture, gpumem};
use serde_json::Value;

/// The checkpoint's own parameter count from `estimate --json`: the language model's with the
/// towers' and those it stores unloaded (MTP layers, Gemma 4's KV-sharing projections).
fn checkpoint_parameters(v: &Value) -> u64 {
    let m = &v["model"];
    let part = |key: &str| m[key].as_u64().unwrap_or(0);
    part("parameters") + part("tower_parameters") + part("unloaded_parameters")
}

/// gpumem's figure for a row: the catalog model's weights or the checkpoint's parameters, or,
/// for a row with a published `config`, vLLM's weights term (which counts the vision tower,
/// and the MTP layer where the row serves it).
fn gpumem_figure(row: &Value) -> u64 {
    let model = row["model"].as_str().expect("a model");
    // A multimodal config whose towers no engine plan here loads: the checkpoint's own count.
    if let (Some(config), Some(bytes)) =
        (row["config"].as_str(), row["bytes_per_parameter"].as_u64())
    {
        let v: Value =
            common::json_ok(gpumem().args(["--json", "estimate", "--config", &fixture(config)]));
        return checkpoint_parameters(&v) * bytes;
    }
    // A config's own parameters or weights (the catalog has no row for it).
    if let Some(config) = row["config"].as_str() {
        let flag = |key: &str| row[key].as_bool() == Some(true);
        if flag("parameters_of_config") || flag("weights_of_config") {
            let v: Value = common::json_ok(gpumem().args([
                "--json",
                "estimate",
                "--config",
                &fixture(config),
            ]));
            if flag("parameters_of_config") {
                return checkpoint_parameters(&v);
            }
            return v["weights_bytes"].as_u64().expect("a figure");
        }
    }
    if let Some(config) = row["config"].as_str() {
        let config = fixture(config);
        // With its MTP layer loaded (speculative decoding), vLLM's weights are the whole
        // checkpoint's: the draft joins the weights term.
        if let Some(spec) = row["speculative_config"].as_str() {
            let v: Value = common::json_ok(gpumem().args([
                "--json",
                "select",
                "--config",
                &config,
                "--engine",
                "vllm",
                "--device",
                "sim:h100",
                "--speculative-config",
                spec,
            ]));
            let terms = v["plan"]["engine"]["terms"]
                .as_array()
                .expect("vLLM's terms");
            let weights = terms.iter().find(|t| t["term"] == "weights");
            return weights
                .and_then(|t| t["bytes"].as_u64())
                .expect("a weights term");
        }
        let v: Value = common::json_ok(gpumem().args([
            "--json", "estimate", "--config", &config, "--engine", "vllm", "--device", "sim:h100",
        ]));
        let terms = v["account"]["terms"].as_array().expect("vLLM's terms");
        let weights = terms.iter().find(|t| t["term"] == "weights");
        return weights
            .and_then(|t| t["bytes"].as_u64())
            .expect("a weights term");
    }
    let v: Value = common::json_ok(gpumem().args(["--json", "estimate", "--model", model]));
    match row["unit"].as_str() {
        Some("parameters") => checkpoint_parameters(&v),
        _ => v["weights_bytes"]
            .as_u64()
            .unwrap_or_else(|| panic!("{model}: no figure")),
    }
}

/// The multi-token-prediction layers the checkpoints store, in `unloaded_parameters` beside the
/// language model's `parameters`, as their published headers count them: GLM-5.2's layer 78
/// (791 tensors, 19,905,841,664 bf16/f32 payload bytes: 9,952,920,576 parameters; code-search
/// index file ids 59146870751, 59646803085) and GLM-5.1's (the same shape; its header's
/// 753,864,139,008 in all, file id 62604838642); DeepSeek-V3's and V3.2's layer 61, with its
/// own embedding and head (V3.2's with its own indexer).
#[test]
fn mtp_layers_are_counted_apart_exactly() {
    let estimate = |args: &[&str]| -> Value {
        let mut all = vec!["--json", "estimate"];
        all.extend_from_slice(args);
        common::json_ok(gpumem().args(all))
    };
    let glm52 = fixture("glm5-configs/glm-5.2.json");
    for (args, parameters, mtp) in [
        (
            vec!["--config", glm52.as_str()],
            743_377_019_904u64,
            9_952_920_576u64,
        ),
        (vec!["--model", "glm-5"], 743_911_218_432, 9_952_920_576),
        (
            vec!["--model", "deepseek-v3"],
            671_026_419_200,
            13_463_426_304,
        ),
        (
            vec!["--model", "deepseek-v3.2"],
            671_877_944_064,
            13_477_385_728,
        ),
    ] {
        let v = estimate(&args);
        assert_eq!(v["model"]["parameters"], parameters, "{args:?}");
        assert_eq!(v["model"]["unloaded_parameters"], mtp, "{args:?}");
    }
    // Kimi-K2's config stores none.
    let v = estimate(&["--model", "kimi-k2"]);
    assert!(v["model"].get("unloaded_parameters").is_none());
}

#[test]
fn published_checkpoints_within_half_a_percent() {
    let text = std::fs::read_to_string(fixture("checkpoint-sizes.json")).unwrap();
    let rows: Value = serde_json::from_str(&text).unwrap();
    let mut failures = Vec::new();
    println!(
        "{:<18} {:<11} {:>18} {:>18} {:>7} check",
        "model", "unit", "published", "gpumem", "ratio"
    );
    for row in rows["rows"].as_array().unwrap() {
        let model = row["model"].as_str().unwrap();
        let unit = row["unit"].as_str().unwrap();
        let published = row["published"].as_u64().unwrap();
        let ours = gpumem_figure(row);
        #[allow(clippy::cast_precision_loss)]
        let ratio = ours as f64 / published as f64;
        let check = row["check"].as_str().unwrap();
        println!("{model:<18} {unit:<11} {published:>18} {ours:>18} {ratio:>7.4} {check}");
        // A figure printed rounded holds every value within half its last unit: each of
        // those must be met.
        let half = row["rounded_to"].as_u64().unwrap_or(0) / 2;
        #[allow(clippy::cast_precision_loss)]
        let ends = [
            ours as f64 / (published - half) as f64,
            ours as f64 / (published + half) as f64,
        ];
        let ok = match check {
            "within" => ends.iter().all(|r| (0.995..=1.005).contains(r)),
            // The published figure holds parts gpumem leaves out by design.
            "under" => ratio < 1.0,
            other => panic!("{model}: unknown check {other}"),
        };
        if !ok {
            failures.push(format!("{model}: {ratio:.4} ({check})"));
        }
    }
    assert!(failures.is_empty(), "{failures:?}");
}
