//! Opening a device for the pool: host and sim need nothing, GPU backends load their driver
//! now (under `open_device_within`, after a probe in a child process and within a timeout).

use std::sync::mpsc;
use std::time::Instant;

use super::*;

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
        DeviceSpec::Sim { capacity, .. } => Arc::new(SimDevice::new(capacity)),
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
