//! The `--max-regression` decision: the exact Mann–Whitney U distribution against published
//! tables and hand-worked cases, decisions on two saved baselines of synthetic runs (no timing
//! is measured or asserted), the exit code of an undecided gate on a real replay, and (ignored)
//! the decision table of the closing note.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;

use gpumem::exit::Exit;
use gpumem::output::runs::{ComparisonView, RunsView};
use gpumem::workload::baseline::{
    compare, Baseline, Confidence, Metric, RegressionGate, Replayed, Summary, Verdict,
};
use gpumem::workload::significance::{shift, u_counts, Method, UDistribution};
use serde_json::Value;

use crate::common::{self, gpumem};

#[test]
fn exact_u_distributions_match_the_tables() {
    // m = n = 3: the 20 orderings by U, worked by hand.
    assert_eq!(u_counts(3, 3), vec![1, 1, 2, 3, 3, 3, 3, 2, 1, 1]);
    let c = u_counts(5, 5);
    assert_eq!(&c[..8], &[1, 1, 2, 3, 5, 7, 9, 11]);
    assert_eq!(c.iter().sum::<u128>(), 252);
    assert_eq!(u_counts(3, 5).iter().sum::<u128>(), 56);
    assert_eq!(u_counts(3, 5), {
        let mut v = u_counts(5, 3);
        v.reverse();
        v
    });
    let d = UDistribution::new(3, 3);
    assert!(d.is_exact());
    assert_eq!(d.upper_tail(9), 1.0 / 20.0);
    assert_eq!(d.upper_tail(8), 2.0 / 20.0);
    assert_eq!(d.upper_tail(0), 1.0);
    assert_eq!(UDistribution::new(5, 5).upper_tail(25), 1.0 / 252.0);
    assert!((UDistribution::new(5, 5).cdf(4) - 12.0 / 252.0).abs() < 1e-15);
    // The one-sided critical values of the published tables (α = 0.05 and 0.025).
    for (m, n, alpha, critical) in [
        (3, 3, 0.05, Some(0)),
        (2, 2, 0.05, None),
        (4, 4, 0.05, Some(1)),
        (5, 5, 0.05, Some(4)),
        (5, 5, 0.025, Some(2)),
        (10, 10, 0.05, Some(27)),
        (10, 10, 0.025, Some(23)),
    ] {
        let level = Confidence::new(1.0 - alpha).unwrap();
        assert_eq!(
            UDistribution::new(m, n).critical(level.alpha()),
            critical,
            "{m}×{n} at {alpha}"
        );
    }
    // Past 100 runs in all, the normal approximation.
    assert!(!UDistribution::new(60, 60).is_exact());
    assert!((UDistribution::new(60, 60).cdf(1800) - 0.5).abs() < 0.01);
}

#[test]
fn p_values_and_bounds_worked_by_hand() {
    // A latency (lower is better) up from 10, 11, 12 to 13, 14, 15; in percent of 10 the nine
    // differences are 10, 20, 20, 30, 30, 30, 40, 40, 50.
    let s = shift(
        &[10.0, 11.0, 12.0],
        &[13.0, 14.0, 15.0],
        1.0,
        10.0,
        Confidence::DEFAULT,
    );
    assert_eq!(s.method, Method::MannWhitneyExact);
    assert_eq!((s.p_worse, s.p_better), (0.05, 1.0));
    // At 95 % the bound is the largest difference (P(U = 0) = 0.05); at 90 % the second.
    assert_eq!(s.worse_bound_pct, Some(50.0));
    let at_90 = shift(
        &[10.0, 11.0, 12.0],
        &[13.0, 14.0, 15.0],
        1.0,
        10.0,
        Confidence::new(0.9).unwrap(),
    );
    assert_eq!(at_90.worse_bound_pct, Some(40.0));
    // Ties count against significance: 12 against 12 is not worse.
    let tied = shift(
        &[10.0, 11.0, 12.0],
        &[12.0, 14.0, 15.0],
        1.0,
        10.0,
        Confidence::DEFAULT,
    );
    assert_eq!(tied.p_worse, 2.0 / 20.0);
    // Higher is better: the sign turns round.
    let ops = shift(
        &[13.0, 14.0, 15.0],
        &[10.0, 11.0, 12.0],
        -1.0,
        14.0,
        Confidence::DEFAULT,
    );
    assert_eq!(ops.p_worse, 0.05);
    // Two runs a side cannot bound anything at 95 %.
    assert_eq!(
        shift(&[1.0, 2.0], &[3.0, 4.0], 1.0, 1.0, Confidence::DEFAULT).worse_bound_pct,
        None
    );
    assert!(Confidence::new(1.0).is_err() && Confidence::new(0.4).is_err());
}

