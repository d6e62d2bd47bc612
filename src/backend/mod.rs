//! The backend layer: which memory APIs exist on this machine, what their devices hold, and how
//! to name a device.
//!
//! Every command shares this layer. Each backend is one file implementing [`Backend`]; drivers
//! are loaded at run time, so every backend but Metal (macOS only) is always compiled in. A
//! backend that is missing, slow or broken is reported with its reason and never brings the tool
//! down: [`discover_backends`] probes them concurrently, each under a timeout.
//!
//! Ranking ([`best_available_backend`]): hardware GPUs (discrete or integrated) come first, the
//! one with the most free (else total) memory winning; then system RAM. Software devices that a
//! GPU API exposes on the CPU (PoCL, lavapipe) are listed but never recommended over the CPU
//! backend itself, because they are the same RAM behind an extra layer.

mod cpu;
mod cuda;
mod discover;
mod gpus;
mod host;
mod isolate;
mod metal;
mod nvml;
mod open;
mod opencl;
mod rocm;
mod sim;
mod spec;
mod vulkan;

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use cpu::{
    get_available_memory, get_cpu_name, get_system_memory, host_info, CpuBackend, HostInfo,
};
pub use cuda::{CudaBackend, CudaMemory};
pub use discover::{
    best_available_backend, discover_backends, discover_with, print_backend_summary, recommend,
    same_gpus, DiscoverOptions, Recommendation, SameGpu,
};
use discover::{probe_kind, CANCEL_POLL};
pub use gpus::{known_gpu, known_gpu_names, GpuVendor, KnownGpu, KNOWN_GPUS};
pub use host::HostDevice;
pub use isolate::{run_probe_child, Isolation, CHILD_ENV};
pub use metal::MetalBackend;
pub use nvml::{GpuProcess, NvmlBackend, NvmlView};
pub use open::{default_device_spec, open_device, open_device_within, OpenError};
pub use opencl::{OpenclBackend, OpenclMemory};
pub use rocm::{probe_sysfs, HipMemory, RocmBackend};
pub use sim::SimDevice;
pub use spec::{BackendKind, DeviceSpec, ParseDeviceSpecError};
pub use vulkan::{VulkanBackend, VulkanMemory, VulkanOptions};

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::device::DeviceMemory;

use crate::units::format_bytes;

/// What a device is, physically.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceType {
    /// A discrete GPU with its own memory.
    Gpu,
    /// A GPU sharing memory with the CPU.
    IntegratedGpu,
    /// The CPU, or a GPU API implemented in software on it (PoCL, lavapipe).
    Cpu,
    /// Anything else (accelerators, virtual devices).
    Other,
}

impl DeviceType {
    /// Hardware GPUs are the ones worth recommending over system RAM.
    pub fn is_hardware_gpu(self) -> bool {
        matches!(self, DeviceType::Gpu | DeviceType::IntegratedGpu)
    }
}

/// Whose free memory `free_bytes` describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FreeScope {
    /// Free on the whole device (CUDA `cuMemGetInfo`, NVML, sysfs, system RAM).
    Device,
    /// What this process may still use (Vulkan memory budget, Metal working set).
    Process,
}

/// One device of a backend (the unified-pool design's `DeviceInfo`, extended).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// Index within its backend, as used in `BACKEND:INDEX`.
    pub index: usize,
    /// Marketing or driver name.
    pub name: String,
    /// Vendor as the driver reports it, when it does.
    pub vendor: Option<String>,
    /// What the device is.
    pub device_type: DeviceType,
    /// Total memory in bytes.
    pub total_bytes: u64,
    /// Free memory in bytes, where the API knows it.
    pub free_bytes: Option<u64>,
    /// Whose free memory `free_bytes` is.
    pub free_scope: Option<FreeScope>,
    /// Largest single allocation the API allows.
    pub max_alloc_bytes: Option<u64>,
    /// Whether device memory is the host's memory.
    pub unified_memory: bool,
    /// Compute capability (CUDA `8.0`), gfx target (ROCm) or API version.
    pub compute_capability: Option<String>,
    /// Driver or runtime version.
    pub driver_version: Option<String>,
    /// PCI bus id, `0000:01:00.0` style, where the API has one.
    pub pci_bus_id: Option<String>,
    /// Device UUID where the API has one.
    pub uuid: Option<String>,
    /// NVML's view of the same GPU, merged into CUDA rows by PCI bus id or UUID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvml: Option<NvmlView>,
    /// A Vulkan device's buffer limits, which decide how llama.cpp's Vulkan backend lays out
    /// its buffers and which ops it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vulkan_limits: Option<crate::device::VulkanLimits>,
    /// The total the compute API itself reports where NVML's `total_bytes` (nvidia-smi's
    /// figure) is larger: CUDA leaves out the memory the driver reserves (`cuMemGetInfo`; 615 MiB
    /// on an H200), and engines budget from CUDA's figure (vLLM's total × utilization).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_total_bytes: Option<u64>,
}

