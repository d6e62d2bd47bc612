//! CI gates on a benchmark: thresholds given on the command line (`--min-hit-rate`,
//! `--max-fragmentation`, `--min-speedup`, `--max-p99-ns`, `--max-peak-reserved`), checked
//! against what a run measured.

use serde::Serialize;

/// Which figure a gate holds a run to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateKind {
    /// `--min-hit-rate`: a fraction.
    MinHitRate,
    /// `--max-fragmentation`: a fraction.
    MaxFragmentation,
    /// `--min-speedup`: a ratio of times.
    MinSpeedup,
    /// `--max-p99-ns`: nanoseconds.
    MaxP99Ns,
    /// `--max-peak-reserved`: bytes the pool reserved at its peak.
    MaxPeakReserved,
}

impl GateKind {
    /// The flag, without its dashes.
    pub fn flag(self) -> &'static str {
        match self {
            GateKind::MinHitRate => "min-hit-rate",
            GateKind::MaxFragmentation => "max-fragmentation",
            GateKind::MinSpeedup => "min-speedup",
            GateKind::MaxP99Ns => "max-p99-ns",
            GateKind::MaxPeakReserved => "max-peak-reserved",
        }
    }
}

/// One CI gate and how the run measured against it.
#[derive(Debug, Clone, Serialize)]
pub struct Gate {
    /// Which figure it gates.
    #[serde(skip)]
    pub kind: GateKind,
    /// The flag that set it, without its dashes, e.g. `min-hit-rate`.
    pub name: &'static str,
    /// The flag's value.
    pub threshold: f64,
    /// What the run measured, in the same unit.
    pub measured: f64,
    /// Whether the measured value is on the right side of the threshold.
    pub passed: bool,
}

/// The thresholds asked for; `None` gates nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Thresholds {
    /// Lowest acceptable hit rate (0–1).
    pub min_hit_rate: Option<f64>,
    /// Highest acceptable fragmentation at the reserved peak (0–1).
    pub max_fragmentation: Option<f64>,
    /// Lowest acceptable raw-time ÷ pool-time.
    pub min_speedup: Option<f64>,
    /// Highest acceptable allocation p99, in nanoseconds.
    pub max_p99_ns: Option<u64>,
    /// Most bytes the pool may reserve at its peak (a model's memory got worse).
    pub max_peak_reserved: Option<u64>,
}

/// What a pool replay measured, for the gates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    /// Requests served without a device allocation ÷ all requests.
    pub hit_rate: f64,
    /// Fragmentation when reserved memory peaked.
    pub fragmentation_peak: f64,
    /// Raw time ÷ pool time (0 without a raw baseline).
    pub speedup: f64,
    /// Allocation latency p99, in nanoseconds.
    pub alloc_p99_ns: u64,
    /// Bytes the pool reserved at its peak.
    pub peak_reserved: u64,
}

impl Thresholds {
    /// Every gate asked for, in flag order, with its verdict on `m`.
    pub fn check(&self, m: &Measured) -> Vec<Gate> {
        let gate =
            |kind: GateKind, threshold: Option<f64>, measured: f64, higher_is_better: bool| {
                threshold.map(|t| Gate {
                    kind,
                    name: kind.flag(),
                    threshold: t,
                    measured,
                    passed: if higher_is_better {
                        measured >= t
                    } else {
                        measured <= t
                    },
                })
            };
        [
            gate(GateKind::MinHitRate, self.min_hit_rate, m.hit_rate, true),
            gate(
                GateKind::MaxFragmentation,
                self.max_fragmentation,
                m.fragmentation_peak,
                false,
            ),
            gate(GateKind::MinSpeedup, self.min_speedup, m.speedup, true),
            gate(
                GateKind::MaxP99Ns,
                self.max_p99_ns.map(|v| v as f64),
                m.alloc_p99_ns as f64,
                false,
            ),
            gate(
                GateKind::MaxPeakReserved,
                self.max_peak_reserved.map(|v| v as f64),
                m.peak_reserved as f64,
                false,
            ),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}
