//! `bench-alloc` and `stress` as Prometheus gauges (`--export-prometheus FILE`), for
//! node_exporter's textfile collector: the file is replaced atomically, as that collector needs.

use std::fmt::Write as _;

use super::bench::BenchReport;
use super::stress::StressReport;

/// A label value with `\`, `"` and newlines escaped, as the exposition format requires.
pub(super) fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// One sample of a gauge: its labels (without braces) and its value.
type Sample = (String, f64);

/// Writes one gauge family: its HELP and TYPE lines, then a sample per `(labels, value)`.
fn family(out: &mut String, name: &str, help: &str, samples: &[Sample]) {
    if samples.is_empty() {
        return;
    }
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
    for (labels, value) in samples {
        let _ = writeln!(out, "{name}{{{labels}}} {value}");
    }
}

fn flag(b: bool) -> f64 {
    if b {
        1.0
    } else {
        0.0
    }
}

/// Operations per second and allocation latency quantiles of the pool's path, and the raw one
/// unless it was skipped.
fn path_samples(r: &BenchReport, base: &str) -> (Vec<Sample>, Vec<Sample>) {
    let p = &r.pool;
    let paths = std::iter::once(("pool", p.ops_per_sec, p.alloc_ns)).chain(
        r.raw
            .as_ref()
            .map(|raw| ("raw", raw.ops_per_sec, raw.alloc_ns)),
    );
    let mut rates = Vec::new();
    let mut latency = Vec::new();
    for (path, rate, ns) in paths {
        rates.push((format!("{base},path=\"{path}\""), rate));
        for (q, v) in [("0.5", ns.p50), ("0.99", ns.p99)] {
            latency.push((
                format!("{base},path=\"{path}\",quantile=\"{q}\""),
                v as f64 / 1e9,
            ));
        }
    }
    (rates, latency)
}

/// A bench-alloc run: verdict, pool figures, each gate and each compared metric.
pub fn bench_prometheus(r: &BenchReport) -> String {
    let base = format!(
        "device=\"{}:{}\",device_name=\"{}\",workload=\"{}\"",
        escape_label(&r.device.backend),
        r.device.index,
        escape_label(&r.device.name),
        escape_label(&r.workload.name)
    );
    let p = &r.pool;
    let mut out = String::new();
    let gauges: [(&str, &str, Option<f64>); 6] = [
        (
            "gpumem_bench_passed",
            "Whether the run finished and every gate passed (1) or not (0).",
            Some(flag(r.passed)),
        ),
        (
            "gpumem_bench_operations",
            "Allocations and frees replayed.",
            Some(r.workload.ops as f64),
        ),
        (
            "gpumem_bench_hit_rate",
            "Requests served without a device allocation, 0 to 1.",
            Some(p.hit_rate),
        ),
        (
            "gpumem_bench_fragmentation_peak",
            "Fragmentation when reserved memory peaked, 0 to 1.",
            Some(p.fragmentation_peak),
        ),
        (
            "gpumem_bench_peak_reserved_bytes",
            "Peak bytes the pool reserved from the device.",
            Some(p.peak_reserved_bytes as f64),
        ),
        (
            "gpumem_bench_speedup",
            "Raw replay time over pool replay time.",
            r.speedup,
        ),
    ];
    for (name, help, value) in gauges {
        if let Some(v) = value {
            family(&mut out, name, help, &[(base.clone(), v)]);
        }
    }
    let (rates, latency) = path_samples(r, &base);
    family(
        &mut out,
        "gpumem_bench_operations_per_second",
        "Operations per second of allocate/free time.",
        &rates,
    );
    family(
        &mut out,
        "gpumem_bench_alloc_latency_seconds",
        "Allocation latency quantiles.",
        &latency,
    );
    let gates: Vec<Sample> = r
        .gates
        .iter()
        .map(|g| (format!("{base},gate=\"{}\"", g.name), flag(g.passed)))
        .collect();
    family(
        &mut out,
        "gpumem_bench_gate_passed",
        "Whether each CI gate passed (1) or not (0).",
        &gates,
    );
    let changes: Vec<Sample> = r
        .comparison
        .iter()
        .flat_map(|c| &c.rows)
        .filter(|row| row.change_pct.is_finite())
        .map(|row| {
            (
                format!("{base},metric=\"{}\"", row.metric),
                row.change_pct / 100.0,
            )
        })
        .collect();
    family(
        &mut out,
        "gpumem_bench_baseline_change_ratio",
        "Change of each metric's median from the baseline's, (new - old) / old.",
        &changes,
    );
    out
}

/// A stress run: verdict, each phase's operations, time and verdict, and the failure counters.
pub fn stress_prometheus(r: &StressReport) -> String {
    let o = &r.outcome;
    let base = format!(
        "device=\"{}:{}\",device_name=\"{}\"",
        escape_label(&r.device.backend),
        r.device.index,
        escape_label(&r.device.name)
    );
    let mut out = String::new();
    let one = |v: f64| vec![(base.clone(), v)];
    let phase = |f: &dyn Fn(&crate::workload::stress::PhaseReport) -> f64| -> Vec<Sample> {
        o.phases
            .iter()
            .map(|p| (format!("{base},phase=\"{}\"", p.phase.name()), f(p)))
            .collect()
    };
    family(
        &mut out,
        "gpumem_stress_passed",
        "Whether every phase passed (1) or not (0).",
        &one(flag(o.passed && !o.interrupted)),
    );
    family(
        &mut out,
        "gpumem_stress_phase_passed",
        "Whether each phase passed (1) or not (0).",
        &phase(&|p| flag(p.passed)),
    );
    family(
        &mut out,
        "gpumem_stress_phase_operations",
        "Allocations and frees of each phase.",
        &phase(&|p| p.ops as f64),
    );
    family(
        &mut out,
        "gpumem_stress_phase_seconds",
        "Wall time of each phase.",
        &phase(&|p| p.duration_s),
    );
    let counters = [
        (
            "gpumem_stress_corruptions",
            "Buffers whose bytes did not read back as written.",
            o.corruptions,
        ),
        (
            "gpumem_stress_escaped_errors",
            "Errors other than out-of-memory that reached the caller.",
            o.escaped_errors,
        ),
        (
            "gpumem_stress_leaked_bytes",
            "Bytes still live after recovery.",
            o.leaked_bytes,
        ),
        (
            "gpumem_stress_cpu_fallbacks",
            "Requests served from CPU memory.",
            o.cpu_fallbacks,
        ),
        (
            "gpumem_stress_retries",
            "Allocations retried after the cache was released.",
            o.retries,
        ),
    ];
    for (name, help, v) in counters {
        family(&mut out, name, help, &one(v as f64));
    }
    out
}