/// A baseline of ops-per-sec runs, written as the program writes one and read back.
fn saved(dir: &Path, name: &str, ops_per_sec: &[f64]) -> Baseline {
    let metrics = BTreeMap::from([(Metric::OpsPerSec, Summary::of(ops_per_sec).unwrap())]);
    let baseline = Baseline::new(
        "host:0 (host)".into(),
        Replayed {
            workload: "random".into(),
            ops: 2000,
            seed: Some(42),
            preset: "arena".into(),
            max_live_bytes: Some(1 << 30),
            fingerprint: "0123456789abcdef".into(),
        },
        metrics,
    );
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec_pretty(&baseline).unwrap()).unwrap();
    Baseline::from_json(&std::fs::read(&path).unwrap()).unwrap()
}

/// How `new` fares against `old` under `ops-per-sec:10`: the verdict and the exit status.
fn decide(old: &Baseline, new: &Baseline) -> (Verdict, u8) {
    let gates: [RegressionGate; 1] = ["ops-per-sec:10".parse().unwrap()];
    let runs = RunsView {
        warmup: 0,
        runs: new.runs,
        metrics: new.metrics.clone(),
        adaptive: None,
    };
    let view = ComparisonView::new(None, old, &old.device, &runs, (&gates, Confidence::DEFAULT));
    let exit = view.failure().map_or(Exit::Success, |(exit, _)| exit);
    (view.rows[0].verdict, exit.code())
}

#[test]
fn two_saved_baselines_decide_by_their_runs() {
    let dir = tempfile::tempdir().unwrap();
    // Five runs of about 1.2 M ops/s with ±2 % noise.
    let main = saved(
        dir.path(),
        "main.json",
        &[1.200e6, 1.224e6, 1.183e6, 1.210e6, 1.191e6],
    );
    let unchanged = saved(
        dir.path(),
        "same.json",
        &[1.195e6, 1.218e6, 1.207e6, 1.179e6, 1.226e6],
    );
    assert_eq!(decide(&main, &unchanged), (Verdict::Unchanged, 0));
    // 20 % slower, the same noise: every run below every baseline run, p = 1/252.
    let slower: Vec<f64> = [1.200e6, 1.224e6, 1.183e6, 1.210e6, 1.191e6]
        .iter()
        .map(|v| v * 0.8)
        .collect();
    let slower = saved(dir.path(), "slower.json", &slower);
    assert_eq!(decide(&main, &slower), (Verdict::Regressed, 1));
    let rows = compare(&main.metrics, &slower.metrics, &[], Confidence::DEFAULT);
    assert_eq!(rows[0].p_value, 1.0 / 252.0);
    assert!((rows[0].change_pct + 20.0).abs() < 1e-9);
    // Its median 20 % down too, but runs from 0.6 M to 1.4 M: overlapping, undecided, exit 6.
    let noisy = saved(
        dir.path(),
        "noisy.json",
        &[0.62e6, 1.38e6, 0.96e6, 0.71e6, 1.25e6],
    );
    assert_eq!(decide(&main, &noisy), (Verdict::Undecided, 6));
    // And three runs cannot be undecided when the median moved less than the allowance.
    let three = saved(dir.path(), "three.json", &[1.19e6, 1.21e6, 1.18e6]);
    assert_eq!(decide(&main, &three).1, 0);
}

