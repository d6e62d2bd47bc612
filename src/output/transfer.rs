//! Rendering of `bench-alloc --workload transfer`.

use std::fmt::Write as _;

use serde::Serialize;

use super::bench::{gate_value, DeviceView, Gate};
use super::{new_table, one_line, Report, Style};
use crate::units::format_bytes;
use crate::workload::transfer::{DirectionResult, TransferRun};

/// The transfer benchmark's report (JSON schema: docs/json-schema.md#bench-alloc-transfer).
#[derive(Debug, Clone, Serialize)]
pub struct TransferReport {
    /// The device measured.
    pub device: DeviceView,
    /// Always `transfer`.
    pub workload: &'static str,
    /// What was measured.
    pub transfer: TransferRun,
    /// CI gates (`--min-speedup` reads the smaller of the two directions' speedups).
    pub gates: Vec<Gate>,
    /// Whether the runs finished, every gate passed and every byte read back as written.
    pub passed: bool,
    /// Whether SIGINT or SIGTERM cut the runs short.
    pub interrupted: bool,
}

fn gbps(bytes_per_sec: f64) -> String {
    format!("{:.2} GB/s", bytes_per_sec / 1e9)
}

impl Report for TransferReport {
    fn render_text(&self, style: &Style) -> String {
        let t = &self.transfer;
        let d = &self.device;
        let mut text = String::new();
        if self.interrupted {
            let _ = writeln!(
                text,
                "{}",
                style.paint(
                    "INTERRUPTED: partial report of the transfers that finished",
                    false
                )
            );
        }
        let _ = writeln!(
            text,
            "transfer on {}:{} ({}, {}): {} each way in {} chunks, best of {}\n",
            d.backend,
            d.index,
            one_line(&d.name),
            format_bytes(d.total_bytes),
            format_bytes(t.size),
            format_bytes(t.chunk),
            t.runs
        );
        let mut table = new_table(
            style,
            &[
                "direction",
                "blocking",
                "double-buffered",
                "speedup",
                "overlap",
            ],
        );
        for (name, r) in [("host → device", &t.upload), ("device → host", &t.download)] {
            let r: &DirectionResult = r;
            table.add_row(vec![
                name.to_string(),
                gbps(r.blocking_bytes_per_sec),
                gbps(r.double_bytes_per_sec),
                format!("{:.2}×", r.speedup),
                format!("{:.0} %", r.overlap * 100.0),
            ]);
        }
        let _ = writeln!(text, "{table}");
        let _ = writeln!(
            text,
            "double-buffered copies: {}",
            if t.device_async {
                "the device's own asynchronous copies (a queue or stream of their own)"
            } else {
                "blocking copies on a transfer thread"
            }
        );
        let _ = writeln!(
            text,
            "{}",
            style.paint(
                &format!("{} bytes did not read back as written", t.corruptions),
                t.corruptions == 0
            )
        );
        for g in &self.gates {
            let _ = writeln!(
                text,
                "{}",
                style.paint(
                    &format!(
                        "--{} {}: measured {}, threshold {}",
                        g.name,
                        if g.passed { "passed" } else { "FAILED" },
                        gate_value(g.kind, g.measured),
                        gate_value(g.kind, g.threshold)
                    ),
                    g.passed
                )
            );
        }
        text
    }
}

/// Why a finished transfer benchmark fails CI, in one line: bytes that did not read back as
/// written, or the first gate it missed; `None` when it passes.
pub fn failure_text(corruptions: u64, gates: &[Gate]) -> Option<String> {
    if corruptions > 0 {
        return Some(format!("{corruptions} bytes did not read back as written"));
    }
    gates.iter().find(|g| !g.passed).map(|g| {
        format!(
            "--{} (measured {}, threshold {})",
            g.name,
            gate_value(g.kind, g.measured),
            gate_value(g.kind, g.threshold)
        )
    })
}
