//! `bench-alloc --runs/--warmup`, `--save-baseline`, `--baseline` and `--max-regression` on the
//! host device: statistics over real runs, an unchanged rerun that passes, a regression that
//! fails, and baselines that cannot be compared refused.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use serde_json::Value;

use crate::common::{self, expect_exit, gpumem, SAME_WORKLOAD};

fn bench(extra: &[&str]) -> std::process::Output {
    gpumem()
        .args(["--json", "bench-alloc"])
        .args(SAME_WORKLOAD)
        .args(extra)
        .output()
        .unwrap()
}

fn doc(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap()
}

fn save(dir: &Path, runs: &str) -> String {
    let path = dir.join("base.json").to_string_lossy().into_owned();
    let out = bench(&["--runs", runs, "--save-baseline", &path]);
    expect_exit(&out, 0);
    path
}

#[test]
fn runs_give_each_figure_its_statistics_and_gates_judge_the_median() {
    let out = bench(&["--runs", "3", "--warmup", "1", "--min-hit-rate", "0.9"]);
    expect_exit(&out, 0);
    let d = doc(&out);
    assert_eq!(d["runs"]["runs"], 3);
    assert_eq!(d["runs"]["warmup"], 1);
    let hit = &d["runs"]["metrics"]["hit-rate"];
    let samples: Vec<f64> = hit["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(samples.len(), 3);
    // The same operations on a fresh pool each time: the same hit rate each time.
    assert!(samples.iter().all(|&s| s == samples[0]), "{samples:?}");
    assert_eq!(hit["median"], hit["samples"][0]);
    assert_eq!(hit["stddev"], 0.0);
    let ops = &d["runs"]["metrics"]["ops-per-sec"];
    let (min, max, median) = (
        ops["min"].as_f64().unwrap(),
        ops["max"].as_f64().unwrap(),
        ops["median"].as_f64().unwrap(),
    );
    assert!(min > 0.0 && min <= median && median <= max, "{ops}");
    assert_eq!(d["gates"][0]["measured"], hit["median"]);
    // One run: no statistics section, as before.
    assert!(doc(&bench(&[]))["runs"].is_null());
}

#[test]
fn an_unchanged_rerun_passes_its_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let base = save(dir.path(), "3");
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&base).unwrap()).unwrap();
    assert_eq!(saved["kind"], "gpumem-bench-baseline");
    assert_eq!(saved["version"], 1);
    assert_eq!(saved["runs"], 3);
    assert_eq!(saved["replayed"]["workload"], "same-size");
    for _ in 0..3 {
        let out = bench(&[
            "--runs",
            "3",
            "--baseline",
            &base,
            "--max-regression",
            "hit-rate:1",
            "--max-regression",
            "peak-reserved:1",
            "--max-regression",
            "fragmentation:1",
        ]);
        expect_exit(&out, 0);
        let d = doc(&out);
        let rows = d["comparison"]["rows"].as_array().unwrap();
        for metric in ["hit-rate", "peak-reserved", "fragmentation"] {
            let row = rows.iter().find(|r| r["metric"] == metric).unwrap();
            assert_eq!(row["verdict"], "unchanged", "{row}");
            assert_eq!(row["change_pct"], 0.0, "{row}");
        }
    }
}

/// A baseline whose hit rate was 12 % higher than this build's: every figure of the metric
/// scaled, so its statistics still follow from its samples.
#[test]
fn a_regression_beyond_its_allowance_fails_and_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let base = save(dir.path(), "2");
    let old = common::scale_baseline_metric(Path::new(&base), "hit-rate", 1.12);
    let md = dir.path().join("summary.md");
    let xml = dir.path().join("junit.xml");
    let out = gpumem()
        .args(["bench-alloc"])
        .args(SAME_WORKLOAD)
        .args(["--runs", "2", "--baseline", &base])
        .args(["--max-regression", "hit-rate:10"])
        .arg("--export-markdown")
        .arg(&md)
        .arg("--export-junit")
        .arg(&xml)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let line = stderr.lines().last().unwrap();
    assert!(
        line.starts_with(
            "gpumem: error: regressed against the baseline: hit-rate -10.7% (allowed 10%"
        ),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("REGRESSED (> 10%)"), "{stdout}");
    assert!(stdout.contains(&format!("{:.4}", old * 1.12)), "{stdout}");
    let md = std::fs::read_to_string(md).unwrap();
    assert!(
        md.contains("| hit-rate |") && md.contains("**REGRESSED (> 10%)**"),
        "{md}"
    );
    let xml = std::fs::read_to_string(xml).unwrap();
    assert!(xml.contains("failures=\"1\""), "{xml}");
    assert!(
        xml.contains("name=\"hit-rate\"><failure message=\"hit-rate -10.7% against the baseline"),
        "{xml}"
    );
    // Within a wider allowance the same figures pass.
    let out = bench(&[
        "--runs",
        "2",
        "--baseline",
        &base,
        "--max-regression",
        "hit-rate:15",
    ]);
    expect_exit(&out, 0);
}