/// Sets `metric`'s samples in a saved baseline to `factors` × this build's value, with the
/// statistics that follow from them.
/// A real replay's hit rate repeats exactly, so a baseline of synthetic hit rates drives the
/// decision without a timing in sight.
#[test]
fn an_undecided_gate_exits_6_and_says_so_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.json");
    let args = [&common::SAME_WORKLOAD[..], &["--runs", "3"]].concat();
    let out = gpumem()
        .args(["bench-alloc"])
        .args(&args)
        .arg("--save-baseline")
        .arg(&base)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    // The baseline's median 25 % higher, its runs spread over this run's value.
    common::set_baseline_samples(&base, "hit-rate", &[1.0, 1.25, 1.5]);
    let xml = dir.path().join("junit.xml");
    let gate = ["--max-regression", "hit-rate:10"];
    let out = gpumem()
        .args(["bench-alloc"])
        .args(&args)
        .arg("--baseline")
        .arg(&base)
        .args(gate)
        .arg("--export-junit")
        .arg(&xml)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{stderr}");
    assert!(
        stderr.contains("gpumem: error: undecided against the baseline: hit-rate -20.0% (allowed 10%, p 0.35, not significant at 95% confidence)"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("UNDECIDED") && stdout.contains("Mann-Whitney"),
        "{stdout}"
    );
    let xml = std::fs::read_to_string(&xml).unwrap();
    assert!(xml.contains("failures=\"0\" errors=\"1\""), "{xml}");
    assert!(
        xml.contains("<error message=\"hit-rate -20.0% against the baseline: UNDECIDED")
            && xml.contains(
                "Mann-Whitney U, exact: p 0.35, worse by at most 40.0% at 95% confidence"
            ),
        "{xml}"
    );
    // The JSON names the test, the p-value and the verdict.
    let out = gpumem()
        .args(["--json", "bench-alloc"])
        .args(&args)
        .arg("--baseline")
        .arg(&base)
        .args(gate)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = &doc["comparison"];
    assert_eq!(c["confidence"], 0.95);
    let row = c["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == "hit-rate")
        .unwrap();
    assert_eq!(row["test"], "mann-whitney-exact");
    assert_eq!(row["p_value"], 0.35);
    assert_eq!(row["verdict"], "undecided");
    assert_eq!(doc["passed"], false);
    // A lower confidence decides it: at 0.6, p 0.35 is significant.
    let out = gpumem()
        .args(["bench-alloc"])
        .args(&args)
        .arg("--baseline")
        .arg(&base)
        .args(gate)
        .args(["--confidence", "0.6"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    // A level outside 0.5–0.9999 is a usage error.
    let out = gpumem()
        .args(["bench-alloc"])
        .args(args)
        .arg("--baseline")
        .arg(&base)
        .args(["--confidence", "95"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("--confidence 95: give a level from 0.5 to 0.9999"));
}

/// A seeded generator (splitmix64) and normal deviates by Box–Muller: the table is the same on
/// every machine.
struct Noise(u64);

impl Noise {
    fn uniform(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        ((z >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }

    /// `n` runs of ops/s around `level`, each × e^(σ·z): lognormal noise of about σ.
    fn runs(&mut self, n: usize, level: f64, sigma: f64) -> Vec<f64> {
        (0..n)
            .map(|_| level * (sigma * self.normal()).exp())
            .collect()
    }
}

/// The closing note's table: how often `ops-per-sec:10` passes, fails and is undecided on
/// synthetic runs (`cargo test --test it decision_table -- --ignored --nocapture`).
#[test]
#[ignore = "prints the decision table of the closing note"]
fn decision_table() {
    let gates: [RegressionGate; 1] = ["ops-per-sec:10".parse().unwrap()];
    let trials = 2000;
    for sigma in [0.03, 0.10] {
        println!(
            "\nnoise σ = {:.0}% a run; {trials} trials a cell; pass / regressed / undecided",
            sigma * 100.0
        );
        println!("| runs each | unchanged | 10% slower | 20% slower |");
        println!("| --- | --- | --- | --- |");
        for n in [3, 5, 10] {
            let mut row = format!("| {n} |");
            for slowdown in [0.0, 0.10, 0.20] {
                let mut noise = Noise(42 + n as u64);
                let mut tally = [0usize; 3];
                for _ in 0..trials {
                    let old = BTreeMap::from([(
                        Metric::OpsPerSec,
                        Summary::of(&noise.runs(n, 1e6, sigma)).unwrap(),
                    )]);
                    let new = BTreeMap::from([(
                        Metric::OpsPerSec,
                        Summary::of(&noise.runs(n, 1e6 * (1.0 - slowdown), sigma)).unwrap(),
                    )]);
                    let v = compare(&old, &new, &gates, Confidence::DEFAULT)[0].verdict;
                    tally[match v {
                        Verdict::Regressed => 1,
                        Verdict::Undecided => 2,
                        _ => 0,
                    }] += 1;
                }
                let pct = |k: usize| 100.0 * tally[k] as f64 / trials as f64;
                row.push_str(&format!(" {:.0} / {:.0} / {:.0} |", pct(0), pct(1), pct(2)));
            }
            println!("{row}");
        }
    }
}
