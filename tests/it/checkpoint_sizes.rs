//! Published checkpoints' sizes at their own dtype against gpumem's weights for the same model
//! (tests/fixtures/checkpoint-sizes.json, each row with its source). `--nocapture` prints the
//! table.

use crate::common::{self, fixture, gpumem};
use serde_json::Value;

fn gpumem_figure(model: &str, unit: &str) -> u64 {
    let v: Value = common::json_ok(gpumem().args(["--json", "estimate", "--model", model]));
    let field = match unit {
        "parameters" => &v["model"]["parameters"],
        _ => &v["weights_bytes"],
    };
    field
        .as_u64()
        .unwrap_or_else(|| panic!("{model}: no {unit}"))
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
        let ours = gpumem_figure(model, unit);
        #[allow(clippy::cast_precision_loss)]
        let ratio = ours as f64 / published as f64;
        let check = row["check"].as_str().unwrap();
        println!("{model:<18} {unit:<11} {published:>18} {ours:>18} {ratio:>7.4} {check}");
        let ok = match check {
            "within" => (0.995..=1.005).contains(&ratio),
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
