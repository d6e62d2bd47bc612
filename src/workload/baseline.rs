//! Repeated benchmark runs, saved baselines and regression gates (criterion's `--save-baseline` /
//! `--baseline`, pytest-benchmark's `--benchmark-compare-fail`).
//!
//! A run of `bench-alloc --runs N` gives N samples of each [`Metric`]; [`Summary`] keeps them with
//! their mean, σ, median and range. A [`Baseline`] is those summaries saved as versioned JSON
//! with what was replayed, so that a later run can be [`compare`]d against it: a gated metric
//! regresses only when its median is worse by more than its allowed percentage and a
//! Mann–Whitney test of the two sets of runs calls the shift significant (see
//! [`super::significance`]); when the runs cannot tell, the verdict is undecided.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::significance::{shift, Shift};
pub use super::significance::{Confidence, Method};

/// What a baseline file says it is, so that another JSON document is not taken for one.
pub const BASELINE_KIND: &str = "gpumem-bench-baseline";
/// The baseline format's version; a file of another version is refused, not guessed at.
pub const BASELINE_VERSION: u32 = 1;

/// A figure of a pool replay that runs are compared on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Metric {
    /// Pool operations per second of allocate/free time.
    OpsPerSec,
    /// Raw time ÷ pool time.
    Speedup,
    /// Requests served without a device allocation.
    HitRate,
    /// Fragmentation when reserved memory peaked.
    Fragmentation,
    /// Peak bytes reserved from the device.
    PeakReserved,
    /// Median allocation latency, ns.
    AllocP50Ns,
    /// 99th-percentile allocation latency, ns.
    AllocP99Ns,
    /// 99th-percentile free latency, ns.
    FreeP99Ns,
}

impl Metric {
    /// Every metric, in report order.
    pub const ALL: [Metric; 8] = [
        Metric::OpsPerSec,
        Metric::Speedup,
        Metric::HitRate,
        Metric::Fragmentation,
        Metric::PeakReserved,
        Metric::AllocP50Ns,
        Metric::AllocP99Ns,
        Metric::FreeP99Ns,
    ];

    /// The name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Metric::OpsPerSec => "ops-per-sec",
            Metric::Speedup => "speedup",
            Metric::HitRate => "hit-rate",
            Metric::Fragmentation => "fragmentation",
            Metric::PeakReserved => "peak-reserved",
            Metric::AllocP50Ns => "alloc-p50-ns",
            Metric::AllocP99Ns => "alloc-p99-ns",
            Metric::FreeP99Ns => "free-p99-ns",
        }
    }

    /// Whether a larger value is an improvement.
    pub fn higher_is_better(self) -> bool {
        matches!(self, Metric::OpsPerSec | Metric::Speedup | Metric::HitRate)
    }

    /// A figure of memory, not of time: what two traces of one job compare on.
    pub fn is_memory(self) -> bool {
        matches!(
            self,
            Metric::HitRate | Metric::Fragmentation | Metric::PeakReserved
        )
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Metric {
    type Err = BaselineError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Metric::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| BaselineError::UnknownMetric(s.to_owned()))
    }
}

