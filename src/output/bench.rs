//! Rendering of `gpumem bench-alloc`: tables, JSON and the SVG timeline.

use std::fmt::Write as _;

use serde::Serialize;

use super::one_line;
use super::runs::{ComparisonView, MetricSource, RunsView};
use super::{new_table, ns, per_sec, thousands, Report, Style};
use crate::alloc::{LimitRule, Preset};
use crate::backend::DeviceSpec;
use crate::device::DeviceMemory;
use crate::units::format_bytes;
use crate::workload::bench::{Arena, Latency, PoolRun, RawRun, Sample};
use crate::workload::Workload;

/// The device a benchmark ran on.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceView {
    /// `host`, `sim` or a backend name.
    pub backend: String,
    /// Index within the backend.
    pub index: usize,
    /// Device name as its driver gives it.
    pub name: String,
    /// Whether nothing was really allocated (sim).
    pub simulated: bool,
    /// Device memory in bytes (the capacity, for `sim` and `host`).
    pub total_bytes: u64,
}

impl DeviceView {
    /// The device under test: `spec` opened as `device`, of `total` bytes.
    pub fn of(spec: &DeviceSpec, device: &dyn DeviceMemory, total: u64) -> Self {
        let (backend, index) = spec.identity();
        DeviceView {
            backend: backend.into(),
            index,
            name: device.device_name(),
            simulated: device.simulated(),
            total_bytes: total,
        }
    }

    /// The device as a baseline records it: `backend:index (name)`.
    pub fn identity(&self) -> String {
        format!("{}:{} ({})", self.backend, self.index, self.name)
    }
}

/// The workload replayed.
#[derive(Debug, Clone, Serialize)]
pub struct WorkloadView {
    /// `random`, `same-size`, `mixed`, `transformer` or `trace:FILE`.
    pub name: String,
    /// Operations (allocations and frees).
    pub ops: u64,
    /// Seed of synthetic workloads.
    pub seed: Option<u64>,
    /// Allocations the workload makes (frees not counted).
    pub allocations: u32,
    /// Trace allocations placed first because they predate the recording.
    pub preexisting: u32,
    /// Trace events not replayed, by kind.
    pub skipped: Vec<(String, u64)>,
    /// Live-bytes limit of the synthetic workloads.
    pub max_live_bytes: Option<u64>,
}

/// Latency percentiles in nanoseconds.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct LatencyView {
    /// Median, ns.
    pub p50: u64,
    /// 90th percentile, ns.
    pub p90: u64,
    /// 99th percentile, ns.
    pub p99: u64,
    /// Slowest operation, ns.
    pub max: u64,
}

impl From<Latency> for LatencyView {
    fn from(l: Latency) -> Self {
        LatencyView {
            p50: l.p50,
            p90: l.p90,
            p99: l.p99,
            max: l.max,
        }
    }
}

/// The pool's results on the workload.
#[derive(Debug, Clone, Serialize)]
pub struct PoolView {
    /// The configuration preset used.
    pub preset: &'static str,
    /// Bytes the pool could reserve in all.
    pub usable_limit_bytes: u64,
    /// The configured rule that set it: `memory_fraction`, `min_free`, `max_pool` or
    /// `driver_reserve` (with `reserve_bytes`).
    pub limit_rule: LimitRule,
    /// Expandable segments: `null` when not asked for, else whether the device could map them
    /// (false: ordinary segments were used).
    pub expandable_segments: Option<bool>,
    /// Requests served without a device allocation. For traces: over the recorded requests only
    /// (allocations that predate the recording are placed first and are not counted).
    pub hit_rate: f64,
    /// Over every request, including a trace's pre-recording allocations.
    pub hit_rate_overall: f64,
    /// Fragmentation when reserved memory peaked.
    pub fragmentation_peak: f64,
    /// Fragmentation at the end.
    pub fragmentation_end: f64,
    /// Peak bytes in live blocks.
    pub peak_allocated_bytes: u64,
    /// Peak bytes reserved from the device (what the pool really holds).
    pub peak_reserved_bytes: u64,
    /// Peak allocated / peak reserved.
    pub efficiency: f64,
    /// Segments reserved from the device.
    pub device_allocs: u64,
    /// Segments released to the device.
    pub device_frees: u64,
    /// Requests that failed after the retry.
    pub ooms: u64,
    /// Out-of-memory retries (cache released, allocation tried again).
    pub retries: u64,
    /// Allocation latency through the pool.
    pub alloc_ns: LatencyView,
    /// Free latency through the pool.
    pub free_ns: LatencyView,
    /// Operations per second of allocate/free time.
    pub ops_per_sec: f64,
    /// Operations replayed: all of the workload's, unless interrupted.
    pub ops_replayed: u64,
    /// Reserved bytes at the end of the recording (traces) or of the run.
    pub reserved_end_bytes: u64,
    /// Buffers that did not read back as written.
    pub corruptions: u64,
}

