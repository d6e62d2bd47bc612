//! Whether a baseline's runs and this run's differ by more than chance: a one-sided
//! Mann–Whitney U test and the confidence bound of the shift it implies (the Hodges–Lehmann
//! interval), as criterion and pytest-benchmark decide regressions.
//!
//! A CI job has 3–10 runs on each side, where the normal approximation of U is poor, so the
//! null distribution is computed exactly (the coefficients of the Gaussian binomial
//! \[m+n choose m\]_q, in exact integers) up to 100 runs in all; beyond that the normal
//! approximation with a continuity correction is used. The test ranks the runs, so one stray
//! run (a page-fault storm, a clock change) moves it by one rank, not by its size.

use serde::Serialize;
use thiserror::Error;

/// `--confidence` outside 0.5–0.9999.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("--confidence {0}: give a level from 0.5 to 0.9999, e.g. 0.95")]
pub struct BadConfidence(pub String);

/// The confidence a decision is made at (`--confidence`): a shift is significant when its
/// one-sided p-value is at most 1 − confidence.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Confidence(f64);

impl Confidence {
    /// CI's usual 95 %.
    pub const DEFAULT: Confidence = Confidence(0.95);

    /// A confidence from 0.5 (a coin toss decides) to 0.9999 (below 1 − 10⁻⁴ no run count a
    /// CI job affords decides anything).
    pub fn new(level: f64) -> Result<Confidence, BadConfidence> {
        if (0.5..=0.9999).contains(&level) {
            Ok(Confidence(level))
        } else {
            Err(BadConfidence(level.to_string()))
        }
    }

    /// The level, e.g. 0.95.
    pub fn level(self) -> f64 {
        self.0
    }

    /// The largest p-value called significant; a hair above 1 − level so that an exact
    /// probability such as 1/20 meets 95 % despite binary rounding.
    pub fn alpha(self) -> f64 {
        (1.0 - self.0) * (1.0 + 1e-9)
    }
}

impl Default for Confidence {
    fn default() -> Self {
        Confidence::DEFAULT
    }
}

/// Above this many runs in all, U's distribution is approximated by a normal one.
pub const EXACT_MAX_RUNS: usize = 100;

/// The number of orderings of m baseline runs and n new runs giving each value of U (the count
/// of (baseline, new) pairs where the new run is the larger), indexed by U from 0 to m·n: the
/// coefficients of the Gaussian binomial \[m+n choose m\]_q, built one factor
/// (1 − q^(n+i)) ÷ (1 − q^i) at a time. Exact for m + n ≤ [`EXACT_MAX_RUNS`] (C(100, 50) <
/// 2¹²⁷).
pub fn u_counts(m: usize, n: usize) -> Vec<u128> {
    let top = m * n;
    let mut c = vec![0i128; top + 1];
    c[0] = 1;
    // After step i, c holds [n+i choose i]_q, whose degree is n·i.
    for i in 1..=m {
        let grow = n + i;
        for k in (grow..=n * i).rev() {
            c[k] -= c[k - grow];
        }
        // Divide by (1 − q^i): a running sum with stride i.
        for k in i..=n * i {
            c[k] += c[k - i];
        }
    }
    c.into_iter()
        .map(|v| u128::try_from(v).unwrap_or(0))
        .collect()
}

/// U's distribution under "no difference", for m and n runs.
#[derive(Debug, Clone)]
pub struct UDistribution {
    m: usize,
    n: usize,
    /// P(U ≤ u) for each u, when exact.
    exact_cdf: Option<Vec<f64>>,
}