impl Serialize for Metric {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Metric {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

/// Why a baseline or a regression gate cannot be used.
#[derive(Debug, Error, PartialEq)]
pub enum BaselineError {
    /// A metric name that is not one of [`Metric::ALL`].
    #[error("unknown metric '{0}' (known: ops-per-sec, speedup, hit-rate, fragmentation, peak-reserved, alloc-p50-ns, alloc-p99-ns, free-p99-ns)")]
    UnknownMetric(String),
    /// `--max-regression` not written METRIC:PCT with a percentage from 0 to 1000.
    #[error("'{0}' is not METRIC:PCT with PCT a percentage from 0 to 1000, e.g. ops-per-sec:10")]
    BadGate(String),
    /// `--confidence` outside 0.5–0.9999.
    #[error(transparent)]
    BadConfidence(#[from] super::significance::BadConfidence),
    /// The file is not a baseline this version reads.
    #[error("not a gpumem baseline of version {BASELINE_VERSION}: {0}")]
    NotABaseline(String),
    /// The baseline replayed something else, so its figures do not compare.
    #[error("the baseline replayed {saved}; this run replays {now}")]
    OtherWorkload {
        /// What the baseline replayed.
        saved: String,
        /// What this run replays.
        now: String,
    },
}

/// One metric over the measured runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Each run's value, in run order.
    pub samples: Vec<f64>,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (n − 1); 0 for one run.
    pub stddev: f64,
    /// Median (mean of the middle two for an even count).
    pub median: f64,
    /// Median absolute deviation from the median: the spread that one stray run does not move.
    pub mad: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
}

impl Summary {
    /// The statistics of `samples`, or `None` when there are none or one is not finite.
    pub fn of(samples: &[f64]) -> Option<Summary> {
        if samples.is_empty() || samples.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let n = samples.len() as f64;
        let mean = samples.iter().sum::<f64>() / n;
        let stddev = if samples.len() > 1 {
            (samples.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
        } else {
            0.0
        };
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let median = median_of_sorted(&sorted);
        let mut deviations: Vec<f64> = sorted.iter().map(|v| (v - median).abs()).collect();
        deviations.sort_by(f64::total_cmp);
        Some(Summary {
            samples: samples.to_vec(),
            mean,
            stddev,
            median,
            mad: median_of_sorted(&deviations),
            min: sorted[0],
            max: sorted[sorted.len() - 1],
        })
    }

    /// σ ÷ |mean| in percent (0 for one run or a zero mean).
    pub fn spread_pct(&self) -> f64 {
        if self.mean == 0.0 {
            0.0
        } else {
            100.0 * self.stddev / self.mean.abs()
        }
    }
}

impl Summary {
    /// Whether `other` gives the same statistics to within a text round trip's last digits.
    fn agrees(&self, other: &Summary) -> bool {
        // Relative to the samples' scale: σ and the MAD of equal samples are rounding noise.
        let scale = self
            .samples
            .iter()
            .fold(f64::MIN_POSITIVE, |m, v| m.max(v.abs()));
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * scale;
        self.samples.len() == other.samples.len()
            && [
                (self.mean, other.mean),
                (self.stddev, other.stddev),
                (self.median, other.median),
                (self.mad, other.mad),
                (self.min, other.min),
                (self.max, other.max),
            ]
            .into_iter()
            .all(|(a, b)| close(a, b))
    }
}

/// The median of a sorted, non-empty slice.
fn median_of_sorted(sorted: &[f64]) -> f64 {
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 0 {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    }
}

/// What was replayed: two runs compare only when these are equal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replayed {
    /// The workload's name (`random`, `trace:FILE`, …).
    pub workload: String,
    /// Operations replayed.
    pub ops: u64,
    /// Seed of a synthetic workload.
    pub seed: Option<u64>,
    /// The pool's preset.
    pub preset: String,
    /// The live-bytes limit a synthetic workload was built under (from the device's free
    /// memory): a later run on a device with as much free reuses it, so free memory that moves
    /// by a few MiB between runs does not change the workload.
    pub max_live_bytes: Option<u64>,
    /// [`crate::workload::Workload::fingerprint`] in hex: any other size, order or seed differs.
    pub fingerprint: String,
}

impl Replayed {
    /// Whether another recording of a trace replayed on the same preset: two traces of one job
    /// compare on their memory metrics however their operations differ.
    pub fn another_trace(&self, other: &Replayed) -> bool {
        self != other
            && self.workload.starts_with("trace:")
            && other.workload.starts_with("trace:")
            && self.preset == other.preset
    }
}

impl fmt::Display for Replayed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({} operations, preset {}",
            self.workload, self.ops, self.preset
        )?;
        if let Some(seed) = self.seed {
            write!(f, ", seed {seed}")?;
        }
        write!(f, ", operations {})", self.fingerprint)
    }
}

/// A saved set of runs (`--save-baseline FILE`), read back by `--baseline FILE`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// Always [`BASELINE_KIND`].
    pub kind: String,
    /// Always [`BASELINE_VERSION`] when written by this version.
    pub version: u32,
    /// The gpumem version that measured it.
    pub gpumem: String,
    /// The device it ran on, as `backend:index (name)`.
    pub device: String,
    /// What was replayed.
    pub replayed: Replayed,
    /// Measured runs (warm-up runs not counted).
    pub runs: usize,
    /// Each metric's runs, by name.
    pub metrics: BTreeMap<Metric, Summary>,
}

impl Baseline {
    /// This version's baseline of `metrics`, measured on `device` replaying `replayed`.
    pub fn new(device: String, replayed: Replayed, metrics: BTreeMap<Metric, Summary>) -> Self {
        Baseline {
            kind: BASELINE_KIND.into(),
            version: BASELINE_VERSION,
            gpumem: env!("CARGO_PKG_VERSION").into(),
            device,
            replayed,
            runs: metrics.values().map(|s| s.samples.len()).max().unwrap_or(0),
            metrics,
        }
    }

