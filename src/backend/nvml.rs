//! NVIDIA Management Library (libnvidia-ml), loaded at run time by nvml-wrapper.
//!
//! NVML sees what CUDA cannot: memory reserved by the driver, MIG mode and per-process use.
//! Its rows are merged into CUDA's by PCI bus id or UUID (see `merge_nvml_into_cuda`).

use std::ffi::OsStr;

use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;
use serde::{Deserialize, Serialize};

use super::{Backend, BackendKind, DeviceInfo, DeviceType, FreeScope, Unavailable};

/// NVIDIA's management library: free/used/reserved as nvidia-smi reports them.
#[derive(Debug, Clone, Copy, Default)]
pub struct NvmlBackend;

/// NVML's view of one GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvmlView {
    /// Framebuffer bytes no one has allocated.
    pub free_bytes: u64,
    /// Memory in use, including the driver's bookkeeping.
    pub used_bytes: u64,
    /// Memory the driver reserves and nobody can allocate.
    pub reserved_bytes: u64,
    /// Whether MIG mode is on; `None` where the GPU does not support MIG.
    pub mig_enabled: Option<bool>,
    /// Processes with a compute context on this GPU.
    pub processes: Vec<GpuProcess>,
}

/// A process using a GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuProcess {
    /// Operating-system process id.
    pub pid: u32,
    /// Its GPU memory, when the driver reports it.
    pub used_bytes: Option<u64>,
}

/// The library names tried, in order.
const LIBRARIES: &[&str] = if cfg!(target_os = "windows") {
    &["nvml.dll"]
} else {
    &["libnvidia-ml.so", "libnvidia-ml.so.1"]
};

fn open() -> Result<Nvml, Unavailable> {
    let mut last = None;
    for name in LIBRARIES {
        super::isolate::step("nvmlInit_v2");
        match Nvml::builder().lib_path(OsStr::new(name)).init() {
            Ok(nvml) => return Ok(nvml),
            Err(NvmlError::LibloadingError(_)) => continue,
            Err(other) => {
                last = Some(other);
                break;
            }
        }
    }
    Err(match last {
        None => super::library_unavailable(LIBRARIES.iter().map(|s| s.to_string()).collect()),
        Some(NvmlError::FailedToLoadSymbol(symbol)) => Unavailable::MissingSymbol {
            library: "libnvidia-ml".into(),
            symbol,
        },
        Some(NvmlError::DriverNotLoaded) => {
            Unavailable::DriverNotLoaded("the NVIDIA kernel driver is not loaded".into())
        }
        Some(NvmlError::NoPermission) => Unavailable::NoPermission("NVML refused access".into()),
        Some(other) => Unavailable::DriverNotLoaded(format!("nvmlInit failed: {other}")),
    })
}

fn failed(err: NvmlError) -> Unavailable {
    Unavailable::Failed(format!("NVML: {err}"))
}

impl Backend for NvmlBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Nvml
    }

    fn probe(&self) -> Result<Vec<DeviceInfo>, Unavailable> {
        let nvml = open()?;
        let driver = nvml.sys_driver_version().ok();
        let cuda = nvml
            .sys_cuda_driver_version()
            .ok()
            .map(|v| format!("CUDA {}.{}", v / 1000, (v % 1000) / 10));
        let driver_version = match (driver, cuda) {
            (Some(d), Some(c)) => Some(format!("{d} ({c})")),
            (d, c) => d.or(c),
        };
        let count = nvml.device_count().map_err(failed)?;
        let mut devices = Vec::new();
        for index in 0..count {
            let device = nvml.device_by_index(index).map_err(failed)?;
            let memory = device.memory_info().map_err(failed)?;
            let mut info = DeviceInfo::new(
                index as usize,
                device.name().map_err(failed)?,
                DeviceType::Gpu,
                memory.total,
            );
            info.vendor = Some("NVIDIA".into());
            info.free_bytes = Some(memory.free);
            info.free_scope = Some(FreeScope::Device);
            info.driver_version = driver_version.clone();
            info.compute_capability = device
                .cuda_compute_capability()
                .ok()
                .map(|c| format!("{}.{}", c.major, c.minor));
            info.pci_bus_id = device.pci_info().ok().map(|p| p.bus_id.to_lowercase());
            info.uuid = device.uuid().ok();
            let processes = device
                .running_compute_processes()
                .unwrap_or_default()
                .into_iter()
                .map(|p| GpuProcess {
                    pid: p.pid,
                    used_bytes: match p.used_gpu_memory {
                        UsedGpuMemory::Used(bytes) => Some(bytes),
                        UsedGpuMemory::Unavailable => None,
                    },
                })
                .collect();
            info.nvml = Some(NvmlView {
                free_bytes: memory.free,
                used_bytes: memory.used,
                reserved_bytes: memory.reserved,
                mig_enabled: device.mig_mode().ok().map(|m| m.current == 1),
                processes,
            });
            devices.push(info);
        }
        Ok(devices)
    }
}
