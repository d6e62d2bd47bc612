//! Rendering of `gpumem stress`.

use std::fmt::Write as _;

use serde::Serialize;

use super::{new_table, Report, Style};
use crate::units::format_bytes;
use crate::workload::stress::StressOutcome;

/// The device a stress run used.
#[derive(Debug, Clone, Serialize)]
pub struct StressDevice {
    /// `host` or a backend name.
    pub backend: String,
    /// Index.
    pub index: usize,
    /// Name.
    pub name: String,
    /// Total bytes.
    pub total_bytes: u64,
}

/// The stress report (JSON schema: docs/json-schema.md#stress).
#[derive(Debug, Clone, Serialize)]
pub struct StressReport {
    /// The device.
    pub device: StressDevice,
    /// What happened.
    #[serde(flatten)]
    pub outcome: StressOutcome,
}

impl StressReport {
    /// Builds the report.
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
            self.device.name,
            format_bytes(self.device.total_bytes)
        );
        let mut t = new_table(style, &["phase", "ops", "seconds", "result", "notes"]);
        for p in &o.phases {
            t.add_row(vec![
                comfy_table::Cell::new(format!("{:?}", p.phase).to_lowercase()),
                comfy_table::Cell::new(p.ops),
                comfy_table::Cell::new(format!("{:.2}", p.duration_s)),
                style.verdict(if p.passed { "pass" } else { "FAIL" }, p.passed),
                comfy_table::Cell::new(p.notes.join("\n")),
            ]);
        }
        let _ = writeln!(text, "{t}");
        // One chain per phase: the ramp's must read low→medium→high→critical.
        let mut per_phase: Vec<(String, Vec<String>)> = Vec::new();
        for t in &o.pressure_transitions {
            let phase = format!("{:?}", t.phase).to_lowercase();
            match per_phase.last_mut() {
                Some((p, chain)) if *p == phase => chain.push(t.to.to_string()),
                _ => per_phase.push((phase, vec![t.from.to_string(), t.to.to_string()])),
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
        let mut s = new_table(style, &["check", "value"]);
        s.add_row(vec!["operations".to_string(), o.ops.to_string()]);
        s.add_row(vec![
            "peak pressure".to_string(),
            o.peak_pressure.to_string(),
        ]);
        s.add_row(vec!["pressure changes".to_string(), transitions.join("; ")]);
        s.add_row(vec![
            "out of memory / retries".to_string(),
            format!("{} / {}", o.ooms, o.retries),
        ]);
        s.add_row(vec![
            "CPU fallbacks / typed OOM errors".to_string(),
            format!("{} / {}", o.cpu_fallbacks, o.oom_errors),
        ]);
        s.add_row(vec![
            "injected failures".to_string(),
            o.injected_failures.to_string(),
        ]);
        s.add_row(vec!["corruptions".to_string(), o.corruptions.to_string()]);
        s.add_row(vec![
            "leaked buffers / bytes".to_string(),
            format!("{} / {}", o.leaked_buffers, o.leaked_bytes),
        ]);
        s.add_row(vec![
            "device free before / after".to_string(),
            format!(
                "{} / {}",
                format_bytes(o.device_free_before),
                format_bytes(o.device_free_after)
            ),
        ]);
        let _ = writeln!(text, "{s}");
        if o.interrupted {
            let _ = writeln!(text, "Interrupted: partial report.");
        }
        let verdict = if o.passed {
            "PASSED".to_string()
        } else {
            format!("FAILED: {}", o.failures.join("; "))
        };
        let _ = writeln!(text, "{}", style.paint(&verdict, o.passed));
        text
    }
}
