//! Rendering of `gpumem stress`.

use std::fmt::Write as _;

use serde::Serialize;

use super::one_line;
use super::{new_table, thousands, Report, Style};
use crate::units::format_bytes;
use crate::workload::stress::{PhaseNote, StressFailure, StressOutcome, StressPhase};

/// The device a stress run used.
#[derive(Debug, Clone, Serialize)]
pub struct StressDevice {
    /// `host` or a backend name.
    pub backend: String,
    /// Index within its backend.
    pub index: usize,
    /// Device name as its driver gives it.
    pub name: String,
    /// Device memory in bytes.
    pub total_bytes: u64,
}

/// The stress report (JSON schema: docs/json-schema.md#stress).
#[derive(Debug, Clone)]
pub struct StressReport {
    /// The device stressed.
    pub device: StressDevice,
    /// What the phases found.
    pub outcome: StressOutcome,
}

/// The JSON view: the outcome's counters plus its notes and failures in words.
#[derive(Serialize)]
struct StressJson<'a> {
    device: &'a StressDevice,
    #[serde(flatten)]
    outcome: &'a StressOutcome,
    phases: Vec<PhaseJson>,
    failures: Vec<String>,
}

#[derive(Serialize)]
struct PhaseJson {
    phase: StressPhase,
    ops: u64,
    duration_s: f64,
    passed: bool,
    notes: Vec<String>,
}

impl Serialize for StressReport {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        StressJson {
            device: &self.device,
            outcome: &self.outcome,
            phases: self
                .outcome
                .phases
                .iter()
                .map(|p| PhaseJson {
                    phase: p.phase,
                    ops: p.ops,
                    duration_s: p.duration_s,
                    passed: p.passed,
                    notes: p.notes.iter().map(note_text).collect(),
                })
                .collect(),
            failures: self.failure_lines(),
        }
        .serialize(serializer)
    }
}

fn note_text(n: &PhaseNote) -> String {
    match *n {
        PhaseNote::RampRefused { percent_of_limit } => format!(
            "the device refused 8 requests in a row at {percent_of_limit:.1} % of the limit, before Critical"
        ),
        PhaseNote::RampReached {
            buffers,
            step_bytes,
            pressure,
            callbacks,
        } => format!(
            "{buffers} buffers of {} to reach {pressure} pressure; {callbacks} callback calls",
            format_bytes(step_bytes)
        ),
        PhaseNote::ExhaustOutcomes {
            ooms,
            retries,
            fallbacks,
            typed_errors,
        } => format!(
            "{ooms} requests past the limit: {retries} retries, {fallbacks} served from CPU memory, {typed_errors} typed out-of-memory errors"
        ),
        PhaseNote::ExhaustNothingPastLimit => {
            "the device held every request; nothing went past the limit".into()
        }
        PhaseNote::Churn {
            threads,
            max_size_bytes,
            retries,
            fallbacks,
        } => format!(
            "{threads} threads, requests up to {}, {retries} retries and {fallbacks} CPU fallbacks so far",
            format_bytes(max_size_bytes)
        ),
        PhaseNote::RecoverCleanup {
            released_bytes,
            live_buffers,
            reserved_bytes,
        } => format!(
            "emergency clean-up released {}; {live_buffers} buffers and {} reserved left",
            format_bytes(released_bytes),
            format_bytes(reserved_bytes)
        ),
        PhaseNote::RecoverDeviceFree {
            before_bytes,
            after_bytes,
        } => format!(
            "device free {} before, {} after",
            format_bytes(before_bytes),
            format_bytes(after_bytes)
        ),
    }
}

/// One failed check in words.
pub fn failure_text(f: &StressFailure) -> String {
    match f {
        StressFailure::RampRefused { percent_of_limit } => format!(
            "ramp: the device refused 8 requests in a row at {percent_of_limit:.1} % of the limit, before Critical"
        ),
        StressFailure::RampOrder { seen } => format!(
            "ramp: pressure changes {seen:?}, expected Low→Medium→High→Critical once each"
        ),
        StressFailure::ExhaustUnretried { ooms, retries } => {
            format!("exhaust: {ooms} out-of-memory failures but only {retries} retries")
        }
        StressFailure::ExhaustUnaccounted {
            ooms,
            fallbacks,
            typed_errors,
        } => format!(
            "exhaust: {ooms} failures, but {fallbacks} fallbacks and {typed_errors} typed errors"
        ),
        StressFailure::LeakedBuffers { buffers, bytes } => {
            format!("leak: {buffers} buffers ({bytes} bytes) still live after recovery")
        }
        StressFailure::LeakedReserved { bytes } => {
            format!("leak: {bytes} bytes still reserved after empty_cache")
        }
        StressFailure::LeakedDeviceMemory {
            free_after,
            free_before,
            tolerance,
        } => format!(
            "leak: device free memory {free_after} bytes after, {free_before} before (tolerance {tolerance})"
        ),
        StressFailure::LeakedDeviceBytes {
            held_after,
            held_before,
        } => format!(
            "leak: the device holds {held_after} bytes for gpumem after recovery, {held_before} before"
        ),
        StressFailure::Corruption { buffers } => {
            format!("corruption: {buffers} buffers did not read back as written")
        }
        StressFailure::Escaped { count, first } => format!(
            "escaped: {count} failures reached the caller as errors other than out-of-memory ({first})"
        ),
    }
}

