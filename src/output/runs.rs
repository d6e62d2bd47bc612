//! `bench-alloc --runs N`: each figure's statistics over the runs, and the comparison with a
//! saved `--baseline`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use super::{new_table, ns, per_sec, Style};
use crate::exit::Exit;
use crate::units::format_bytes;
use crate::workload::baseline::{
    compare, Baseline, Comparison, Confidence, Method, Metric, RegressionGate, Summary, Verdict,
};
use crate::workload::gates::Measured;
use crate::workload::stopping::{OutOfReach, RunRange, Stop};

/// Each figure over the measured runs.
#[derive(Debug, Clone, Serialize)]
pub struct RunsView {
    /// Warm-up runs, not counted.
    pub warmup: u32,
    /// Measured runs.
    pub runs: usize,
    /// Each metric's samples and statistics, by name.
    pub metrics: BTreeMap<Metric, Summary>,
    /// With `--min-runs`/`--max-runs`: the range and why the runs stopped (beside the other
    /// fields in JSON).
    #[serde(flatten)]
    pub adaptive: Option<AdaptiveView>,
}

/// `--min-runs N --max-runs M`: the range asked and why the runs stopped where they did.
#[derive(Debug, Clone, Serialize)]
pub struct AdaptiveView {
    /// The range.
    #[serde(flatten)]
    pub range: RunRange,
    /// `decided`, `max-runs`, `unreachable` or `interrupted`.
    pub stopped: &'static str,
    /// With `unreachable`: the gate whose baseline runs put the confidence out of reach.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub out_of_reach: Option<OutOfReach>,
    /// Why, as the library decided it.
    #[serde(skip)]
    pub stop: Stop,
}

impl AdaptiveView {
    /// The view of `range` stopped by `stop`.
    pub fn new(range: RunRange, stop: Stop) -> AdaptiveView {
        AdaptiveView {
            range,
            stopped: stop.name(),
            out_of_reach: match stop {
                Stop::Unreachable(o) => Some(o),
                _ => None,
            },
            stop,
        }
    }

    /// The range and why the runs stopped, e.g. "--min-runs 3, --max-runs 8: stopped once every
    /// gate was decided".
    pub fn summary(&self) -> String {
        let why = match self.stop {
            Stop::Decided => "stopped once every gate was decided".to_string(),
            Stop::MaxRuns => "stopped at --max-runs with a gate undecided".to_string(),
            Stop::Unreachable(o) => format!(
                "stopped: the confidence asked is out of reach against the baseline's {} runs of {}",
                o.baseline_runs, o.metric
            ),
            Stop::Interrupted => "interrupted".to_string(),
        };
        format!(
            "--min-runs {}, --max-runs {}: {why}",
            self.range.min, self.range.max
        )
    }
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
            adaptive: None,
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
            peak_reserved: median(Metric::PeakReserved).round() as u64,
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
    /// The other trace the baseline replayed, when it is not this run's: compared on memory
    /// metrics only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub other_trace: Option<String>,
    /// `--confidence`: the level each row's test decides at.
    pub confidence: Confidence,
    /// Every metric both have, in report order.
    pub rows: Vec<Comparison>,
    /// `--max-regression` metrics this run measured no value of: gates not answered, so the
    /// run fails.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unanswered: Vec<Metric>,
}