impl UDistribution {
    /// The distribution for m and n runs (both at least 1).
    #[expect(
        clippy::cast_precision_loss,
        reason = "counts below 2^127 as probabilities: 53 bits suffice"
    )]
    pub fn new(m: usize, n: usize) -> UDistribution {
        let exact_cdf = (m + n <= EXACT_MAX_RUNS).then(|| {
            let counts = u_counts(m, n);
            let total: u128 = counts.iter().sum();
            let mut running = 0u128;
            counts
                .iter()
                .map(|&c| {
                    running += c;
                    running as f64 / total as f64
                })
                .collect()
        });
        UDistribution { m, n, exact_cdf }
    }

    /// Whether the probabilities are exact rather than the normal approximation.
    pub fn is_exact(&self) -> bool {
        self.exact_cdf.is_some()
    }

    /// P(U ≤ u).
    #[expect(clippy::cast_precision_loss, reason = "run counts far below 2^53")]
    pub fn cdf(&self, u: usize) -> f64 {
        if let Some(cdf) = &self.exact_cdf {
            return cdf[u.min(cdf.len() - 1)];
        }
        let (m, n) = (self.m as f64, self.n as f64);
        let mean = m * n / 2.0;
        let sd = (m * n * (m + n + 1.0) / 12.0).sqrt();
        normal_cdf((u as f64 + 0.5 - mean) / sd)
    }

    /// P(U ≥ u): by symmetry, P(U ≤ m·n − u).
    pub fn upper_tail(&self, u: usize) -> f64 {
        let top = self.m * self.n;
        if u == 0 {
            1.0
        } else {
            self.cdf(top - u.min(top))
        }
    }

    /// The largest c with P(U ≤ c) ≤ `alpha`, or `None` when even P(U = 0) is above it (too few
    /// runs for this confidence).
    pub fn critical(&self, alpha: f64) -> Option<usize> {
        if self.cdf(0) > alpha {
            return None;
        }
        // cdf is non-decreasing: the last c at or below alpha, by bisection.
        let (mut lo, mut hi) = (0usize, self.m * self.n);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if self.cdf(mid) <= alpha {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        Some(lo)
    }
}

/// The smallest one-sided p-value a test of `m` baseline runs against `n` new ones can give:
/// P(U = 0), every new run worse than every baseline run. Exact, 1 ÷ C(m + n, m), up to
/// [`EXACT_MAX_RUNS`] runs in all, else the normal approximation the test then uses. A
/// confidence whose 1 − level is below it cannot be reached by those runs however they fall.
#[expect(
    clippy::cast_precision_loss,
    reason = "C(100, 50) < 2^127 as a probability: 53 bits suffice"
)]
pub fn smallest_p_value(m: usize, n: usize) -> f64 {
    if m == 0 || n == 0 {
        return 1.0;
    }
    if m + n > EXACT_MAX_RUNS {
        return UDistribution::new(m, n).cdf(0);
    }
    // C(m + n, m) one factor at a time: each partial product is itself a binomial coefficient.
    let (small, total) = (m.min(n) as u128, (m + n) as u128);
    let orderings = (1..=small).fold(1u128, |c, i| c * (total - small + i) / i);
    1.0 / orderings as f64
}

/// The fewest new runs, from 1 to `limit`, against which `m` baseline runs can reach
/// `confidence` (see [`smallest_p_value`]); `None` when no count up to `limit` can.
pub fn runs_to_reach(m: usize, confidence: Confidence, limit: usize) -> Option<usize> {
    (1..=limit).find(|&n| smallest_p_value(m, n) <= confidence.alpha())
}

/// Φ(z), the standard normal distribution function, from erfc (Numerical Recipes' `erfcc`,
/// fractional error below 1.2 × 10⁻⁷: far below any confidence asked).
fn normal_cdf(z: f64) -> f64 {
    let x = -z / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.5 * x.abs());
    let poly = -x * x - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let erfc = t * poly.exp();
    let erfc = if x >= 0.0 { erfc } else { 2.0 - erfc };
    0.5 * erfc
}

/// How a comparison of two sets of runs was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// Mann–Whitney U with its exact null distribution.
    MannWhitneyExact,
    /// Mann–Whitney U with the normal approximation (more than [`EXACT_MAX_RUNS`] runs).
    MannWhitneyNormal,
    /// At least two runs each, and every run of each side gave the same value (a count or a
    /// size, not a time): the difference is known exactly, no test needed.
    Constant,
}

impl Method {
    /// The method in words.
    pub fn name(self) -> &'static str {
        match self {
            Method::MannWhitneyExact => "Mann-Whitney U, exact",
            Method::MannWhitneyNormal => "Mann-Whitney U, normal approximation",
            Method::Constant => "every run the same",
        }
    }
}

/// The one-sided tests of a shift between two sets of runs and the confidence bound of the
/// worsening, in percent of the baseline's median.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shift {
    /// How it was decided.
    pub method: Method,
    /// One-sided p-value of "this run is worse"; ties count against it.
    pub p_worse: f64,
    /// One-sided p-value of "this run is better".
    pub p_better: f64,
    /// Upper confidence bound of the worsening (percent; negative: better by at least that);
    /// `None` when too few runs can bound it at the confidence asked.
    pub worse_bound_pct: Option<f64>,
}

