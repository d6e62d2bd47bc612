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
mod host;
mod isolate;
mod metal;
mod nvml;
mod opencl;
mod rocm;
mod sim;
mod spec;
mod vulkan;

use std::fmt;
use std::io::{self, Write};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use cpu::{
    get_available_memory, get_cpu_name, get_system_memory, host_info, CpuBackend, HostInfo,
};
pub use cuda::{CudaBackend, CudaMemory};
pub use host::HostDevice;
pub use isolate::{run_probe_child, Isolation, CHILD_ENV};
pub use metal::MetalBackend;
pub use nvml::{GpuProcess, NvmlBackend, NvmlView};
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

/// One device of a backend (seed 000's `DeviceInfo`, extended).
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
        }
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

/// The result of probing one backend (seed 000's `BackendInfo`).
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

/// What `discover_with` probes, how long it waits and where the probes run.
#[derive(Debug, Clone)]
pub struct DiscoverOptions {
    /// Only these backends; empty means all.
    pub only: Vec<BackendKind>,
    /// How long one backend may take before it is reported as timed out.
    pub timeout: Duration,
    /// In this process, or each driver in a child process that may crash or hang alone.
    pub isolation: Isolation,
    /// Set (by a signal handler, say) to stop waiting: probes and opens still running are
    /// abandoned at once, probe children killed, and the backends that had not answered are
    /// reported as [`Unavailable::Cancelled`].
    pub cancel: Option<Arc<AtomicBool>>,
}

impl Default for DiscoverOptions {
    fn default() -> Self {
        DiscoverOptions {
            only: Vec::new(),
            timeout: Duration::from_secs(5),
            isolation: Isolation::InProcess,
            cancel: None,
        }
    }
}

impl DiscoverOptions {
    /// Whether [`DiscoverOptions::cancel`] has been set.
    pub fn cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(|c| c.load(std::sync::atomic::Ordering::SeqCst))
    }
}

/// How often a wait on probes or an open looks at the cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(20);

/// Probes every backend concurrently with the default options.
pub fn discover_backends() -> Vec<BackendInfo> {
    discover_with(&DiscoverOptions::default())
}

/// Probes the selected backends concurrently, each in its own thread under `options.timeout`.
///
/// A backend that has not answered by its deadline is reported as timed out; its thread is left
/// to finish on its own (a hung driver call cannot be cancelled), which costs nothing once the
/// process exits. CUDA rows are merged with NVML's view of the same GPU.
pub fn discover_with(options: &DiscoverOptions) -> Vec<BackendInfo> {
    let selected: Vec<Box<dyn Backend>> = all_backends()
        .into_iter()
        .filter(|b| options.only.is_empty() || options.only.contains(&b.kind()))
        .collect();
    let (tx, rx) = mpsc::channel();
    let start = Instant::now();
    for backend in selected.iter().map(|b| b.kind()) {
        let thread_tx = tx.clone();
        let isolation = options.isolation.clone();
        let timeout = options.timeout;
        let cancel = options.cancel.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("probe-{backend}"))
            .spawn(move || {
                let info = match isolation {
                    Isolation::Subprocess { exe } if backend.loads_a_driver() => {
                        isolate::probe_in_child(&exe, backend, timeout, cancel.as_deref())
                    }
                    _ => probe_here(backend),
                };
                let _ = thread_tx.send(info);
            });
        if let Err(e) = spawned {
            let _ = tx.send(BackendInfo::unavailable(
                backend,
                Unavailable::Failed(e.to_string()),
                0.0,
            ));
        }
    }
    drop(tx);
    // A child kills itself at the timeout and then reports; give that report a moment to come.
    let grace = match options.isolation {
        Isolation::Subprocess { .. } => Duration::from_millis(500),
        Isolation::InProcess => Duration::ZERO,
    };
    let deadline = start + options.timeout + grace;
    let mut results: Vec<BackendInfo> = Vec::new();
    while results.len() < selected.len() && !options.cancelled() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match rx.recv_timeout(left.min(CANCEL_POLL)) {
            Ok(info) => {
                let kind = info.backend;
                match &info.reason {
                    None => log::info!(
                        "{kind}: {} devices in {:.1} ms",
                        info.devices.len(),
                        info.probe_ms
                    ),
                    Some(why) => {
                        log::info!("{kind}: unavailable after {:.1} ms: {why}", info.probe_ms)
                    }
                }
                results.push(info);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    for kind in selected.iter().map(|b| b.kind()) {
        if !results.iter().any(|r| r.backend == kind) {
            let ms = start.elapsed().as_secs_f64() * 1e3;
            let why = if options.cancelled() {
                Unavailable::Cancelled
            } else {
                Unavailable::TimedOut(options.timeout)
            };
            results.push(BackendInfo::unavailable(kind, why, ms));
        }
    }
    results.sort_by_key(|r| r.backend);
    merge_nvml_into_cuda(&mut results);
    results
}

// One backend in this process, a panic in its binding reported as a failure.
fn probe_here(backend: BackendKind) -> BackendInfo {
    let began = Instant::now();
    let result = std::panic::catch_unwind(|| probe_kind(backend)).unwrap_or_else(|panic| {
        let text = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "unknown panic".into());
        Err(Unavailable::Failed(text))
    });
    BackendInfo::from_probe(backend, result, began.elapsed())
}