    /// Parses a baseline file's bytes, refusing another kind or version.
    pub fn from_json(bytes: &[u8]) -> Result<Baseline, BaselineError> {
        let doc: serde_json::Value = serde_json::from_slice(bytes)
            .map_err(|e| BaselineError::NotABaseline(e.to_string()))?;
        if doc.get("kind").and_then(|k| k.as_str()) != Some(BASELINE_KIND) {
            return Err(BaselineError::NotABaseline(format!(
                "no \"kind\": \"{BASELINE_KIND}\""
            )));
        }
        let version = doc.get("version").and_then(serde_json::Value::as_u64);
        if version != Some(u64::from(BASELINE_VERSION)) {
            return Err(BaselineError::NotABaseline(format!(
                "its version is {}",
                version.map_or_else(|| "missing".into(), |v| v.to_string())
            )));
        }
        let baseline: Baseline =
            serde_json::from_value(doc).map_err(|e| BaselineError::NotABaseline(e.to_string()))?;
        if let Some((m, _)) = baseline
            .metrics
            .iter()
            .find(|(_, s)| !Summary::of(&s.samples).is_some_and(|again| again.agrees(s)))
        {
            return Err(BaselineError::NotABaseline(format!(
                "{m}'s statistics do not follow from its samples"
            )));
        }
        Ok(baseline)
    }
}

/// `--max-regression METRIC:PCT`: fail when METRIC gets worse by more than PCT percent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RegressionGate {
    /// The metric gated.
    pub metric: Metric,
    /// The allowed worsening, in percent of the baseline's median.
    pub max_pct: f64,
}

impl FromStr for RegressionGate {
    type Err = BaselineError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (name, pct) = s
            .split_once(':')
            .ok_or_else(|| BaselineError::BadGate(s.to_owned()))?;
        let metric = name.trim().parse()?;
        let max_pct: f64 = pct
            .trim()
            .trim_end_matches('%')
            .parse()
            .map_err(|_| BaselineError::BadGate(s.to_owned()))?;
        if !(0.0..=1000.0).contains(&max_pct) {
            return Err(BaselineError::BadGate(s.to_owned()));
        }
        Ok(RegressionGate { metric, max_pct })
    }
}

/// How one metric moved from the baseline to this run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Significantly better.
    Improved,
    /// No significant change, or a gated metric within its allowance.
    Unchanged,
    /// Significantly worse, but not gated or within the allowance.
    Worse,
    /// Gated, its median worse by more than the allowance, but the runs are too few or too
    /// noisy to call that significant at the confidence asked: the run fails, with its own exit
    /// code, rather than pass a regression it could not rule out.
    Undecided,
    /// Gated, its median worse by more than the allowance, and significantly worse: the run
    /// fails.
    Regressed,
}

/// One row of the comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// The metric.
    pub metric: Metric,
    /// The baseline's median.
    pub old: f64,
    /// This run's median.
    pub new: f64,
    /// (new − old) ÷ old, in percent (0 when old is 0).
    pub change_pct: f64,
    /// How the two sets of runs were compared.
    pub test: Method,
    /// One-sided p-value of "this run is worse than the baseline".
    pub p_value: f64,
    /// Upper confidence bound (at `--confidence`) of the worsening, in percent of the
    /// baseline's median (negative: better by at least that); `None` when the runs are too few
    /// to bound it.
    pub worse_bound_pct: Option<f64>,
    /// `--max-regression`'s percentage for this metric, if gated.
    pub max_regression_pct: Option<f64>,
    /// The verdict.
    pub verdict: Verdict,
}

/// (new − old) ÷ |old| in percent, infinite (signed as new) when old is 0 and new is not.
fn change_pct(old: f64, new: f64) -> f64 {
    if old == 0.0 {
        if new == 0.0 {
            0.0
        } else {
            f64::INFINITY.copysign(new)
        }
    } else {
        100.0 * (new - old) / old.abs()
    }
}