impl DeviceInfo {
    /// A device with only the required fields set.
    pub fn new(index: usize, name: impl Into<String>, device_type: DeviceType, total: u64) -> Self {
        DeviceInfo {
            index,
            name: name.into(),
            vendor: None,
            device_type,
            total_bytes: total,
            free_bytes: None,
            free_scope: None,
            max_alloc_bytes: None,
            unified_memory: false,
            compute_capability: None,
            driver_version: None,
            pci_bus_id: None,
            uuid: None,
            nvml: None,
            vulkan_limits: None,
            api_total_bytes: None,
        }
    }

    /// The total engines on this device budget from: the compute API's.
    pub fn engine_total_bytes(&self) -> u64 {
        self.api_total_bytes.unwrap_or(self.total_bytes)
    }

    /// Free memory when known, else total: what ranking compares.
    pub fn free_or_total(&self) -> u64 {
        self.free_bytes.unwrap_or(self.total_bytes)
    }
}

/// Why a backend cannot be used here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unavailable {
    /// No shared library could be loaded; `tried` lists the names.
    LibraryNotFound {
        /// Library names or paths that were tried.
        tried: Vec<String>,
    },
    /// A file with the library's name is on the loader's search path but is not a loadable
    /// library (empty, text, a directory, another architecture).
    LibraryUnloadable {
        /// Where the file is.
        path: String,
        /// The dynamic loader's own explanation.
        why: String,
    },
    /// The library loaded but lacks a function gpumem needs.
    MissingSymbol {
        /// The library that loaded.
        library: String,
        /// The missing entry point, e.g. `cuMemGetInfo_v2`.
        symbol: String,
    },
    /// The library loaded but the driver did not initialise.
    DriverNotLoaded(String),
    /// The OS refused access (device nodes, permissions).
    NoPermission(String),
    /// The backend works but has no devices.
    NoDevices,
    /// This backend does not exist on this OS.
    UnsupportedOs,
    /// The backend did not answer within the probe timeout.
    TimedOut(Duration),
    /// The probe itself failed (a panic inside a driver binding, an unexpected error).
    Failed(String),
    /// The caller cancelled the probe (SIGINT or SIGTERM) before it answered.
    Cancelled,
    /// The driver killed the (isolated) probe process.
    DriverCrashed {
        /// The signal, e.g. `SIGSEGV`.
        signal: String,
        /// The driver call it was in, when known (e.g. `cuInit`).
        during: Option<String>,
    },
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unavailable::LibraryNotFound { tried } => {
                write!(f, "library not found (tried {})", tried.join(", "))
            }
            Unavailable::LibraryUnloadable { path, why } => {
                write!(f, "{path} is not a loadable library: {why}")
            }
            Unavailable::MissingSymbol { library, symbol } => {
                write!(f, "{library} lacks the function {symbol}")
            }
            Unavailable::DriverNotLoaded(why) => write!(f, "driver not loaded: {why}"),
            Unavailable::NoPermission(why) => write!(f, "no permission: {why}"),
            Unavailable::NoDevices => f.write_str("no devices"),
            Unavailable::UnsupportedOs => {
                write!(f, "not supported on this OS ({})", std::env::consts::OS)
            }
            Unavailable::TimedOut(after) => {
                write!(f, "timed out after {:.1} s", after.as_secs_f64())
            }
            Unavailable::Failed(why) => write!(f, "probe failed: {why}"),
            Unavailable::Cancelled => f.write_str("cancelled before it answered"),
            Unavailable::DriverCrashed { signal, during } => match during {
                Some(call) => write!(f, "driver crashed: {signal} in {call}"),
                None => write!(f, "driver crashed: {signal}"),
            },
        }
    }
}

