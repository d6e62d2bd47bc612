//! `bench-alloc --min-runs N --max-runs M`: runs until every `--max-regression` gate is decided,
//! stopping at M or as soon as the baseline's runs put the confidence out of reach. A fixed
//! workload's hit rate repeats exactly run after run, so a baseline of synthetic hit rates
//! fixes the moment each gate is decided: the tests count runs, never time them.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use serde_json::Value;

use crate::common::{self, gpumem, SAME_WORKLOAD};

fn bench(extra: &[&str]) -> std::process::Output {
    gpumem()
        .args(["--json", "bench-alloc"])
        .args(SAME_WORKLOAD)
        .args(extra)
        .output()
        .unwrap()
}

/// Asserts the exit status, showing stderr when it differs, and returns the JSON report.
fn expect(out: &std::process::Output, code: i32) -> Value {
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A baseline of `runs` measured runs in `dir`, its hit-rate samples set to `factors` × this
/// build's (with the statistics that follow) when given.
fn baseline(dir: &Path, runs: &str, factors: Option<&[f64]>) -> String {
    let path = dir.join("base.json");
    let out = bench(&["--runs", runs, "--save-baseline", &path.to_string_lossy()]);
    expect(&out, 0);
    if let Some(factors) = factors {
        common::set_baseline_samples(&path, "hit-rate", factors);
    }
    path.to_string_lossy().into_owned()
}

fn hit_rate_row(doc: &Value) -> &Value {
    doc["comparison"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == "hit-rate")
        .unwrap()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn an_unchanged_rerun_is_decided_at_the_minimum() {
    let dir = tempfile::tempdir().unwrap();
    let base = baseline(dir.path(), "5", None);
    let out = bench(&[
        "--baseline",
        &base,
        "--max-regression",
        "hit-rate:5",
        "--max-regression",
        "peak-reserved:5",
        "--min-runs",
        "3",
        "--max-runs",
        "8",
    ]);
    let doc = expect(&out, 0);
    let runs = &doc["runs"];
    assert_eq!(runs["runs"], 3);
    assert_eq!(runs["min_runs"], 3);
    assert_eq!(runs["max_runs"], 8);
    assert_eq!(runs["stopped"], "decided");
    assert!(runs.get("out_of_reach").is_none(), "{runs}");
    assert_eq!(
        runs["metrics"]["hit-rate"]["samples"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert_eq!(doc["comparison"]["baseline_runs"], 5);
    assert_eq!(hit_rate_row(&doc)["verdict"], "unchanged");
    assert_eq!(doc["passed"], true);
    // --max-runs alone starts from 3 runs.
    let doc = expect(
        &bench(&[
            "--baseline",
            &base,
            "--max-regression",
            "hit-rate:5",
            "--max-runs",
            "8",
        ]),
        0,
    );
    assert_eq!(
        (doc["runs"]["runs"].clone(), doc["runs"]["min_runs"].clone()),
        (3.into(), 3.into())
    );
}

/// The baseline's hit rates 1.0, 1.2, 1.3, 1.4 and 1.5 × this build's: the median 23 % down,
/// but one baseline run ties every new run, so the one-sided p-value of 4n worse pairs out of
/// 5n falls only slowly: 0.125 at 3 runs, 0.063 at 6, 0.047 at 8.
#[test]
fn a_range_runs_on_until_the_test_decides_or_the_maximum() {
    let dir = tempfile::tempdir().unwrap();
    let base = baseline(dir.path(), "5", Some(&[1.0, 1.2, 1.3, 1.4, 1.5]));
    let gate = ["--baseline", &base, "--max-regression", "hit-rate:10"];
    let out = bench(&[&gate[..], &["--min-runs", "3", "--max-runs", "10"]].concat());
    let doc = expect(&out, 1);
    assert_eq!(doc["runs"]["runs"], 8);
    assert_eq!(doc["runs"]["stopped"], "decided");
    let row = hit_rate_row(&doc);
    assert_eq!(row["verdict"], "regressed");
    assert!((row["p_value"].as_f64().unwrap() - 0.046_620_046_620_046_6).abs() < 1e-12);
    assert_eq!(
        stderr(&out),
        "gpumem: error: regressed against the baseline: hit-rate -23.1% (allowed 10%, p 0.047 at 95% confidence)\n"
    );

    // At most 6 runs: still undecided, exit 6, and every report says why it stopped.
    let xml = dir.path().join("junit.xml");
    let md = dir.path().join("summary.md");
    let out = gpumem()
        .arg("bench-alloc")
        .args(SAME_WORKLOAD)
        .args(gate)
        .args(["--min-runs", "3", "--max-runs", "6", "--export-junit"])
        .arg(&xml)
        .arg("--export-markdown")
        .arg(&md)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        "gpumem: error: undecided against the baseline: hit-rate -23.1% (allowed 10%, p 0.063, not significant at 95% confidence): still too few or too noisy runs after --max-runs 6; raise --max-runs, or record the baseline with more runs\n"
    );
    let why = "--min-runs 3, --max-runs 6: stopped at --max-runs with a gate undecided";
    // The text report wraps its long lines, the rest indented.
    let text = String::from_utf8_lossy(&out.stdout).replace("\n    ", " ");
    assert!(
        text.contains(&format!(
            "6 measured runs ({why}), the tables above from the last"
        )),
        "{text}"
    );
    let runs = format!("6 runs against the baseline's 5 ({why})");
    let xml = std::fs::read_to_string(&xml).unwrap();
    assert!(
        xml.contains("<error message=\"hit-rate -23.1% against the baseline: UNDECIDED")
            && xml.contains(&format!(
                "Mann-Whitney U, exact: p 0.063, worse by at most 38.5% at 95% confidence; {}\"/>",
                runs.replace('\'', "&apos;")
            )),
        "{xml}"
    );
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(md.contains(&format!("this run: {runs})")), "{md}");

    let doc = expect(
        &bench(&[&gate[..], &["--min-runs", "3", "--max-runs", "6"]].concat()),
        6,
    );
    assert_eq!(doc["runs"]["runs"], 6);
    assert_eq!(doc["runs"]["stopped"], "max-runs");
    assert_eq!(hit_rate_row(&doc)["verdict"], "undecided");
}

/// Two baseline runs against at most 8: the smallest p-value is 1/C(10, 2) = 1/45, above the
/// 0.01 that 99 % asks, so the command stops after its minimum and says that 13 runs (1/105)
/// could reach it.
#[test]
fn a_confidence_the_baseline_cannot_reach_stops_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let base = baseline(dir.path(), "2", Some(&[1.0, 1.5]));
    let gate = [
        "--baseline",
        &base,
        "--max-regression",
        "hit-rate:10",
        "--confidence",
        "0.99",
        "--min-runs",
        "3",
    ];
    let out = bench(&[&gate[..], &["--max-runs", "8"]].concat());
    let doc = expect(&out, 6);
    assert_eq!(doc["runs"]["runs"], 3);
    assert_eq!(doc["runs"]["stopped"], "unreachable");
    let reach = &doc["runs"]["out_of_reach"];
    assert_eq!(reach["metric"], "hit-rate");
    assert_eq!(reach["baseline_runs"], 2);
    assert_eq!(reach["smallest_p_value"].as_f64().unwrap(), 1.0 / 45.0);
    assert_eq!(reach["runs_needed"], 13);
    assert_eq!(
        stderr(&out),
        "gpumem: error: undecided against the baseline: hit-rate -20.0% (allowed 10%, p 0.60, not significant at 99% confidence): 99% confidence is out of reach of --max-runs 8: against the baseline's 2 runs of hit-rate, 8 runs give a p-value of at least 0.022; it takes --max-runs 13, or a baseline of more runs\n"
    );
    // With 13 allowed it is within reach: the runs go on (and the noise keeps it undecided).
    let doc = expect(&bench(&[&gate[..], &["--max-runs", "13"]].concat()), 6);
    assert_eq!(doc["runs"]["runs"], 13);
    assert_eq!(doc["runs"]["stopped"], "max-runs");
}

#[test]
fn a_range_is_a_usage_error_unless_ordered_and_gated() {
    let dir = tempfile::tempdir().unwrap();
    let base = baseline(dir.path(), "2", None);
    let gated = ["--baseline", &base, "--max-regression", "hit-rate:5"];
    let err = common::one_line_error(
        gpumem()
            .arg("bench-alloc")
            .args(SAME_WORKLOAD)
            .args(gated)
            .args(["--min-runs", "5", "--max-runs", "3"]),
        2,
    );
    assert_eq!(
        err,
        "gpumem: error: --min-runs 5 is more than --max-runs 3; give --min-runs at most --max-runs\n"
    );
    // Instead of --runs, never with it; --max-runs needs a gate to decide, --min-runs a maximum.
    for extra in [
        &["--runs", "5", "--max-runs", "8"][..],
        &["--min-runs", "3"][..],
        &["--max-runs", "0"][..],
    ] {
        let out = gpumem()
            .arg("bench-alloc")
            .args(SAME_WORKLOAD)
            .args(gated)
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {}", stderr(&out));
    }
    let out = gpumem()
        .arg("bench-alloc")
        .args(SAME_WORKLOAD)
        .args(["--baseline", &base, "--max-runs", "8"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--max-regression"),
        "{}",
        stderr(&out)
    );
}