/// Compares `new` runs with `old` ones. `worse` turns a difference new − old into a worsening
/// (−1 when higher is better, +1 otherwise); differences are in percent of `scale` (the
/// baseline's median, or another positive scale when that is 0). Both sets must be non-empty.
pub fn shift(old: &[f64], new: &[f64], worse: f64, scale: f64, confidence: Confidence) -> Shift {
    let mut diffs: Vec<f64> = old
        .iter()
        .flat_map(|o| new.iter().map(move |n| worse * 100.0 * (n - o) / scale))
        // Below a billionth of a percent is a decimal round trip, not a difference.
        .map(|d| if d.abs() < 1e-9 { 0.0 } else { d })
        .collect();
    diffs.sort_by(f64::total_cmp);
    let constant = |v: &[f64]| v.len() >= 2 && v.iter().all(|x| *x == v[0]);
    if constant(old) && constant(new) {
        let d = diffs[0];
        return Shift {
            method: Method::Constant,
            p_worse: if d > 0.0 { 0.0 } else { 1.0 },
            p_better: if d < 0.0 { 0.0 } else { 1.0 },
            worse_bound_pct: Some(d),
        };
    }
    let dist = UDistribution::new(old.len(), new.len());
    let worse_pairs = diffs.iter().filter(|d| **d > 0.0).count();
    let better_pairs = diffs.iter().filter(|d| **d < 0.0).count();
    // The bound: the true shift exceeds the j-th smallest difference only when at most m·n − j
    // differences exceed it, which has probability P(U ≤ m·n − j).
    let worse_bound_pct = dist
        .critical(confidence.alpha())
        .map(|c| diffs[diffs.len() - 1 - c]);
    Shift {
        method: if dist.is_exact() {
            Method::MannWhitneyExact
        } else {
            Method::MannWhitneyNormal
        },
        p_worse: dist.upper_tail(worse_pairs),
        p_better: dist.upper_tail(better_pairs),
        worse_bound_pct,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_sum_to_the_orderings() {
        assert_eq!(u_counts(1, 1), vec![1, 1]);
        assert_eq!(u_counts(2, 2), vec![1, 1, 2, 1, 1]);
        let c = u_counts(50, 50);
        assert_eq!(c.len(), 2501);
        assert_eq!(
            c.iter().sum::<u128>(),
            100_891_344_545_564_193_334_812_497_256
        );
    }

    #[test]
    fn the_smallest_p_value_is_the_tests_own() {
        for (m, n) in [
            (1, 1),
            (2, 8),
            (5, 3),
            (5, 8),
            (3, 40),
            (50, 50),
            (1, 200),
            (30, 90),
        ] {
            let d = UDistribution::new(m, n);
            assert!((smallest_p_value(m, n) - d.cdf(0)).abs() < 1e-12, "{m}×{n}");
        }
        assert_eq!(smallest_p_value(2, 8), 1.0 / 45.0);
        assert_eq!(smallest_p_value(5, 5), 1.0 / 252.0);
        assert_eq!(smallest_p_value(0, 5), 1.0);
        // 2 baseline runs reach 99 % from 13 new ones (1/105); 12 give 1/91.
        let at_99 = Confidence::new(0.99).unwrap();
        assert_eq!(runs_to_reach(2, at_99, 1000), Some(13));
        assert_eq!(runs_to_reach(2, at_99, 12), None);
        assert_eq!(runs_to_reach(3, Confidence::DEFAULT, 1000), Some(3));
        // One baseline run reaches 99.9 % never: 1/(n + 1) exactly up to 99 new runs, and the
        // normal approximation beyond levels off near 0.04.
        assert_eq!(
            runs_to_reach(1, Confidence::new(0.999).unwrap(), 1000),
            None
        );
    }

    #[test]
    fn the_normal_approximation_meets_the_exact_tail() {
        let d = UDistribution::new(40, 40);
        let approx = UDistribution {
            exact_cdf: None,
            ..d.clone()
        };
        for u in [500, 650, 800] {
            assert!((d.cdf(u) - approx.cdf(u)).abs() < 2e-3, "{u}");
        }
        assert!((normal_cdf(1.959_964) - 0.975).abs() < 1e-6);
    }
}