impl StressReport {
    /// Every failed check in words, in the order found.
    pub fn failure_lines(&self) -> Vec<String> {
        self.outcome.failures.iter().map(failure_text).collect()
    }

    /// The report for `device` from a finished (or interrupted) run.
    pub fn new(
        backend: String,
        index: usize,
        name: String,
        total_bytes: u64,
        outcome: StressOutcome,
    ) -> Self {
        StressReport {
            device: StressDevice {
                backend,
                index,
                name,
                total_bytes,
            },
            outcome,
        }
    }
}

impl Report for StressReport {
    fn render_text(&self, style: &Style) -> String {
        let o = &self.outcome;
        let mut text = String::new();
        let _ = writeln!(
            text,
            "stress on {}:{} ({}, {})\n",
            self.device.backend,
            self.device.index,
            one_line(&self.device.name),
            format_bytes(self.device.total_bytes)
        );
        let mut t = new_table(style, &["phase", "ops", "seconds", "result", "notes"]);
        for p in &o.phases {
            t.add_row(vec![
                comfy_table::Cell::new(p.phase.name()),
                comfy_table::Cell::new(thousands(p.ops)),
                comfy_table::Cell::new(format!("{:.2}", p.duration_s)),
                style.verdict(if p.passed { "pass" } else { "FAIL" }, p.passed),
                comfy_table::Cell::new(
                    p.notes.iter().map(note_text).collect::<Vec<_>>().join("\n"),
                ),
            ]);
        }
        let _ = writeln!(text, "{t}");
        // One chain per phase: the ramp's must read low→medium→high→critical.
        let mut per_phase: Vec<(String, Vec<String>)> = Vec::new();
        for t in &o.pressure_transitions {
            let phase = t.phase.name();
            match per_phase.last_mut() {
                Some((p, chain)) if *p == phase => chain.push(t.to.to_string()),
                _ => per_phase.push((
                    phase.to_string(),
                    vec![t.from.to_string(), t.to.to_string()],
                )),
            }
        }
        let transitions: Vec<String> = per_phase
            .iter()
            .map(|(p, chain)| {
                if chain.len() <= 5 {
                    format!("{p}: {}", chain.join("→"))
                } else {
                    format!("{p}: {} changes", chain.len() - 1)
                }
            })
            .collect();
        let s = checks_table(o, &transitions, style);
        let _ = writeln!(text, "{s}");
        let verdict = match (o.interrupted, o.failures.is_empty()) {
            (true, true) => "INTERRUPTED: partial report; every check so far passed".to_string(),
            (false, true) => "PASSED".to_string(),
            (interrupted, false) => format!(
                "{}FAILED: {}",
                if interrupted {
                    "INTERRUPTED (partial report) and "
                } else {
                    ""
                },
                self.failure_lines().join("; ")
            ),
        };
        let _ = writeln!(text, "{}", style.paint(&verdict, o.passed));
        text
    }
}

/// The run's checks and their values.
fn checks_table(o: &StressOutcome, transitions: &[String], style: &Style) -> comfy_table::Table {
    let mut s = new_table(style, &["check", "value"]);
    s.add_row(vec!["operations".to_string(), thousands(o.ops)]);
    s.add_row(vec![
        "peak pressure".to_string(),
        o.peak_pressure.to_string(),
    ]);
    s.add_row(vec!["pressure changes".to_string(), transitions.join("; ")]);
    s.add_row(vec![
        "out of memory / retries".to_string(),
        format!("{} / {}", thousands(o.ooms), thousands(o.retries)),
    ]);
    s.add_row(vec![
        "CPU fallbacks / typed OOM errors".to_string(),
        format!(
            "{} / {}",
            thousands(o.cpu_fallbacks),
            thousands(o.oom_errors)
        ),
    ]);
    s.add_row(vec![
        "injected failures".to_string(),
        thousands(o.injected_failures),
    ]);
    s.add_row(vec!["corruptions".to_string(), thousands(o.corruptions)]);
    s.add_row(vec![
        "leaked buffers / bytes".to_string(),
        format!(
            "{} / {}",
            thousands(o.leaked_buffers),
            format_bytes(o.leaked_bytes)
        ),
    ]);
    s.add_row(vec![
        if o.free_compared {
            "device free before / after"
        } else {
            "device free before / after (host RAM: not compared)"
        }
        .to_string(),
        format!(
            "{} / {}",
            format_bytes(o.device_free_before),
            format_bytes(o.device_free_after)
        ),
    ]);
    if let (Some(before), Some(after)) = (o.device_held_before, o.device_held_after) {
        s.add_row(vec![
            "held on the device before / after".to_string(),
            format!("{} / {}", format_bytes(before), format_bytes(after)),
        ]);
    }
    s
}