/// A gated metric passes when its median moved the wrong way by at most the allowance or the
/// worsening's confidence bound is below it (a minimum effect, so that a significant 1 % does not
/// fail a 10 % gate); it regresses when the median moved by more and the test calls the shift
/// significant; otherwise the runs could not tell. An ungated metric is worse or better only
/// when significantly so.
fn verdict(worse_pct: f64, shift: &Shift, max_pct: Option<f64>, alpha: f64) -> Verdict {
    let significant = |p: f64| p <= alpha;
    match max_pct {
        Some(max) if worse_pct > max && !shift.worse_bound_pct.is_some_and(|bound| bound < max) => {
            if significant(shift.p_worse) {
                Verdict::Regressed
            } else {
                Verdict::Undecided
            }
        }
        _ if worse_pct > 0.0 && significant(shift.p_worse) => Verdict::Worse,
        _ if worse_pct < 0.0 && significant(shift.p_better) => Verdict::Improved,
        _ => Verdict::Unchanged,
    }
}

/// Compares every metric both runs have, each by a one-sided Mann–Whitney test of their runs
/// at `confidence` (see the module docs).
pub fn compare(
    old: &BTreeMap<Metric, Summary>,
    new: &BTreeMap<Metric, Summary>,
    gates: &[RegressionGate],
    confidence: Confidence,
) -> Vec<Comparison> {
    Metric::ALL
        .into_iter()
        .filter_map(|metric| {
            let (o, n) = (old.get(&metric)?, new.get(&metric)?);
            let change_pct = change_pct(o.median, n.median);
            let sign = if metric.higher_is_better() { -1.0 } else { 1.0 };
            let worse_pct = sign * change_pct;
            // Below a billionth of a percent is a decimal round trip, not a change.
            let worse_pct = if worse_pct.abs() < 1e-9 {
                0.0
            } else {
                worse_pct
            };
            // Differences in percent of the baseline's median; of the largest value when that
            // is 0 (the change is then infinite, and only its significance matters).
            let scale = [
                o.median.abs(),
                o.max.abs(),
                o.min.abs(),
                n.max.abs(),
                n.min.abs(),
            ]
            .into_iter()
            .find(|v| *v > 0.0)
            .unwrap_or(1.0);
            let shift = shift(&o.samples, &n.samples, sign, scale, confidence);
            let max_regression_pct = gates
                .iter()
                .filter(|g| g.metric == metric)
                .map(|g| g.max_pct)
                .reduce(f64::min);
            Some(Comparison {
                metric,
                old: o.median,
                new: n.median,
                change_pct,
                test: shift.method,
                p_value: shift.p_worse,
                worse_bound_pct: shift.worse_bound_pct,
                max_regression_pct,
                verdict: verdict(worse_pct, &shift, max_regression_pct, confidence.alpha()),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(metric: Metric, samples: &[f64]) -> BTreeMap<Metric, Summary> {
        BTreeMap::from([(metric, Summary::of(samples).unwrap())])
    }

    #[test]
    fn summary_statistics() {
        let s = Summary::of(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!(
            (s.mean, s.median, s.min, s.max, s.mad),
            (2.5, 2.5, 1.0, 4.0, 1.0)
        );
        // One stray run moves σ, not the MAD.
        let stray = Summary::of(&[100.0, 101.0, 99.0, 100.0, 40.0]).unwrap();
        assert_eq!((stray.median, stray.mad), (100.0, 1.0));
        assert!(stray.spread_pct() > 20.0);
        assert!((s.stddev - (5.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert_eq!(Summary::of(&[7.0]).unwrap().stddev, 0.0);
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(Summary::of(&[1.0, f64::NAN]), None);
    }

    fn verdict_of(old: &[f64], new: &[f64], gate: &str) -> Verdict {
        let gate: RegressionGate = gate.parse().unwrap();
        let (o, n) = (runs(gate.metric, old), runs(gate.metric, new));
        compare(&o, &n, &[gate], Confidence::DEFAULT)[0].verdict
    }

    #[test]
    fn a_gate_fails_only_beyond_its_allowance_and_significantly() {
        let old = [100.0, 101.0, 99.0, 100.5, 99.5];
        let gate = "ops-per-sec:10";
        // 12 % slower, every run below every baseline run: p = 1/252.
        assert_eq!(
            verdict_of(&old, &[88.0, 89.0, 88.5, 87.0, 88.2], gate),
            Verdict::Regressed
        );
        // The same medians, the runs overlapping: not significant, not passed either.
        assert_eq!(
            verdict_of(&old, &[60.0, 88.0, 120.0, 85.0, 104.0], gate),
            Verdict::Undecided
        );
        // Slower within the allowance: passed, named worse.
        assert_eq!(
            verdict_of(&old, &[95.0, 96.0, 95.5, 94.0, 95.2], gate),
            Verdict::Worse
        );
        assert_eq!(
            verdict_of(&old, &[99.0, 101.5, 100.2, 98.9, 100.1], gate),
            Verdict::Unchanged
        );
        assert_eq!(
            verdict_of(&old, &[130.0, 131.0, 130.5, 129.0, 133.0], gate),
            Verdict::Improved
        );
        // Two runs each can never reach 95 % (p ≥ 1/6): a 20 % drop is undecided, not passed.
        assert_eq!(
            verdict_of(&[100.0, 101.0], &[80.0, 81.0], gate),
            Verdict::Undecided
        );
        // Not gated: named worse, not failed.
        let (o, n) = (
            runs(Metric::OpsPerSec, &old),
            runs(Metric::OpsPerSec, &[88.0, 89.0, 88.5, 87.0, 88.2]),
        );
        assert_eq!(
            compare(&o, &n, &[], Confidence::DEFAULT)[0].verdict,
            Verdict::Worse
        );
    }

    #[test]
    fn constant_figures_are_compared_exactly() {
        // Hit rates repeat exactly run after run: two runs each show the difference is real.
        assert_eq!(
            verdict_of(&[0.9, 0.9], &[0.8, 0.8], "hit-rate:10"),
            Verdict::Regressed
        );
        assert_eq!(
            verdict_of(&[0.9, 0.9], &[0.85, 0.85], "hit-rate:10"),
            Verdict::Worse
        );
        assert_eq!(
            verdict_of(&[0.9, 0.9], &[0.9, 0.9], "hit-rate:0"),
            Verdict::Unchanged
        );
        // One run each shows nothing about its noise.
        assert_eq!(
            verdict_of(&[0.9], &[0.8], "hit-rate:10"),
            Verdict::Undecided
        );
    }

    #[test]
    fn lower_is_better_metrics_regress_upwards() {
        let gate = "alloc-p99-ns:5%";
        let old = [100.0, 102.0, 99.0];
        assert_eq!(
            verdict_of(&old, &[110.0, 108.0, 109.0], gate),
            Verdict::Regressed
        );
        assert_eq!(
            verdict_of(&old, &[90.0, 89.0, 91.0], gate),
            Verdict::Improved
        );
        let (o, n) = (
            runs(Metric::AllocP99Ns, &[100.0]),
            runs(Metric::AllocP99Ns, &[106.0]),
        );
        let row = &compare(&o, &n, &[], Confidence::DEFAULT)[0];
        assert!((row.change_pct - 6.0).abs() < 1e-9);
    }

    #[test]
    fn gates_parse_or_say_why() {
        assert_eq!(
            "hit-rate:2.5".parse::<RegressionGate>().unwrap(),
            RegressionGate {
                metric: Metric::HitRate,
                max_pct: 2.5
            }
        );
        for bad in [
            "hit-rate",
            "hit-rate:x",
            "hit-rate:-1",
            "hit-rate:nan",
            ":5",
        ] {
            assert!(bad.parse::<RegressionGate>().is_err(), "{bad}");
        }
        assert!(matches!(
            "speed:5".parse::<RegressionGate>(),
            Err(BaselineError::UnknownMetric(_))
        ));
    }

    #[test]
    fn baselines_round_trip_and_refuse_strangers() {
        let b = Baseline {
            kind: BASELINE_KIND.into(),
            version: BASELINE_VERSION,
            gpumem: "0.1.0".into(),
            device: "host:0 (host)".into(),
            replayed: Replayed {
                workload: "random".into(),
                ops: 2000,
                seed: Some(42),
                preset: "arena".into(),
                max_live_bytes: Some(1 << 30),
                fingerprint: "0123456789abcdef".into(),
            },
            runs: 2,
            metrics: runs(Metric::HitRate, &[0.5, 0.7]),
        };
        let json = serde_json::to_vec(&b).unwrap();
        assert_eq!(Baseline::from_json(&json).unwrap(), b);
        let text = String::from_utf8(json).unwrap();
        for (from, to) in [
            ("\"version\":1", "\"version\":2"),
            ("gpumem-bench-baseline", "other"),
            ("\"median\":0.6", "\"median\":0.9"),
            ("hit-rate", "hit-ratio"),
        ] {
            let bad = text.replace(from, to);
            assert_ne!(bad, text);
            assert!(Baseline::from_json(bad.as_bytes()).is_err(), "{bad}");
        }
        assert!(Baseline::from_json(b"[1,2]").is_err());
    }
}
