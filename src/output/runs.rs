//! `bench-alloc --runs N`: each figure's statistics over the runs, and the comparison with a
//! saved `--baseline`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use super::{new_table, ns, per_sec, Style};
use crate::units::format_bytes;
use crate::workload::baseline::{
    compare, Baseline, Comparison, Metric, RegressionGate, Summary, Verdict,
};
use crate::workload::gates::Measured;

/// Each figure over the measured runs.
#[derive(Debug, Clone, Serialize)]
pub struct RunsView {
    /// Warm-up runs, not counted.
    pub warmup: u32,
    /// Measured runs.
    pub runs: usize,
    /// Each metric's samples and statistics, by name.
    pub metrics: BTreeMap<Metric, Summary>,
}

/// One run's report, as the statistics over runs read it.
pub trait MetricSource {
    /// A metric's value in this run (`None`: not measured, e.g. speedup with `--no-raw`).
    fn metric(&self, metric: Metric) -> Option<f64>;
}

/// A metric's value as the reports print it.
#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "bytes and nanoseconds are whole; a float cast saturates"
)]
pub fn metric_text(metric: Metric, v: f64) -> String {
    match metric {
        Metric::OpsPerSec => per_sec(v),
        Metric::Speedup => format!("{v:.2}×"),
        Metric::HitRate | Metric::Fragmentation => format!("{v:.4}"),
        Metric::PeakReserved => format_bytes(v.round() as u64),
        Metric::AllocP50Ns | Metric::AllocP99Ns | Metric::FreeP99Ns => ns(v.round() as u64),
    }
}

impl RunsView {
    /// The statistics of `per_run` (one report a measured run).
    pub fn of<R: MetricSource>(warmup: u32, per_run: &[R]) -> RunsView {
        let metrics = Metric::ALL
            .into_iter()
            .filter_map(|m| {
                let samples: Option<Vec<f64>> = per_run.iter().map(|r| r.metric(m)).collect();
                Some((m, Summary::of(&samples?)?))
            })
            .collect();
        RunsView {
            warmup,
            runs: per_run.len(),
            metrics,
        }
    }

    /// The medians, as the absolute gates judge them.
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a median of whole nanoseconds; a float cast saturates"
    )]
    pub fn medians(&self) -> Measured {
        let median = |m| self.metrics.get(&m).map_or(0.0, |s: &Summary| s.median);
        Measured {
            hit_rate: median(Metric::HitRate),
            fragmentation_peak: median(Metric::Fragmentation),
            speedup: median(Metric::Speedup),
            alloc_p99_ns: median(Metric::AllocP99Ns).round() as u64,
        }
    }

    /// Metric, median, mean ± σ, min … max.
    pub fn table(&self, style: &Style) -> comfy_table::Table {
        let mut t = new_table(style, &["metric", "median", "mean ± σ", "min … max"]);
        for (&m, s) in &self.metrics {
            t.add_row(vec![
                m.name().to_string(),
                metric_text(m, s.median),
                format!("{} ± {:.1}%", metric_text(m, s.mean), s.spread_pct()),
                format!("{} … {}", metric_text(m, s.min), metric_text(m, s.max)),
            ]);
        }
        t
    }
}

/// This run against a saved baseline.
#[derive(Debug, Clone, Serialize)]
pub struct ComparisonView {
    /// The baseline file.
    pub baseline: String,
    /// The device the baseline ran on.
    pub baseline_device: String,
    /// The gpumem version that saved it.
    pub baseline_gpumem: String,
    /// Its measured runs.
    pub baseline_runs: usize,
    /// The device this run is on, as the baseline names its own.
    pub device: String,
    /// Whether the baseline ran on another device than this run (`--allow-other-device`).
    pub other_device: bool,
    /// Every metric both have, in report order.
    pub rows: Vec<Comparison>,
    /// `--max-regression` metrics this run measured no value of: gates not answered, so the
    /// run fails.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unanswered: Vec<Metric>,
}

