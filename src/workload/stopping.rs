//! When to stop measuring (`bench-alloc --min-runs N --max-runs M`): run at least N times, then
//! one run more while a `--max-regression` gate is undecided, until every gate is decided or M
//! runs are made, or until the baseline's runs show that the confidence asked is out of reach
//! of M runs.
//!
//! The baseline is a saved file: its runs are fixed, and they bound what the Mann–Whitney test
//! can show. Against m baseline runs, n new runs give a p-value of at least 1 ÷ C(m + n, m)
//! (see [`smallest_p_value`]); when that is above 1 − confidence at n = M, no fall of the runs
//! decides a gate the medians left open, and more runs would only spend time.

use std::collections::BTreeMap;

use serde::Serialize;

use super::baseline::{Comparison, Confidence, Metric, Summary, Verdict};
use super::significance::{runs_to_reach, smallest_p_value};

/// The most measured runs `--runs` and `--max-runs` allow.
pub const MAX_RUNS: usize = 1000;

/// How many measured runs to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunPlan {
    /// `--runs N`: exactly N.
    Fixed(usize),
    /// `--min-runs`/`--max-runs`: from `min` to `max`, until every gate is decided.
    Until(RunRange),
}

impl RunPlan {
    /// The runs made before any is judged: all of a fixed plan, the minimum of a range.
    pub fn first(self) -> usize {
        match self {
            RunPlan::Fixed(n) => n,
            RunPlan::Until(range) => range.min,
        }
    }

    /// The most runs the plan may make.
    pub fn most(self) -> usize {
        match self {
            RunPlan::Fixed(n) => n,
            RunPlan::Until(range) => range.max,
        }
    }
}

/// `--min-runs N --max-runs M`, with 1 ≤ N ≤ M.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RunRange {
    /// Runs made before the gates are first judged.
    #[serde(rename = "min_runs")]
    pub min: usize,
    /// Runs after which the command stops, decided or not.
    #[serde(rename = "max_runs")]
    pub max: usize,
}

impl RunRange {
    /// The range from `min` to `max` runs, or `None` unless 1 ≤ min ≤ max ≤ [`MAX_RUNS`].
    pub fn new(min: usize, max: usize) -> Option<RunRange> {
        (1 <= min && min <= max && max <= MAX_RUNS).then_some(RunRange { min, max })
    }
}

/// A `--max-regression` gate the runs so far left undecided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Undecided {
    /// The gated metric.
    pub metric: Metric,
    /// The baseline's runs of it.
    pub baseline_runs: usize,
}

/// Why the confidence asked cannot be reached: a gate's baseline runs are too few for any
/// number of runs up to `--max-runs`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct OutOfReach {
    /// The gate's metric.
    pub metric: Metric,
    /// The baseline's runs of it.
    pub baseline_runs: usize,
    /// The smallest p-value `--max-runs` runs can give against them.
    pub smallest_p_value: f64,
    /// The fewest runs that could reach the confidence against them (up to [`MAX_RUNS`];
    /// `None`: no count can, record the baseline with more runs).
    pub runs_needed: Option<usize>,
}

/// Why the measured runs stopped.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stop {
    /// Every gate decided: passed or failed.
    Decided,
    /// `--max-runs` made with a gate still undecided.
    MaxRuns,
    /// A gate undecided whose confidence `--max-runs` runs cannot reach against the baseline's.
    Unreachable(OutOfReach),
    /// A signal stopped the command.
    Interrupted,
}

impl Stop {
    /// The reason's name in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Stop::Decided => "decided",
            Stop::MaxRuns => "max-runs",
            Stop::Unreachable(_) => "unreachable",
            Stop::Interrupted => "interrupted",
        }
    }
}

/// After a run: make another, or stop and why.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Next {
    /// One run more.
    Run,
    /// No more runs.
    Stop(Stop),
}

/// The gates a comparison's `rows` left undecided, each with the baseline's runs of its metric.
pub fn undecided_gates(
    rows: &[Comparison],
    baseline: &BTreeMap<Metric, Summary>,
) -> Vec<Undecided> {
    rows.iter()
        .filter(|r| r.verdict == Verdict::Undecided)
        .map(|r| Undecided {
            metric: r.metric,
            baseline_runs: baseline.get(&r.metric).map_or(0, |s| s.samples.len()),
        })
        .collect()
}

