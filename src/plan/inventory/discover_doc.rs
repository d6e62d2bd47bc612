//! `gpumem discover --json` documents as inventories: the devices a saved discovery lists,
//! each GPU once.

use serde::Deserialize;

use super::{listed, typed, MAX_NODE_DEVICES};
use crate::backend::{BackendInfo, BackendKind, DeviceInfo, DeviceType};
use crate::plan::Candidate;

// What the planner needs of a discover document; everything else is optional or ignored, so a
// hand-written file of a few lines is enough.
#[derive(Debug, Deserialize)]
struct DiscoverDoc {
    schema_version: Option<u32>,
    host: Option<DocHost>,
    backends: Vec<DocBackend>,
}

#[derive(Debug, Deserialize)]
struct DocHost {
    hostname: Option<String>,
}

#[derive(Debug, Deserialize)]
struct DocBackend {
    backend: BackendKind,
    #[serde(default = "yes")]
    available: bool,
    #[serde(default)]
    devices: Vec<DocDevice>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize)]
struct DocDevice {
    index: Option<usize>,
    name: String,
    device_type: Option<DeviceType>,
    total_bytes: u64,
    free_bytes: Option<u64>,
    vulkan_limits: Option<crate::device::VulkanLimits>,
    #[serde(default)]
    unified_memory: bool,
    uuid: Option<String>,
    pci_bus_id: Option<String>,
    api_total_bytes: Option<u64>,
}

/// The document's GPUs listed again through a less preferred API, as discovery finds them.
fn listed_again(doc: &DiscoverDoc) -> Vec<crate::backend::SameGpu> {
    let as_probed: Vec<BackendInfo> = doc
        .backends
        .iter()
        .map(|b| BackendInfo {
            backend: b.backend,
            available: b.available,
            reason: None,
            probe_ms: 0.0,
            devices: b
                .devices
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    let kind = d.device_type.unwrap_or(DeviceType::Gpu);
                    let mut found = DeviceInfo::new(d.index.unwrap_or(i), &d.name, kind, 0);
                    found.uuid.clone_from(&d.uuid);
                    found.pci_bus_id.clone_from(&d.pci_bus_id);
                    found
                })
                .collect(),
        })
        .collect();
    crate::backend::same_gpus(&as_probed)
}

pub(super) fn discover_document(
    value: &serde_json::Value,
    file_host: &str,
) -> Result<Vec<Candidate>, String> {
    let doc: DiscoverDoc = typed(value)?;
    if let Some(v) = doc.schema_version.filter(|&v| v != 1) {
        return Err(format!(
            "field 'schema_version': {v} is not supported (1 is)"
        ));
    }
    let again = listed_again(&doc);
    let host = doc
        .host
        .and_then(|h| h.hostname)
        .unwrap_or_else(|| file_host.to_string());
    let mut out = Vec::new();
    for b in doc
        .backends
        .iter()
        .filter(|b| b.available && b.backend != BackendKind::Nvml)
    {
        for (i, d) in b.devices.iter().enumerate() {
            let index = d.index.unwrap_or(i);
            if again
                .iter()
                .any(|s| s.backend == b.backend && s.device == index)
            {
                continue;
            }
            if out.len() >= MAX_NODE_DEVICES {
                return Err(format!(
                    "field 'backends': more than {MAX_NODE_DEVICES} devices on one host"
                ));
            }
            let by_backend = if b.backend == BackendKind::Cpu {
                DeviceType::Cpu
            } else {
                DeviceType::Gpu
            };
            out.push(Candidate {
                vulkan_limits: d.vulkan_limits,
                unified_memory: d.unified_memory,
                ..listed(
                    &host,
                    b.backend,
                    index,
                    &d.name,
                    d.device_type.unwrap_or(by_backend),
                    d.api_total_bytes.unwrap_or(d.total_bytes),
                    d.free_bytes,
                )
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_discovery_plans_each_gpu_once() {
        // The H200 machine's `discover --json`, cut to the fields that matter: the GPU through
        // CUDA and again through NVIDIA's OpenCL ICD (UUID without `GPU-`), and PoCL's CPU.
        let doc = serde_json::json!({"schema_version": 1, "backends": [
            {"backend": "cuda", "devices": [{"index": 0, "name": "NVIDIA H200",
                "total_bytes": 150_109_880_320u64, "free_bytes": 149_557_411_840u64,
                "uuid": "GPU-08d873ee-b646-1882-dc8e-d265043812d2", "pci_bus_id": "0000:00:06.0"}]},
            {"backend": "opencl", "devices": [
                {"index": 0, "name": "cpu-skylake", "device_type": "cpu", "total_bytes": 3u64 << 30},
                {"index": 1, "name": "NVIDIA H200", "total_bytes": 150_109_880_320u64,
                 "uuid": "08d873ee-b646-1882-dc8e-d265043812d2", "pci_bus_id": "0000:00:06.0"}]}]});
        let found = discover_document(&doc, "h200").unwrap();
        let names: Vec<_> = found.iter().map(|c| (c.backend, c.device)).collect();
        assert_eq!(names, [(BackendKind::Cuda, 0), (BackendKind::Opencl, 0)]);
    }
}