/// The raw baseline's results.
#[derive(Debug, Clone, Serialize)]
pub struct RawView {
    /// Allocation latency straight on the device.
    pub alloc_ns: LatencyView,
    /// Free latency straight on the device.
    pub free_ns: LatencyView,
    /// Operations per second of allocate/free time.
    pub ops_per_sec: f64,
    /// Allocations the device refused.
    pub ooms: u64,
    /// Buffers that did not read back as written.
    pub corruptions: u64,
}

/// The recording allocator's figures beside gpumem's.
#[derive(Debug, Clone, Serialize)]
pub struct ReferenceView {
    /// Who recorded the trace.
    pub source: String,
    /// What it reserved: its peak (segment events) or at snapshot time.
    pub peak_reserved_bytes: u64,
    /// How that figure was obtained: `segment_events` or `snapshot_segments`.
    pub measured_as: String,
    /// gpumem's figure to compare: peak reserved, or reserved when the recording ended.
    pub gpumem_reserved_bytes: u64,
}

pub use crate::workload::gates::{Gate, GateKind};
use crate::workload::native::NativeComparison;

/// A gate's figure as the tables print it: fractions to four places, a speedup to two with
/// its ×, nanoseconds whole with separators.
#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "nanoseconds are whole; a float cast saturates"
)]
pub fn gate_value(kind: GateKind, v: f64) -> String {
    match kind {
        GateKind::MinHitRate | GateKind::MaxFragmentation => format!("{v:.4}"),
        GateKind::MinSpeedup => format!("{v:.2}×"),
        GateKind::MaxP99Ns => format!("{} ns", thousands(v.round().max(0.0) as u64)),
        GateKind::MaxPeakReserved => format_bytes(v.round().max(0.0) as u64),
    }
}

/// The report (JSON schema: docs/json-schema.md#bench-alloc).
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// The device replayed on.
    pub device: DeviceView,
    /// The workload replayed.
    pub workload: WorkloadView,
    /// The pool's results.
    pub pool: PoolView,
    /// Raw replay results, unless --no-raw.
    pub raw: Option<RawView>,
    /// Raw time / pool time.
    pub speedup: Option<f64>,
    /// A PyTorch trace's own reserved figure.
    pub reference: Option<ReferenceView>,
    /// `--compare native`: the pool beside the device's own allocator, with ratios.
    pub native: Option<NativeComparison>,
    /// Every CI gate given, in flag order (with --runs, judged on the medians).
    pub gates: Vec<Gate>,
    /// Each figure over the measured runs (with --runs above 1 or --warmup).
    pub runs: Option<RunsView>,
    /// This run against --baseline.
    pub comparison: Option<ComparisonView>,
    /// Whether the replay finished, every gate passed and nothing was corrupted or leaked.
    pub passed: bool,
    /// Whether SIGINT or SIGTERM stopped the replay early (the figures cover what ran).
    pub interrupted: bool,
    /// Timeline samples (not in JSON; drawn with --timeline).
    #[serde(skip)]
    pub timeline: Vec<Sample>,
    /// The recording allocator's reserved bytes over the trace (drawn with --timeline).
    #[serde(skip)]
    pub reference_timeline: Vec<(u64, u64)>,
}

fn ops_per_sec(ops: u64, busy_ns: u64) -> f64 {
    if busy_ns == 0 {
        0.0
    } else {
        ops as f64 * 1e9 / busy_ns as f64
    }
}

impl PoolView {
    /// From a pool run.
    pub fn new(run: &PoolRun, preset: &'static str) -> Self {
        let s = &run.stats;
        PoolView {
            preset,
            usable_limit_bytes: run.usable_limit,
            limit_rule: run.limit_rule,
            expandable_segments: run.expandable,
            hit_rate: run.recorded_hit_rate.unwrap_or(s.hit_rate()),
            hit_rate_overall: s.hit_rate(),
            fragmentation_peak: run.fragmentation_peak,
            fragmentation_end: run.fragmentation_end,
            peak_allocated_bytes: s.peak_allocated_bytes,
            peak_reserved_bytes: s.peak_reserved_bytes,
            efficiency: s.efficiency(),
            device_allocs: s.device_allocs,
            device_frees: s.device_frees,
            ooms: s.ooms,
            retries: s.retries,
            alloc_ns: run.alloc_ns.into(),
            free_ns: run.free_ns.into(),
            ops_per_sec: ops_per_sec(run.ops, run.busy_ns),
            ops_replayed: run.ops,
            reserved_end_bytes: run.reserved_end,
            corruptions: run.corruptions,
        }
    }
}

