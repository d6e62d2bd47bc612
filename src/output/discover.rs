//! Rendering of `gpumem discover`: tables, and Prometheus gauges.

use std::fmt::Write as _;

use serde::Serialize;

use super::prometheus::escape_label;
use super::{new_table, Report, Style};
use super::{one_line, wrap_into};
use crate::backend::{BackendInfo, DeviceInfo, HostInfo, Recommendation, SameGpu};
use crate::units::format_bytes;

/// What `discover` found (JSON schema: docs/json-schema.md#discover).
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct DiscoverReport {
    /// The machine the report was made on.
    pub host: HostInfo,
    /// Every probed backend, available or not.
    pub backends: Vec<BackendInfo>,
    /// The best device, if any backend is available.
    pub recommended: Option<Recommendation>,
    /// GPUs listed again through a less preferred API (NVIDIA's OpenCL devices beside CUDA's).
    #[serde(default)]
    pub same_gpu: Vec<SameGpu>,
}

fn opt_bytes(v: Option<u64>) -> String {
    v.map(format_bytes).unwrap_or_else(|| "-".into())
}

impl Report for DiscoverReport {
    fn render_text(&self, style: &Style) -> String {
        let mut text = String::new();
        for info in self.backends.iter().filter(|b| b.available) {
            let (table, details) = device_table(info, style);
            let _ = writeln!(
                text,
                "{} ({:.0} ms)\n{table}",
                info.backend.name().to_uppercase(),
                info.probe_ms
            );
            for line in details {
                wrap_into(
                    &mut text,
                    &line,
                    usize::from(style.width.unwrap_or(u16::MAX)),
                );
            }
            text.push('\n');
        }
        for info in self.backends.iter().filter(|b| !b.available) {
            let mark = style.paint("✗", false);
            let line = format!(
                "{mark} {}: {}",
                info.backend.name(),
                one_line(info.reason.as_deref().unwrap_or("unavailable"))
            );
            wrap_into(
                &mut text,
                &line,
                usize::from(style.width.unwrap_or(u16::MAX)),
            );
        }
        if !text.is_empty() && !text.ends_with("\n\n") {
            text.push('\n');
        }
        for g in &self.same_gpu {
            let line = format!(
                "{}:{} is the GPU {}:{} drives (same UUID or PCI address)",
                g.backend, g.device, g.kept_backend, g.kept_device
            );
            wrap_into(
                &mut text,
                &line,
                usize::from(style.width.unwrap_or(u16::MAX)),
            );
        }
        match self.recommended {
            Some(r) => {
                let _ = writeln!(
                    text,
                    "Recommended backend: {} (device {})",
                    r.backend, r.device
                );
            }
            None => text.push_str("Recommended backend: none available\n"),
        }
        text
    }
}

/// One backend's devices: the table, and in a narrow terminal the columns that did not fit as
/// one line per device under it.
fn device_table(info: &BackendInfo, style: &Style) -> (comfy_table::Table, Vec<String>) {
    let narrow = style.narrow();
    let mut headers = vec!["#", "device", "type", "total", "free", "max alloc"];
    if !narrow {
        headers.extend(["unified", "capability", "driver", "pci bus"]);
    }
    let mut table = new_table(style, &headers);
    let mut details = Vec::new();
    for d in &info.devices {
        let free = match (d.free_bytes, d.free_scope) {
            (Some(free), Some(crate::backend::FreeScope::Process)) => {
                format!("{} (process)", format_bytes(free))
            }
            (free, _) => opt_bytes(free),
        };
        let unified = if d.unified_memory { "yes" } else { "no" };
        let capability = d.compute_capability.clone().unwrap_or_else(|| "-".into());
        let driver = d
            .driver_version
            .as_deref()
            .map_or("-".into(), |v| one_line(v).into_owned());
        let pci = d.pci_bus_id.clone().unwrap_or_else(|| "-".into());
        let mut row = vec![
            d.index.to_string(),
            one_line(&d.name).into_owned(),
            serde_json::to_value(d.device_type)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            format_bytes(d.total_bytes),
            free,
            opt_bytes(d.max_alloc_bytes),
        ];
        if narrow {
            let mut facts = vec![if d.unified_memory {
                "unified memory".to_string()
            } else {
                "own memory".to_string()
            }];
            facts.extend(d.compute_capability.clone());
            facts.extend(
                d.driver_version
                    .as_deref()
                    .map(|v| format!("driver {}", one_line(v))),
            );
            facts.extend(d.pci_bus_id.as_deref().map(|b| format!("pci bus {b}")));
            details.push(format!("device {}: {}", d.index, facts.join("; ")));
        } else {
            row.extend([unified.to_string(), capability, driver, pci]);
        }
        table.add_row(row);
        if let Some(n) = &d.nvml {
            let mig = match n.mig_enabled {
                Some(true) => ", MIG on",
                Some(false) => ", MIG off",
                None => "",
            };
            table.add_row(vec![
                String::new(),
                format!(
                    "nvml: {} used, {} reserved, {} processes{mig}",
                    format_bytes(n.used_bytes),
                    format_bytes(n.reserved_bytes),
                    n.processes.len()
                ),
            ]);
        }
    }
    (table, details)
}