/// On a device that shares the host's RAM (PoCL, lavapipe, integrated GPUs) the driver's
/// figure is the machine's total, not what is left: free memory is capped by what the host
/// really has available, so several runs at once cannot each plan for all of it.
pub(crate) fn host_shared_free(unified: bool, device_free: u64) -> u64 {
    if unified {
        device_free.min(cpu::get_available_memory())
    } else {
        device_free
    }
}

/// Why none of `names` loaded: a file of one of those names on the loader's search path that
/// does not load is reported as such (with the loader's reason); otherwise the library is
/// simply not installed.
pub(crate) fn library_unavailable(names: Vec<String>) -> Unavailable {
    for name in &names {
        let Some(path) = on_search_path(name) else {
            continue;
        };
        // SAFETY: dlopen of a file already known to be on the search path; if it is a real
        // library this runs its initialisers, exactly as the backend's own load would have.
        match unsafe { libloading::Library::new(&path) } {
            Ok(_) => continue,
            Err(e) => {
                return Unavailable::LibraryUnloadable {
                    path: path.display().to_string(),
                    why: std::error::Error::source(&e)
                        .map_or_else(|| e.to_string(), |s| s.to_string()),
                }
            }
        }
    }
    Unavailable::LibraryNotFound { tried: names }
}

// Where the dynamic loader would look for a bare library name: LD_LIBRARY_PATH, the
// directories ld.so.conf lists, then the system defaults. A name with a slash is a path.
fn on_search_path(name: &str) -> Option<std::path::PathBuf> {
    use std::path::{Path, PathBuf};
    if name.contains('/') {
        let p = PathBuf::from(name);
        return p.symlink_metadata().is_ok().then_some(p);
    }
    let mut dirs: Vec<PathBuf> = std::env::var_os("LD_LIBRARY_PATH")
        .map(|v| {
            std::env::split_paths(&v)
                .filter(|d| !d.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default();
    if let Ok(entries) = std::fs::read_dir("/etc/ld.so.conf.d") {
        for entry in entries.flatten().take(256) {
            let Ok(text) = crate::input::read_bounded(&entry.path(), 1 << 16, "ld.so.conf") else {
                continue;
            };
            dirs.extend(
                String::from_utf8_lossy(&text)
                    .lines()
                    .map(str::trim)
                    .filter(|l| l.starts_with('/'))
                    .map(PathBuf::from),
            );
        }
    }
    for d in [
        "/lib/x86_64-linux-gnu",
        "/usr/lib/x86_64-linux-gnu",
        "/lib/aarch64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/lib64",
        "/usr/lib64",
        "/lib",
        "/usr/lib",
    ] {
        dirs.push(Path::new(d).to_path_buf());
    }
    dirs.into_iter()
        .map(|d| d.join(name))
        .find(|p| p.symlink_metadata().is_ok())
}

/// A memory API that can be probed for devices. One implementation per file in this folder.
pub trait Backend: Send + Sync {
    /// Which backend this is.
    fn kind(&self) -> BackendKind;

    /// Lists the devices, or says why there are none.
    fn probe(&self) -> Result<Vec<DeviceInfo>, Unavailable>;
}

/// Every backend compiled into this build, in listing order.
pub fn all_backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(CpuBackend),
        Box::new(CudaBackend),
        Box::new(NvmlBackend),
        Box::new(RocmBackend),
        Box::new(MetalBackend),
        Box::new(OpenclBackend),
        Box::new(VulkanBackend),
    ]
}

/// The result of probing one backend (the unified-pool design's `BackendInfo`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackendInfo {
    /// The backend probed, available or not.
    pub backend: BackendKind,
    /// Whether it can be used.
    pub available: bool,
    /// Why not, when it cannot.
    pub reason: Option<String>,
    /// Its devices (empty when unavailable).
    pub devices: Vec<DeviceInfo>,
    /// How long the probe took, in milliseconds.
    pub probe_ms: f64,
}