/// The rule behind a pool's usable limit, as a reader would name it.
fn limit_rule_text(rule: LimitRule) -> String {
    match rule {
        LimitRule::MemoryFraction => "memory fraction of the total".into(),
        LimitRule::MinFree => "total less the minimum kept free".into(),
        LimitRule::MaxPool => "the configured pool cap".into(),
        LimitRule::DriverReserve { reserve_bytes } => format!(
            "total less a {} driver and context reserve",
            format_bytes(reserve_bytes)
        ),
    }
}

impl RawView {
    /// From a raw run.
    pub fn new(run: &RawRun) -> Self {
        RawView {
            alloc_ns: run.alloc_ns.into(),
            free_ns: run.free_ns.into(),
            ops_per_sec: ops_per_sec(run.ops, run.busy_ns),
            ooms: run.failed_allocs,
            corruptions: run.corruptions,
        }
    }
}

impl MetricSource for BenchReport {
    fn metric(&self, metric: crate::workload::baseline::Metric) -> Option<f64> {
        use crate::workload::baseline::Metric;
        let p = &self.pool;
        Some(match metric {
            Metric::OpsPerSec => p.ops_per_sec,
            Metric::Speedup => self.speedup?,
            Metric::HitRate => p.hit_rate,
            Metric::Fragmentation => p.fragmentation_peak,
            Metric::PeakReserved => p.peak_reserved_bytes as f64,
            Metric::AllocP50Ns => p.alloc_ns.p50 as f64,
            Metric::AllocP99Ns => p.alloc_ns.p99 as f64,
            Metric::FreeP99Ns => p.free_ns.p99 as f64,
        })
    }
}

impl Report for BenchReport {
    fn render_text(&self, style: &Style) -> String {
        let mut text = String::new();
        if self.interrupted {
            let _ = writeln!(
                text,
                "{}",
                style.paint(
                    "INTERRUPTED: partial report of the operations that ran",
                    false
                )
            );
        }
        let d = &self.device;
        let simulated = if d.simulated {
            " — SIMULATED: no memory was reserved"
        } else {
            ""
        };
        let _ = writeln!(
            text,
            "{} on {}:{} ({}, {}){simulated}\n{} operations, {} allocations{}\n",
            one_line(&self.workload.name),
            d.backend,
            d.index,
            one_line(&d.name),
            format_bytes(d.total_bytes),
            if self.interrupted {
                format!(
                    "{} of {}",
                    thousands(self.pool.ops_replayed),
                    thousands(self.workload.ops)
                )
            } else {
                thousands(self.workload.ops)
            },
            thousands(u64::from(self.workload.allocations)),
            if self.workload.preexisting > 0 {
                format!(
                    " ({} from before the recording)",
                    thousands(u64::from(self.workload.preexisting))
                )
            } else {
                String::new()
            },
        );
        let _ = writeln!(text, "{}", self.latency_table(style));
        let _ = writeln!(text, "{}", self.metrics_table(style));
        if let Some(n) = &self.native {
            let _ = writeln!(text, "{}", native_table(n, style));
            let _ = writeln!(text, "{}", native_note(n));
        }
        if let Some(r) = &self.reference {
            let verdict = r.gpumem_reserved_bytes <= r.peak_reserved_bytes;
            let _ = writeln!(
                text,
                "{} reserved {} ({}); gpumem reserved {} on the same trace {}",
                r.source,
                format_bytes(r.peak_reserved_bytes),
                r.measured_as.replace('_', " "),
                format_bytes(r.gpumem_reserved_bytes),
                style.paint(if verdict { "(not more)" } else { "(more)" }, verdict)
            );
        }
        if let Some(runs) = &self.runs {
            let _ = writeln!(
                text,
                "{} measured runs{}{}, the tables above from the last:\n{}",
                runs.runs,
                if runs.warmup > 0 {
                    format!(" after {} warm-up", runs.warmup)
                } else {
                    String::new()
                },
                runs.adaptive
                    .as_ref()
                    .map(|a| format!(" ({})", a.summary()))
                    .unwrap_or_default(),
                runs.table(style)
            );
        }
        if let Some(c) = &self.comparison {
            let _ = write!(text, "{}", c.render(style));
        }
        for g in &self.gates {
            let _ = writeln!(
                text,
                "{} --{}: measured {}, threshold {}",
                style.paint(if g.passed { "PASS" } else { "FAIL" }, g.passed),
                g.name,
                gate_value(g.kind, g.measured),
                gate_value(g.kind, g.threshold)
            );
        }
        text
    }
}