/// Prometheus text exposition (for node_exporter's textfile collector).
pub fn prometheus(report: &DiscoverReport) -> String {
    let mut out = String::new();
    type Value = fn(&DeviceInfo) -> Option<u64>;
    let gauges: [(&str, &str, Value); 2] = [
        (
            "gpumem_device_memory_total_bytes",
            "Total device memory in bytes.",
            |d| Some(d.total_bytes),
        ),
        (
            "gpumem_device_memory_free_bytes",
            "Free device memory in bytes, where the backend reports it.",
            |d| d.free_bytes,
        ),
    ];
    for (name, help, value) in gauges {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
        for info in &report.backends {
            for d in &info.devices {
                if let Some(v) = value(d) {
                    let _ = writeln!(
                        out,
                        "{name}{{backend=\"{}\",device=\"{}\",name=\"{}\",uuid=\"{}\"}} {v}",
                        info.backend,
                        d.index,
                        escape_label(&d.name),
                        escape_label(d.uuid.as_deref().unwrap_or(""))
                    );
                }
            }
        }
    }
    let _ = writeln!(
        out,
        "# HELP gpumem_backend_available Whether a backend can be used (1) or not (0).\n# TYPE gpumem_backend_available gauge"
    );
    for info in &report.backends {
        let _ = writeln!(
            out,
            "gpumem_backend_available{{backend=\"{}\"}} {}",
            info.backend,
            u8::from(info.available)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{BackendKind, DeviceType};

    fn report() -> DiscoverReport {
        let mut d = DeviceInfo::new(0, "Card \"X\"", DeviceType::Gpu, 80 << 30);
        d.free_bytes = Some(79 << 30);
        d.uuid = Some("GPU-1".into());
        DiscoverReport {
            host: crate::backend::host_info(),
            backends: vec![
                BackendInfo {
                    backend: BackendKind::Cuda,
                    available: true,
                    reason: None,
                    devices: vec![d],
                    probe_ms: 1.0,
                },
                BackendInfo {
                    backend: BackendKind::Rocm,
                    available: false,
                    reason: Some("no devices".into()),
                    devices: vec![],
                    probe_ms: 0.0,
                },
            ],
            recommended: Some(Recommendation {
                backend: BackendKind::Cuda,
                device: 0,
            }),
            same_gpu: Vec::new(),
        }
    }

    #[test]
    fn prometheus_gauges_are_labelled_and_escaped() {
        let text = prometheus(&report());
        assert!(text.contains(
            "gpumem_device_memory_total_bytes{backend=\"cuda\",device=\"0\",name=\"Card \\\"X\\\"\",uuid=\"GPU-1\"} 85899345920"
        ));
        assert!(text.contains("gpumem_device_memory_free_bytes{backend=\"cuda\",device=\"0\""));
        assert!(text.contains("gpumem_backend_available{backend=\"rocm\"} 0"));
    }

    #[test]
    fn text_lists_unavailable_with_reason() {
        let text = report().render_text(&Style {
            color: false,
            width: None,
        });
        assert!(text.contains("✗ rocm: no devices"));
        assert!(text.contains("80.00 GiB"));
        assert!(text.contains("Recommended backend: cuda (device 0)"));
    }
}