impl BackendInfo {
    fn from_probe(
        kind: BackendKind,
        result: Result<Vec<DeviceInfo>, Unavailable>,
        took: Duration,
    ) -> Self {
        let probe_ms = took.as_secs_f64() * 1e3;
        match result {
            Ok(devices) if devices.is_empty() => {
                BackendInfo::unavailable(kind, Unavailable::NoDevices, probe_ms)
            }
            Ok(devices) => BackendInfo {
                backend: kind,
                available: true,
                reason: None,
                devices,
                probe_ms,
            },
            Err(why) => BackendInfo::unavailable(kind, why, probe_ms),
        }
    }

    fn unavailable(kind: BackendKind, why: Unavailable, probe_ms: f64) -> Self {
        BackendInfo {
            backend: kind,
            available: false,
            reason: Some(why.to_string()),
            devices: Vec::new(),
            probe_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(index: usize, total: u64, free: Option<u64>, t: DeviceType) -> DeviceInfo {
        let mut d = DeviceInfo::new(index, "dev", t, total);
        d.free_bytes = free;
        d
    }

    fn available(kind: BackendKind, devices: Vec<DeviceInfo>) -> BackendInfo {
        BackendInfo {
            backend: kind,
            available: true,
            reason: None,
            devices,
            probe_ms: 0.0,
        }
    }

    #[test]
    fn hardware_gpus_beat_cpu_and_software_devices() {
        let results = vec![
            available(
                BackendKind::Cpu,
                vec![gpu(0, 64 << 30, Some(60 << 30), DeviceType::Cpu)],
            ),
            available(
                BackendKind::Opencl,
                vec![gpu(0, 64 << 30, None, DeviceType::Cpu)],
            ),
            available(
                BackendKind::Cuda,
                vec![
                    gpu(0, 24 << 30, Some(10 << 30), DeviceType::Gpu),
                    gpu(1, 24 << 30, Some(20 << 30), DeviceType::Gpu),
                ],
            ),
        ];
        assert_eq!(
            recommend(&results),
            Some(Recommendation {
                backend: BackendKind::Cuda,
                device: 1
            })
        );
    }

    /// As an H200 machine listed it: the GPU through CUDA (free memory known) and through
    /// NVIDIA's OpenCL ICD (total only, same UUID without the `GPU-` prefix).
    #[test]
    fn one_gpu_through_two_apis_is_recommended_and_planned_through_cuda() {
        let mut cuda = gpu(0, 139 << 30, Some(138 << 30), DeviceType::Gpu);
        cuda.uuid = Some("GPU-08d873ee-b646-1882-dc8e-d265043812d2".into());
        let mut pocl = gpu(0, 3 << 30, None, DeviceType::Cpu);
        pocl.uuid = Some("00000000-0000-0000-0000-000000000000".into());
        let mut nv_cl = gpu(1, 139 << 30, None, DeviceType::Gpu);
        nv_cl.uuid = Some("08d873ee-b646-1882-dc8e-d265043812d2".into());
        let results = vec![
            available(BackendKind::Cuda, vec![cuda]),
            available(BackendKind::Opencl, vec![pocl, nv_cl]),
        ];
        let again = same_gpus(&results);
        assert_eq!(
            again,
            vec![SameGpu {
                backend: BackendKind::Opencl,
                device: 1,
                kept_backend: BackendKind::Cuda,
                kept_device: 0
            }]
        );
        assert_eq!(
            recommend(&results),
            Some(Recommendation {
                backend: BackendKind::Cuda,
                device: 0
            })
        );
        let planned = crate::plan::candidates_from_discovery(&results, "h");
        let names: Vec<_> = planned.iter().map(|c| (c.backend, c.device)).collect();
        assert_eq!(
            names,
            [(BackendKind::Cuda, 0), (BackendKind::Opencl, 0)],
            "the OpenCL view of the H200 is not a second GPU"
        );
    }

    /// The H200's figures: CUDA's total leaves out the 615 MiB the driver reserves, NVML's
    /// (nvidia-smi's) counts them.
    #[test]
    fn a_cuda_device_totals_as_nvidia_smi_and_plans_by_cuda() {
        let mut cuda = gpu(0, 150_109_880_320, Some(149_557_411_840), DeviceType::Gpu);
        cuda.uuid = Some("GPU-08d873ee-b646-1882-dc8e-d265043812d2".into());
        let mut nvml = gpu(0, 150_754_820_096, Some(150_109_814_784), DeviceType::Gpu);
        nvml.pci_bus_id = Some("00000000:00:06.0".into());
        nvml.uuid = cuda.uuid.clone();
        let mut results = vec![
            available(BackendKind::Cuda, vec![cuda]),
            available(BackendKind::Nvml, vec![nvml]),
        ];
        discover::merge_nvml_into_cuda(&mut results);
        let merged = &results[0].devices[0];
        assert_eq!(merged.total_bytes, 150_754_820_096);
        assert_eq!(merged.api_total_bytes, Some(150_109_880_320));
        let planned = crate::plan::candidates_from_discovery(&results, "h");
        assert_eq!(planned[0].total_bytes, 150_109_880_320);
    }

    #[test]
    fn software_only_machine_recommends_cpu() {
        let results = vec![
            available(
                BackendKind::Cpu,
                vec![gpu(0, 8 << 30, Some(4 << 30), DeviceType::Cpu)],
            ),
            available(
                BackendKind::Vulkan,
                vec![gpu(0, 8 << 30, Some(8 << 30), DeviceType::Cpu)],
            ),
        ];
        assert_eq!(
            recommend(&results),
            Some(Recommendation {
                backend: BackendKind::Cpu,
                device: 0
            })
        );
    }

    #[test]
    fn bus_ids_match_across_apis() {
        let id = |bus| crate::device::PhysicalId::new(None, Some(bus));
        assert!(id("00000000:01:00.0").same_device(&id("0000:01:00.0")));
        assert!(id("0000:AF:00.0").same_device(&id("0000:af:00.0")));
    }

    #[test]
    fn summary_marks_available_and_unavailable() {
        let results = vec![
            available(
                BackendKind::Cpu,
                vec![gpu(0, 32 << 30, Some(28 << 30), DeviceType::Cpu)],
            ),
            BackendInfo::unavailable(BackendKind::Cuda, Unavailable::NoDevices, 0.0),
        ];
        let mut buf = Vec::new();
        print_backend_summary(&results, &mut buf).unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert!(text.contains("✓ CPU"));
        assert!(text.contains("[0] dev: 32.00 GiB (28.00 GiB free)"));
        assert!(text.contains("✗ CUDA\n    Error: no devices"));
        assert!(text.contains("Recommended backend: cpu"));
    }

    #[test]
    fn timeout_is_reported_not_waited_for() {
        let options = DiscoverOptions {
            only: vec![BackendKind::Cpu],
            timeout: Duration::ZERO,
            isolation: Isolation::InProcess,
            cancel: None,
        };
        let results = discover_with(&options);
        assert_eq!(results.len(), 1);
        // With a zero deadline the CPU probe may or may not have answered; either way the
        // call returned and listed the backend.
        let cpu = &results[0];
        assert!(
            cpu.available
                || cpu
                    .reason
                    .as_deref()
                    .is_some_and(|r| r.starts_with("timed out"))
        );
    }

    #[test]
    fn a_cancelled_discovery_returns_at_once_naming_the_cancel() {
        let options = DiscoverOptions {
            only: vec![BackendKind::Cpu],
            timeout: Duration::from_secs(60),
            isolation: Isolation::InProcess,
            cancel: Some(Arc::new(AtomicBool::new(true))),
        };
        let results = discover_with(&options);
        assert_eq!(results.len(), 1);
        let cpu = &results[0];
        assert!(
            cpu.available || cpu.reason.as_deref() == Some("cancelled before it answered"),
            "{cpu:?}"
        );
    }
}