#[test]
fn baselines_that_do_not_compare_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let base = save(dir.path(), "1");
    // Another workload: a usage error naming both.
    let msg = common::one_line_error(
        gpumem().args(["bench-alloc"]).args(SAME_WORKLOAD).args([
            "--seed",
            "7",
            "--baseline",
            &base,
        ]),
        2,
    );
    assert!(
        msg.contains("--baseline: the baseline replayed same-size"),
        "{msg}"
    );
    // Not a baseline.
    let other = dir.path().join("other.json");
    std::fs::write(&other, br#"{"schema_version": 1, "pool": {}}"#).unwrap();
    let msg = common::one_line_error(
        gpumem()
            .args(["bench-alloc"])
            .args(SAME_WORKLOAD)
            .arg("--baseline")
            .arg(&other),
        1,
    );
    assert!(msg.contains("not a gpumem baseline of version 1"), "{msg}");
    // Read before the device is opened: a bad file on a machine without the GPU is still
    // named (exit 1), not reported as a lost device (exit 4).
    let msg = common::one_line_error(
        gpumem().args([
            "bench-alloc",
            "--device",
            "cuda:7",
            "--baseline",
            "/dev/zero",
        ]),
        1,
    );
    assert!(
        msg.contains("--baseline: /dev/zero: not a regular file"),
        "{msg}"
    );
    // A gate without a baseline, an unknown metric, and a save over the baseline read.
    common::one_line_error(
        gpumem()
            .args(["bench-alloc"])
            .args(SAME_WORKLOAD)
            .args(["--max-regression", "hit-rate:5"]),
        2,
    );
    let msg = common::one_line_error(
        gpumem().args(["bench-alloc"]).args(SAME_WORKLOAD).args([
            "--baseline",
            &base,
            "--max-regression",
            "speed:5",
        ]),
        2,
    );
    assert!(msg.contains("unknown metric 'speed'"), "{msg}");
    let msg = common::one_line_error(
        gpumem().args(["bench-alloc"]).args(SAME_WORKLOAD).args([
            "--baseline",
            &base,
            "--save-baseline",
            &base,
        ]),
        2,
    );
    assert!(msg.contains("would overwrite the input"), "{msg}");
    let msg = common::one_line_error(
        gpumem().args([
            "bench-alloc",
            "--device",
            "host:64MiB",
            "--workload",
            "transfer",
            "--runs",
            "3",
        ]),
        2,
    );
    assert!(msg.contains("fastest of 5 runs"), "{msg}");
}

/// Checks the text exposition format: each family's HELP and TYPE before its samples, every
/// sample `name{label="value",…} number`; returns the samples by name and labels.
fn parse_exposition(text: &str) -> Vec<(String, String, f64)> {
    let mut declared = Vec::new();
    let mut samples = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            declared.push(rest.split(' ').next().unwrap().to_string());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert_eq!(Some(&name.to_string()), declared.last(), "{line}");
            assert_eq!(kind, "gauge");
        } else {
            let (name, rest) = line.split_once('{').unwrap_or_else(|| panic!("{line}"));
            let (labels, value) = rest.rsplit_once("} ").unwrap_or_else(|| panic!("{line}"));
            assert!(declared.iter().any(|d| d == name), "undeclared: {line}");
            assert!(
                name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "{line}"
            );
            for pair in labels.split("\",") {
                let (k, v) = pair.split_once("=\"").unwrap_or_else(|| panic!("{line}"));
                assert!(
                    k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                    "{line}"
                );
                assert!(!v.trim_end_matches('"').contains('\n'), "{line}");
            }
            samples.push((name.into(), labels.into(), value.parse().unwrap()));
        }
    }
    samples
}

#[test]
fn bench_and_stress_export_prometheus_gauges() {
    let dir = tempfile::tempdir().unwrap();
    let base = save(dir.path(), "2");
    let prom = dir.path().join("bench.prom");
    let out = gpumem()
        .arg("bench-alloc")
        .args(SAME_WORKLOAD)
        .args([
            "--baseline",
            &base,
            "--min-hit-rate",
            "0.5",
            "--export-prometheus",
        ])
        .arg(&prom)
        .output()
        .unwrap();
    expect_exit(&out, 0);
    let samples = parse_exposition(&std::fs::read_to_string(&prom).unwrap());
    let get = |name: &str, label: &str| {
        samples
            .iter()
            .find(|(n, l, _)| n == name && l.contains(label))
            .map(|s| s.2)
    };
    assert_eq!(
        get("gpumem_bench_passed", "workload=\"same-size\""),
        Some(1.0)
    );
    assert_eq!(get("gpumem_bench_operations", ""), Some(600.0));
    assert_eq!(
        get("gpumem_bench_gate_passed", "gate=\"min-hit-rate\""),
        Some(1.0)
    );
    assert_eq!(
        get("gpumem_bench_baseline_change_ratio", "metric=\"hit-rate\""),
        Some(0.0)
    );
    assert!(get("gpumem_bench_operations_per_second", "path=\"raw\"").unwrap() > 0.0);

    let prom = dir.path().join("stress.prom");
    let out = gpumem()
        .args([
            "stress",
            "--device",
            "host:128MiB",
            "--phase",
            "churn",
            "--ops",
            "50",
        ])
        .args(["--max-size", "256KiB", "--export-prometheus"])
        .arg(&prom)
        .output()
        .unwrap();
    expect_exit(&out, 0);
    let samples = parse_exposition(&std::fs::read_to_string(&prom).unwrap());
    let churn = samples
        .iter()
        .find(|(n, l, _)| n == "gpumem_stress_phase_operations" && l.contains("phase=\"churn\""))
        .unwrap();
    assert!(churn.2 >= 50.0, "{churn:?}");
    assert!(samples
        .iter()
        .any(|(n, _, v)| n == "gpumem_stress_passed" && *v == 1.0));
}