fn probe_kind(kind: BackendKind) -> Result<Vec<DeviceInfo>, Unavailable> {
    all_backends()
        .into_iter()
        .find(|b| b.kind() == kind)
        .map(|b| b.probe())
        .unwrap_or(Err(Unavailable::Failed("backend not compiled in".into())))
}

/// Attaches NVML's per-GPU view to the CUDA row of the same GPU (matched by PCI bus id, then
/// UUID), so one GPU reads as one row with both views.
fn merge_nvml_into_cuda(results: &mut [BackendInfo]) {
    let nvml_devices: Vec<DeviceInfo> = results
        .iter()
        .filter(|r| r.backend == BackendKind::Nvml)
        .flat_map(|r| r.devices.clone())
        .collect();
    for info in results
        .iter_mut()
        .filter(|r| r.backend == BackendKind::Cuda)
    {
        for device in &mut info.devices {
            let matched = nvml_devices.iter().find(|n| {
                let same_bus = matches!((&n.pci_bus_id, &device.pci_bus_id),
                    (Some(a), Some(b)) if normalize_bus_id(a) == normalize_bus_id(b));
                let same_uuid = matches!((&n.uuid, &device.uuid),
                    (Some(a), Some(b)) if a.trim_start_matches("GPU-").eq_ignore_ascii_case(b.trim_start_matches("GPU-")));
                same_bus || same_uuid
            });
            if let Some(n) = matched {
                device.nvml = n.nvml.clone();
            }
        }
    }
}

/// NVML prints 8-digit PCI domains (`00000000:01:00.0`), CUDA 4-digit ones (`0000:01:00.0`).
fn normalize_bus_id(id: &str) -> String {
    match id.split_once(':') {
        Some((domain, rest)) => {
            let domain = u32::from_str_radix(domain, 16).unwrap_or(0);
            format!("{domain:04x}:{}", rest.to_ascii_lowercase())
        }
        None => id.to_ascii_lowercase(),
    }
}

/// A device chosen by ranking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recommendation {
    /// Backend of the chosen device.
    pub backend: BackendKind,
    /// Its index within the backend.
    pub device: usize,
}

/// The best device among probed backends: hardware GPUs by free (else total) memory, then CPU.
/// NVML is a monitoring API, not a place to allocate, so it is never recommended.
pub fn recommend(results: &[BackendInfo]) -> Option<Recommendation> {
    let gpu = results
        .iter()
        .filter(|r| r.available && r.backend.is_gpu() && r.backend != BackendKind::Nvml)
        .flat_map(|r| r.devices.iter().map(move |d| (r.backend, d)))
        .filter(|(_, d)| d.device_type.is_hardware_gpu())
        .max_by_key(|(kind, d)| (d.free_or_total(), std::cmp::Reverse(*kind)));
    if let Some((backend, device)) = gpu {
        return Some(Recommendation {
            backend,
            device: device.index,
        });
    }
    results
        .iter()
        .find(|r| r.available && r.backend == BackendKind::Cpu)
        .map(|_| Recommendation {
            backend: BackendKind::Cpu,
            device: 0,
        })
}

/// Seed 000's `best_available_backend()`: probes every backend and ranks them.
pub fn best_available_backend() -> BackendKind {
    recommend(&discover_backends())
        .map(|r| r.backend)
        .unwrap_or(BackendKind::Cpu)
}

/// Writes seed 000's ✓/✗ summary of probed backends to `w`.
pub fn print_backend_summary(results: &[BackendInfo], w: &mut dyn Write) -> io::Result<()> {
    writeln!(w, "=== Available Backends ===")?;
    for info in results {
        let mark = if info.available { '✓' } else { '✗' };
        writeln!(w, "{mark} {}", info.backend.name().to_uppercase())?;
        match &info.reason {
            Some(reason) => writeln!(w, "    Error: {reason}")?,
            None => {
                for d in &info.devices {
                    let free = match d.free_bytes {
                        Some(free) => format!(" ({} free)", format_bytes(free)),
                        None if d.unified_memory => " (unified memory)".into(),
                        None => String::new(),
                    };
                    writeln!(
                        w,
                        "    [{}] {}: {}{free}",
                        d.index,
                        d.name,
                        format_bytes(d.total_bytes)
                    )?;
                }
            }
        }
    }
    if let Some(best) = recommend(results) {
        writeln!(
            w,
            "\nRecommended backend: {} (device {})",
            best.backend, best.device
        )?;
    }
    Ok(())
}