impl ComparisonView {
    /// Compares `runs` on `device` with `baseline` (read from `path`) under `gates`, deciding
    /// at `confidence`.
    pub fn new(
        path: Option<&Path>,
        baseline: &Baseline,
        device: &str,
        runs: &RunsView,
        (gates, confidence): (&[RegressionGate], Confidence),
    ) -> Self {
        let rows = compare(&baseline.metrics, &runs.metrics, gates, confidence);
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
            other_trace: None,
            confidence,
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

    /// The label of a comparison with another trace of the job, or `None`.
    pub fn other_trace_note(&self) -> Option<String> {
        self.other_trace
            .as_ref()
            .map(|t| format!("another trace: the baseline replayed {t}; memory metrics only"))
    }

    /// Why the comparison fails the run, as one line with its exit: regressions and gates
    /// this run could not answer exit 1; gates the runs could not decide exit
    /// [`Exit::Undecided`].
    pub fn failure(&self) -> Option<(Exit, String)> {
        self.failure_after(None)
    }

    /// [`Self::failure`] after `--min-runs`/`--max-runs` (`adaptive`): an undecided gate then
    /// says why the runs stopped, and how many runs could reach the confidence when the
    /// baseline's runs put it out of reach.
    pub fn failure_after(&self, adaptive: Option<&AdaptiveView>) -> Option<(Exit, String)> {
        let level = percent(self.confidence.level());
        let gated = |verdict: Verdict| -> Vec<String> {
            self.rows
                .iter()
                .filter(|r| r.verdict == verdict)
                .map(|r| {
                    format!(
                        "{} {} (allowed {}%, p {}{} at {level} confidence)",
                        r.metric,
                        change_text(r.change_pct),
                        r.max_regression_pct.unwrap_or(0.0),
                        p_text(r.p_value),
                        if verdict == Verdict::Undecided {
                            ", not significant"
                        } else {
                            ""
                        }
                    )
                })
                .collect()
        };
        let failed = gated(Verdict::Regressed);
        if !failed.is_empty() {
            return Some((
                Exit::Failure,
                format!("regressed against the baseline: {}", failed.join("; ")),
            ));
        }
        if !self.unanswered.is_empty() {
            let names: Vec<&str> = self.unanswered.iter().map(|m| m.name()).collect();
            return Some((
                Exit::Failure,
                format!(
                    "--max-regression {}: this run measured no value to compare",
                    names.join(", ")
                ),
            ));
        }
        let undecided = gated(Verdict::Undecided);
        (!undecided.is_empty()).then(|| {
            (
                Exit::Undecided,
                format!(
                    "undecided against the baseline: {}: {}",
                    undecided.join("; "),
                    undecided_remedy(adaptive, &level)
                ),
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
        for note in [self.other_device_note(), self.other_trace_note()]
            .into_iter()
            .flatten()
        {
            let _ = writeln!(text, "note: {note}");
        }
        let mut t = new_table(
            style,
            &["metric", "baseline", "this run", "change", "p", "verdict"],
        );
        for r in &self.rows {
            let ok = !matches!(r.verdict, Verdict::Regressed | Verdict::Undecided);
            t.add_row(vec![
                r.metric.name().to_string(),
                metric_text(r.metric, r.old),
                metric_text(r.metric, r.new),
                change_text(r.change_pct),
                row_p_text(r),
                style.paint(&verdict_text(r), ok),
            ]);
        }
        let _ = writeln!(text, "{t}");
        let _ = writeln!(
            text,
            "one-sided Mann-Whitney U test of the runs at {} confidence; p: the chance of a change at least this bad if nothing changed",
            percent(self.confidence.level())
        );
        text
    }
}

/// What an undecided gate needs, by why the runs stopped.
fn undecided_remedy(adaptive: Option<&AdaptiveView>, level: &str) -> String {
    let fixed =
        "too few or too noisy runs to tell a regression from chance; rerun both with more --runs";
    let Some(a) = adaptive else {
        return fixed.into();
    };
    let max = a.range.max;
    match a.stop {
        Stop::Unreachable(o) => format!(
            "{level} confidence is out of reach of --max-runs {max}: against the baseline's {} runs of {}, {max} runs give a p-value of at least {}; {}",
            o.baseline_runs,
            o.metric,
            p_text(o.smallest_p_value),
            o.runs_needed.map_or_else(
                || "no number of runs can, so record the baseline with more runs".to_string(),
                |n| format!("it takes --max-runs {n}, or a baseline of more runs")
            )
        ),
        Stop::MaxRuns => format!(
            "still too few or too noisy runs after --max-runs {max}; raise --max-runs, or record the baseline with more runs"
        ),
        // Stopped early by a signal (or decided): the runs made were too few.
        Stop::Interrupted | Stop::Decided => fixed.into(),
    }
}

/// How many runs this run made against the baseline's, e.g. "7 runs against the baseline's 5
/// (--min-runs 3, --max-runs 8: stopped once every gate was decided)".
pub fn runs_against(runs: usize, baseline_runs: usize, adaptive: Option<&AdaptiveView>) -> String {
    let adaptive = adaptive.map(|a| format!(" ({})", a.summary()));
    format!(
        "{runs} run{} against the baseline's {baseline_runs}{}",
        if runs == 1 { "" } else { "s" },
        adaptive.unwrap_or_default()
    )
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
        (Verdict::Undecided, Some(max)) => format!("UNDECIDED (> {max}%)"),
        (Verdict::Improved, _) => "better".into(),
        (Verdict::Worse, Some(max)) => format!("worse, ok (≤ {max}%)"),
        (Verdict::Worse, None) => "worse".into(),
        (_, Some(max)) => format!("ok (≤ {max}%)"),
        _ if r.change_pct.abs() < 0.05 => "same".into(),
        _ => "not significant".into(),
    }
}

/// A p-value to two significant figures, "0.0079", "< 0.0001" below that.
pub fn p_text(p: f64) -> String {
    if p < 1e-4 {
        "< 0.0001".into()
    } else if p >= 0.1 {
        format!("{p:.2}")
    } else {
        format!("{p:.1e}")
            .parse::<f64>()
            .map_or_else(|_| format!("{p}"), |v| format!("{v}"))
    }
}

/// A row's p-value, or "-" when every run of each side gave the same value (the difference is
/// exact; no test is made).
pub fn row_p_text(r: &Comparison) -> String {
    if r.test == Method::Constant {
        "-".into()
    } else {
        p_text(r.p_value)
    }
}

/// A level as a percentage: 0.95 → "95%", 0.999 → "99.9%".
pub fn percent(level: f64) -> String {
    let text = format!("{:.2}", 100.0 * level);
    format!("{}%", text.trim_end_matches('0').trim_end_matches('.'))
}

/// The test behind a row and what it showed, for the exports: the method, the p-value, and
/// the confidence bound of the worsening.
pub fn evidence_text(r: &Comparison, confidence: Confidence) -> String {
    if r.test == Method::Constant {
        return "every run the same on each side: the change is exact".into();
    }
    let level = percent(confidence.level());
    let bound = match r.worse_bound_pct {
        Some(b) if b >= 0.0 => format!("worse by at most {b:.1}% at {level} confidence"),
        Some(b) => format!("better by at least {:.1}% at {level} confidence", -b),
        None => format!("too few runs to bound the change at {level} confidence"),
    };
    format!("{}: p {}, {bound}", r.test.name(), p_text(r.p_value))
}