/// The stopping rule, after `done` measured runs of `range` left the gates in `undecided` at
/// `confidence`: below the minimum, run; with nothing undecided, stop decided; at the maximum,
/// stop; when a gate's baseline runs put the confidence out of reach of the maximum, stop
/// (naming the first such gate); else run once more.
pub fn next(done: usize, range: RunRange, undecided: &[Undecided], confidence: Confidence) -> Next {
    if done < range.min {
        return Next::Run;
    }
    if undecided.is_empty() {
        return Next::Stop(Stop::Decided);
    }
    if done >= range.max {
        return Next::Stop(Stop::MaxRuns);
    }
    let out_of_reach = undecided
        .iter()
        .find(|g| runs_to_reach(g.baseline_runs, confidence, range.max).is_none());
    match out_of_reach {
        Some(g) => Next::Stop(Stop::Unreachable(OutOfReach {
            metric: g.metric,
            baseline_runs: g.baseline_runs,
            smallest_p_value: smallest_p_value(g.baseline_runs, range.max),
            runs_needed: runs_to_reach(g.baseline_runs, confidence, MAX_RUNS),
        })),
        None => Next::Run,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(baseline_runs: usize) -> Undecided {
        Undecided {
            metric: Metric::OpsPerSec,
            baseline_runs,
        }
    }

    #[test]
    fn runs_to_the_minimum_then_until_decided_or_the_maximum() {
        let range = RunRange::new(3, 8).unwrap();
        let at_95 = Confidence::DEFAULT;
        assert_eq!(next(0, range, &[], at_95), Next::Run);
        assert_eq!(next(2, range, &[gate(5)], at_95), Next::Run);
        assert_eq!(next(3, range, &[], at_95), Next::Stop(Stop::Decided));
        assert_eq!(next(3, range, &[gate(5)], at_95), Next::Run);
        assert_eq!(next(7, range, &[gate(5)], at_95), Next::Run);
        assert_eq!(next(8, range, &[gate(5)], at_95), Next::Stop(Stop::MaxRuns));
        assert_eq!(next(8, range, &[], at_95), Next::Stop(Stop::Decided));
    }

    #[test]
    fn a_confidence_the_baseline_puts_out_of_reach_stops_at_once() {
        let range = RunRange::new(3, 8).unwrap();
        let at_99 = Confidence::new(0.99).unwrap();
        // Against 2 baseline runs, 8 runs give p ≥ 1/45 > 0.01; 13 would give 1/105.
        let stop = next(3, range, &[gate(5), gate(2)], at_99);
        assert_eq!(
            stop,
            Next::Stop(Stop::Unreachable(OutOfReach {
                metric: Metric::OpsPerSec,
                baseline_runs: 2,
                smallest_p_value: 1.0 / 45.0,
                runs_needed: Some(13),
            }))
        );
        // 5 baseline runs reach 99 % from 5 new ones (1/252): run on.
        assert_eq!(next(3, range, &[gate(5)], at_99), Next::Run);
        // Reached with 13 allowed: run on.
        let wider = RunRange::new(3, 13).unwrap();
        assert_eq!(next(3, wider, &[gate(2)], at_99), Next::Run);
        // One baseline run and 99.9 %: no count of runs can.
        let never = next(3, range, &[gate(1)], Confidence::new(0.999).unwrap());
        assert!(matches!(
            never,
            Next::Stop(Stop::Unreachable(OutOfReach {
                runs_needed: None,
                ..
            }))
        ));
    }

    #[test]
    fn the_undecided_rows_are_the_gates_to_run_on_for() {
        use crate::workload::baseline::{compare, RegressionGate};
        let of = |v: &[f64]| BTreeMap::from([(Metric::HitRate, Summary::of(v).unwrap())]);
        let gate: [RegressionGate; 1] = ["hit-rate:10".parse().unwrap()];
        // The median 23 % down, one baseline run tied with every new one: not significant.
        let old = of(&[1.0, 1.2, 1.3, 1.4, 1.5]);
        let rows = compare(&old, &of(&[1.0, 1.0, 1.0]), &gate, Confidence::DEFAULT);
        assert_eq!(
            undecided_gates(&rows, &old),
            vec![Undecided {
                metric: Metric::HitRate,
                baseline_runs: 5
            }]
        );
        // Eight runs decide it: p = P(U ≥ 32) for 5 × 8 = 0.047.
        let rows = compare(&old, &of(&[1.0; 8]), &gate, Confidence::DEFAULT);
        assert_eq!(rows[0].verdict, Verdict::Regressed);
        assert_eq!(undecided_gates(&rows, &old), vec![]);
    }

    #[test]
    fn ranges_hold_their_order() {
        assert_eq!(RunRange::new(3, 8), Some(RunRange { min: 3, max: 8 }));
        assert_eq!(RunRange::new(5, 3), None);
        assert_eq!(RunRange::new(0, 3), None);
        assert_eq!(RunRange::new(1, MAX_RUNS + 1), None);
        assert_eq!(RunPlan::Until(RunRange { min: 3, max: 8 }).first(), 3);
        assert_eq!(RunPlan::Fixed(5).most(), 5);
    }
}