impl BenchReport {
    /// Latency, throughput and counts, pool beside raw.
    fn latency_table(&self, style: &Style) -> comfy_table::Table {
        let p = &self.pool;
        let mut t = new_table(style, &["", "pool", "raw"]);
        let raw = self.raw.as_ref();
        let rawv = |f: &dyn Fn(&RawView) -> String| raw.map(f).unwrap_or_else(|| "-".into());
        t.add_row(vec![
            "alloc p50 / p99".into(),
            format!("{} / {}", ns(p.alloc_ns.p50), ns(p.alloc_ns.p99)),
            rawv(&|r| format!("{} / {}", ns(r.alloc_ns.p50), ns(r.alloc_ns.p99))),
        ]);
        t.add_row(vec![
            "alloc max".into(),
            ns(p.alloc_ns.max),
            rawv(&|r| ns(r.alloc_ns.max)),
        ]);
        t.add_row(vec![
            "free p50 / p99".into(),
            format!("{} / {}", ns(p.free_ns.p50), ns(p.free_ns.p99)),
            rawv(&|r| format!("{} / {}", ns(r.free_ns.p50), ns(r.free_ns.p99))),
        ]);
        t.add_row(vec![
            "ops/s".into(),
            per_sec(p.ops_per_sec),
            rawv(&|r| per_sec(r.ops_per_sec)),
        ]);
        t.add_row(vec![
            "device allocations".into(),
            thousands(p.device_allocs),
            rawv(&|_| thousands(u64::from(self.workload.allocations))),
        ]);
        t.add_row(vec![
            "out of memory".into(),
            p.ooms.to_string(),
            rawv(&|r| r.ooms.to_string()),
        ]);
        t.add_row(vec![
            "corruptions".into(),
            p.corruptions.to_string(),
            rawv(&|r| r.corruptions.to_string()),
        ]);
        t
    }

    /// The pool's own figures: preset, limit, hit rate, fragmentation, peaks, speedup.
    fn metrics_table(&self, style: &Style) -> comfy_table::Table {
        let p = &self.pool;
        let mut m = new_table(style, &["pool metric", "value"]);
        m.add_row(vec!["preset".into(), p.preset.to_string()]);
        let expandable = match p.expandable_segments {
            Some(true) => Some("yes"),
            Some(false) => {
                Some("unavailable: the device has no virtual memory; ordinary segments used")
            }
            None => None,
        };
        if let Some(text) = expandable {
            m.add_row(vec!["expandable segments".to_string(), text.to_string()]);
        }
        m.add_row(vec![
            "usable limit".into(),
            format!(
                "{} ({})",
                format_bytes(p.usable_limit_bytes),
                limit_rule_text(p.limit_rule)
            ),
        ]);
        if (p.hit_rate - p.hit_rate_overall).abs() > f64::EPSILON {
            m.add_row(vec![
                "hit rate (recorded / overall)".into(),
                format!("{:.4} / {:.4}", p.hit_rate, p.hit_rate_overall),
            ]);
        } else {
            m.add_row(vec!["hit rate".into(), format!("{:.4}", p.hit_rate)]);
        }
        m.add_row(vec![
            "fragmentation at peak / end".into(),
            format!("{:.4} / {:.4}", p.fragmentation_peak, p.fragmentation_end),
        ]);
        m.add_row(vec![
            "peak allocated".into(),
            format_bytes(p.peak_allocated_bytes),
        ]);
        m.add_row(vec![
            "peak reserved".into(),
            format_bytes(p.peak_reserved_bytes),
        ]);
        m.add_row(vec![
            "efficiency (allocated / reserved)".into(),
            format!("{:.4}", p.efficiency),
        ]);
        m.add_row(vec!["retries".into(), p.retries.to_string()]);
        if let Some(s) = self.speedup {
            m.add_row(vec!["speedup over raw".into(), format!("{s:.2}×")]);
        }
        m
    }
}