impl ComparisonView {
    /// Compares `runs` on `device` with `baseline` (read from `path`) under `gates`.
    pub fn new(
        path: Option<&Path>,
        baseline: &Baseline,
        device: &str,
        runs: &RunsView,
        gates: &[RegressionGate],
    ) -> Self {
        let rows = compare(&baseline.metrics, &runs.metrics, gates);
        let mut unanswered: Vec<Metric> = gates
            .iter()
            .map(|g| g.metric)
            .filter(|m| !rows.iter().any(|r| r.metric == *m))
            .collect();
        unanswered.sort();
        unanswered.dedup();
        ComparisonView {
            baseline: path.map(|p| p.display().to_string()).unwrap_or_default(),
            baseline_device: baseline.device.clone(),
            baseline_gpumem: baseline.gpumem.clone(),
            baseline_runs: baseline.runs,
            device: device.to_string(),
            other_device: baseline.device != device,
            rows,
            unanswered,
        }
    }

    /// The label of a comparison across devices, or `None` on the same device.
    pub fn other_device_note(&self) -> Option<String> {
        self.other_device.then(|| {
            format!(
                "comparing different devices: the baseline ran on {}, this run on {} (--allow-other-device)",
                self.baseline_device, self.device
            )
        })
    }

    /// The regressions that fail the run, as one line.
    pub fn failure(&self) -> Option<String> {
        let failed: Vec<String> = self
            .rows
            .iter()
            .filter(|r| r.verdict == Verdict::Regressed)
            .map(|r| {
                format!(
                    "{} {} (allowed {}%, noise {:.1}%)",
                    r.metric,
                    change_text(r.change_pct),
                    r.max_regression_pct.unwrap_or(0.0),
                    r.noise_pct
                )
            })
            .collect();
        if !failed.is_empty() {
            return Some(format!(
                "regressed against the baseline: {}",
                failed.join("; ")
            ));
        }
        (!self.unanswered.is_empty()).then(|| {
            let names: Vec<&str> = self.unanswered.iter().map(|m| m.name()).collect();
            format!(
                "--max-regression {}: this run measured no value to compare",
                names.join(", ")
            )
        })
    }

    /// Metric, old, new, change and verdict, with the baseline named above.
    pub fn render(&self, style: &Style) -> String {
        let mut text = String::new();
        let _ = writeln!(
            text,
            "against {} ({} runs on {}, gpumem {}):",
            self.baseline, self.baseline_runs, self.baseline_device, self.baseline_gpumem
        );
        if let Some(note) = self.other_device_note() {
            let _ = writeln!(text, "note: {note}");
        }
        let mut t = new_table(
            style,
            &["metric", "baseline", "this run", "change", "verdict"],
        );
        for r in &self.rows {
            let ok = r.verdict != Verdict::Regressed;
            t.add_row(vec![
                r.metric.name().to_string(),
                metric_text(r.metric, r.old),
                metric_text(r.metric, r.new),
                change_text(r.change_pct),
                style.paint(&verdict_text(r), ok),
            ]);
        }
        let _ = writeln!(text, "{t}");
        text
    }
}

/// A signed percentage, "+12.3%".
pub fn change_text(pct: f64) -> String {
    if pct.is_infinite() {
        "new".into()
    } else {
        format!("{pct:+.1}%")
    }
}

/// The verdict in words, with the allowance where one was set.
pub fn verdict_text(r: &Comparison) -> String {
    match (r.verdict, r.max_regression_pct) {
        (Verdict::Regressed, Some(max)) => format!("REGRESSED (> {max}%)"),
        (Verdict::WithinNoise, _) => format!("within noise (±{:.1}%)", r.noise_pct),
        (Verdict::Improved, _) => "better".into(),
        (Verdict::Worse, Some(max)) => format!("worse, ok (≤ {max}%)"),
        (Verdict::Worse, None) => "worse".into(),
        (_, Some(max)) => format!("ok (≤ {max}%)"),
        _ if r.change_pct.abs() < 0.05 => "same".into(),
        _ => "within noise".into(),
    }
}