/// Why a device could not be opened for allocation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot open {spec}: {reason}")]
pub struct OpenError {
    /// The device asked for.
    pub spec: String,
    /// What went wrong, in one line.
    pub reason: String,
}

/// Opens a device's raw memory for the pool: host and sim need nothing; GPU backends load their
/// driver now.
pub fn open_device(spec: &DeviceSpec) -> Result<Arc<dyn DeviceMemory>, OpenError> {
    let fail = |reason: String| OpenError {
        spec: spec.to_string(),
        reason,
    };
    let unavailable = |u: Unavailable| fail(u.to_string());
    Ok(match *spec {
        DeviceSpec::Host { capacity } => Arc::new(HostDevice::new(capacity)),
        DeviceSpec::Sim { capacity } => Arc::new(SimDevice::new(capacity)),
        DeviceSpec::Device { backend, index } => match backend {
            BackendKind::Cpu if index == 0 => Arc::new(HostDevice::new(None)),
            BackendKind::Cpu => return Err(fail("the CPU backend has one device, cpu:0".into())),
            BackendKind::Cuda => Arc::new(CudaMemory::open(index).map_err(unavailable)?),
            BackendKind::Rocm => Arc::new(HipMemory::open(index).map_err(unavailable)?),
            BackendKind::Opencl => Arc::new(OpenclMemory::open(index).map_err(unavailable)?),
            BackendKind::Vulkan => Arc::new(VulkanMemory::open(index).map_err(unavailable)?),
            BackendKind::Nvml => {
                return Err(fail(
                    "NVML only monitors; allocate on the same GPU with cuda:N".into(),
                ))
            }
            BackendKind::Metal if cfg!(target_os = "macos") => return Err(fail(
                "allocation through Metal is not supported yet; use discover, estimate and select"
                    .into(),
            )),
            BackendKind::Metal => return Err(unavailable(Unavailable::UnsupportedOs)),
        },
    })
}

/// [`open_device`] guarded against a driver that crashes or hangs: under
/// [`Isolation::Subprocess`] the backend is first probed in a child process (a crash or hang
/// there is reported as the reason and the driver is never loaded here), and the open itself
/// must finish within `options.timeout` (a hung open is abandoned on its thread; the caller
/// is expected to exit).
pub fn open_device_within(
    spec: &DeviceSpec,
    options: &DiscoverOptions,
) -> Result<Arc<dyn DeviceMemory>, OpenError> {
    let fail = |reason: String| OpenError {
        spec: spec.to_string(),
        reason,
    };
    if let (DeviceSpec::Device { backend, index }, Isolation::Subprocess { exe }) =
        (spec, &options.isolation)
    {
        if backend.loads_a_driver() {
            let info =
                isolate::probe_in_child(exe, *backend, options.timeout, options.cancel.as_deref());
            if let Some(why) = info.reason {
                return Err(fail(why));
            }
            if *index >= info.devices.len() {
                return Err(fail(format!(
                    "no {backend} device {index} ({} found)",
                    info.devices.len()
                )));
            }
        }
    }
    let (tx, rx) = mpsc::channel();
    let thread_spec = spec.clone();
    std::thread::Builder::new()
        .name(format!("open-{spec}"))
        .spawn(move || {
            let _ = tx.send(open_device(&thread_spec));
        })
        .map_err(|e| fail(e.to_string()))?;
    let deadline = Instant::now() + options.timeout;
    loop {
        if options.cancelled() {
            return Err(fail(Unavailable::Cancelled.to_string()));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(fail(Unavailable::TimedOut(options.timeout).to_string()));
        }
        match rx.recv_timeout(left.min(CANCEL_POLL)) {
            Ok(opened) => return opened,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(fail("the open ended without an answer".into()))
            }
        }
    }
}

/// The device `bench-alloc` and `stress` use when none is named: the recommended hardware GPU,
/// else host memory.
pub fn default_device_spec(options: &DiscoverOptions) -> DeviceSpec {
    let results = discover_with(options);
    match recommend(&results) {
        Some(Recommendation { backend, device }) if backend != BackendKind::Cpu => {
            DeviceSpec::Device {
                backend,
                index: device,
            }
        }
        _ => DeviceSpec::Host { capacity: None },
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
    fn bus_ids_normalize_across_apis() {
        assert_eq!(
            normalize_bus_id("00000000:01:00.0"),
            normalize_bus_id("0000:01:00.0")
        );
        assert_eq!(normalize_bus_id("0000:AF:00.0"), "0000:af:00.0");
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