/// Why a finished replay fails CI, in one line: corrupted buffers, buffers still live, or the
/// gates it missed; `None` when it passes.
pub fn failure_text(corruptions: u64, leaked: u64, gates: &[Gate]) -> Option<String> {
    if corruptions > 0 {
        return Some(format!(
            "{corruptions} buffers did not read back as written"
        ));
    }
    if leaked > 0 {
        return Some(format!("{leaked} buffers were still live after the replay"));
    }
    let failed: Vec<String> = gates
        .iter()
        .filter(|g| !g.passed)
        .map(|g| {
            format!(
                "--{} (measured {}, threshold {})",
                g.name,
                gate_value(g.kind, g.measured),
                gate_value(g.kind, g.threshold)
            )
        })
        .collect();
    (!failed.is_empty()).then(|| format!("gate failed: {}", failed.join("; ")))
}

impl BenchReport {
    /// The report's figures from the runs (gates and verdict are filled in by the caller).
    pub fn from_runs(
        device: DeviceView,
        workload: &Workload,
        pool_run: &PoolRun,
        raw_run: Option<&RawRun>,
        preset: Preset,
        arena: Arena,
    ) -> BenchReport {
        let reference = workload.reference.and_then(|r| {
            let (figure, how, ours) = match (r.peak_reserved_bytes, r.snapshot_reserved_bytes) {
                (Some(peak), _) => (peak, "segment_events", pool_run.stats.peak_reserved_bytes),
                (None, Some(snap)) => (snap, "snapshot_segments", pool_run.reserved_end),
                _ => return None,
            };
            Some(ReferenceView {
                source: r.source.into(),
                peak_reserved_bytes: figure,
                measured_as: how.into(),
                gpumem_reserved_bytes: ours,
            })
        });
        BenchReport {
            device,
            workload: WorkloadView {
                name: workload.name.clone(),
                ops: workload.ops.len() as u64,
                seed: workload.seed,
                allocations: workload.allocations,
                preexisting: workload.preexisting,
                skipped: workload.skipped.clone(),
                max_live_bytes: workload.seed.map(|_| arena.max_live),
            },
            pool: PoolView::new(pool_run, preset.name()),
            raw: raw_run.map(RawView::new),
            speedup: raw_run.map(|r| r.busy_ns as f64 / pool_run.busy_ns.max(1) as f64),
            reference,
            native: None,
            gates: Vec::new(),
            runs: None,
            comparison: None,
            passed: false,
            interrupted: false,
            timeline: pool_run.timeline.clone(),
            reference_timeline: workload.reference_reserved.clone(),
        }
    }
}

/// Which allocator the native side ran, and where its peak reserved comes from.
fn native_note(n: &NativeComparison) -> String {
    let api = n.allocator.name();
    match n.driver_peaks {
        Some(p) => format!(
            "native: {api}, its peak reserved as the driver's pool reports it \
             (CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH; {} at most handed out)",
            format_bytes(p.used)
        ),
        None => format!(
            "native: {api}, one device allocation per request; peak reserved counted at \
             each allocation's size"
        ),
    }
}

/// `--compare native`: each figure for the pool and the native allocator, and pool ÷ native.
fn native_table(n: &NativeComparison, style: &Style) -> comfy_table::Table {
    let mut t = new_table(style, &["", "pool", "native", "pool ÷ native"]);
    let (p, d, r) = (&n.pool, &n.native, &n.ratios);
    let times = |v: f64| format!("{v:.2}×");
    let rows: [(&str, String, String, f64); 5] = [
        (
            "ops/s",
            per_sec(p.ops_per_sec),
            per_sec(d.ops_per_sec),
            r.ops_per_sec,
        ),
        (
            "alloc p50",
            ns(p.alloc_p50_ns),
            ns(d.alloc_p50_ns),
            r.alloc_p50,
        ),
        (
            "alloc p99",
            ns(p.alloc_p99_ns),
            ns(d.alloc_p99_ns),
            r.alloc_p99,
        ),
        (
            "peak reserved",
            format_bytes(p.peak_reserved_bytes),
            format_bytes(d.peak_reserved_bytes),
            r.peak_reserved,
        ),
        (
            "reserved / live",
            format!("{:.2}", p.reserved_per_live),
            format!("{:.2}", d.reserved_per_live),
            r.reserved_per_live,
        ),
    ];
    for (label, pool, native, ratio) in rows {
        t.add_row(vec![label.into(), pool, native, times(ratio)]);
    }
    t.add_row(vec![
        "peak live".into(),
        format_bytes(p.peak_live_bytes),
        format_bytes(d.peak_live_bytes),
        String::new(),
    ]);
    t
}
