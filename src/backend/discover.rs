//! Discovery: every backend probed at once, each under a timeout (in a child process for the
//! drivers that may crash or hang), NVML's view merged into CUDA's rows, the recommendation,
//! and the unified-pool design's summary.

use std::io::{self, Write};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::*;
use crate::device::PhysicalId;

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
pub(super) const CANCEL_POLL: Duration = Duration::from_millis(20);

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
pub(super) fn probe_here(backend: BackendKind) -> BackendInfo {
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

pub(super) fn probe_kind(kind: BackendKind) -> Result<Vec<DeviceInfo>, Unavailable> {
    all_backends()
        .into_iter()
        .find(|b| b.kind() == kind)
        .map(|b| b.probe())
        .unwrap_or(Err(Unavailable::Failed("backend not compiled in".into())))
}

/// Attaches NVML's per-GPU view to the CUDA row of the same GPU (matched by UUID, else PCI
/// address), so one GPU reads as one row with both views; its total becomes NVML's (what
/// nvidia-smi prints), CUDA's own kept beside it.
pub(super) fn merge_nvml_into_cuda(results: &mut [BackendInfo]) {
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
            let id = PhysicalId::new(device.uuid.as_deref(), device.pci_bus_id.as_deref());
            let matched = nvml_devices.iter().find(|n| {
                PhysicalId::new(n.uuid.as_deref(), n.pci_bus_id.as_deref()).same_device(&id)
            });
            if let Some(n) = matched {
                device.nvml = n.nvml.clone();
                if n.total_bytes > device.total_bytes {
                    device.api_total_bytes = Some(device.total_bytes);
                    device.total_bytes = n.total_bytes;
                }
            }
        }
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

/// A GPU one backend lists that another, preferred for planning, lists too (the same UUID or PCI
/// address): NVIDIA's OpenCL and Vulkan devices beside its CUDA ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SameGpu {
    /// The backend listing it again.
    pub backend: BackendKind,
    /// Its index there.
    pub device: usize,
    /// The backend it is planned through.
    pub kept_backend: BackendKind,
    /// Its index there.
    pub kept_device: usize,
}

/// Every available GPU reached through a less preferred API than another that lists it
/// ([`BackendKind::driver_preference`]); NVML is left out, as it only monitors.
pub fn same_gpus(results: &[BackendInfo]) -> Vec<SameGpu> {
    let gpus: Vec<(BackendKind, usize, PhysicalId)> = results
        .iter()
        .filter(|r| r.available && r.backend.is_gpu() && r.backend != BackendKind::Nvml)
        .flat_map(|r| {
            r.devices.iter().map(move |d| {
                let id = PhysicalId::new(d.uuid.as_deref(), d.pci_bus_id.as_deref());
                (r.backend, d.index, id)
            })
        })
        .collect();
    let mut found = Vec::new();
    for &(backend, device, id) in &gpus {
        let kept = gpus
            .iter()
            .filter(|(b, _, other)| {
                b.driver_preference() < backend.driver_preference() && other.same_device(&id)
            })
            .min_by_key(|(b, _, _)| b.driver_preference());
        if let Some(&(kept_backend, kept_device, _)) = kept {
            found.push(SameGpu {
                backend,
                device,
                kept_backend,
                kept_device,
            });
        }
    }
    found
}

/// The best device among probed backends: hardware GPUs by free (else total) memory, each
/// through its preferred API ([`same_gpus`]), then CPU. NVML is a monitoring API, not a place
/// to allocate, so it is never recommended.
pub fn recommend(results: &[BackendInfo]) -> Option<Recommendation> {
    let again = same_gpus(results);
    let gpu = results
        .iter()
        .filter(|r| r.available && r.backend.is_gpu() && r.backend != BackendKind::Nvml)
        .flat_map(|r| r.devices.iter().map(move |d| (r.backend, d)))
        .filter(|(_, d)| d.device_type.is_hardware_gpu())
        .filter(|(b, d)| !again.iter().any(|s| s.backend == *b && s.device == d.index))
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

/// The unified-pool design's `best_available_backend()`: probes every backend and ranks them.
pub fn best_available_backend() -> BackendKind {
    recommend(&discover_backends())
        .map(|r| r.backend)
        .unwrap_or(BackendKind::Cpu)
}

/// Writes the unified-pool design's ✓/✗ summary of probed backends to `w`.
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
