//! AMD ROCm: the amdgpu driver's sysfs files for memory, and HIP (libamdhip64), loaded at run
//! time, for allocation.
//!
//! sysfs answers without initialising a GPU runtime, which takes seconds on ROCm, so discovery
//! reads `/sys/class/drm/card*/device/mem_info_*` and only checks that HIP can be loaded.

use std::ffi::{c_int, c_uint, c_void};
use std::fs;
use std::path::Path;

use super::{Backend, BackendKind, DeviceInfo, DeviceType, FreeScope, Unavailable};
use crate::device::{
    check_bounds, AsyncCopies, DeviceError, DeviceMemory, Flights, HostSide, PendingCopy, Segment,
    SegmentHandle, SegmentTable,
};

/// AMD GPUs through HIP (`libamdhip64`), loaded at run time.
#[derive(Debug, Clone, Copy, Default)]
pub struct RocmBackend;

/// HIP runtime names tried, in order.
pub(crate) const HIP_LIBRARIES: &[&str] =
    &["libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"];

const AMD_VENDOR: &str = "0x1002";

fn read_trimmed(path: &Path) -> Option<String> {
    crate::input::read_system_text(path, 4096)
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn read_u64(path: &Path) -> Option<u64> {
    read_trimmed(path)?.parse().ok()
}

/// Lists amdgpu devices under a sysfs root (normally `/sys`), in card order.
pub fn probe_sysfs(sysfs: &Path) -> Vec<DeviceInfo> {
    let drm = sysfs.join("class/drm");
    let mut cards: Vec<(u32, std::path::PathBuf)> = fs::read_dir(&drm)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    // card0, card1, ... but not card0-DP-1 connectors.
                    let number = name.strip_prefix("card")?.parse::<u32>().ok()?;
                    Some((number, e.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    cards.sort();
    let driver_version = read_trimmed(&sysfs.join("module/amdgpu/version"));
    let mut devices = Vec::new();
    for (_, card) in cards {
        let dev = card.join("device");
        if read_trimmed(&dev.join("vendor")).as_deref() != Some(AMD_VENDOR) {
            continue;
        }
        let Some(total) = read_u64(&dev.join("mem_info_vram_total")) else {
            continue;
        };
        let device_id = read_trimmed(&dev.join("device")).unwrap_or_default();
        let name = read_trimmed(&dev.join("product_name"))
            .unwrap_or_else(|| format!("AMD GPU {device_id}"));
        let gtt_total = read_u64(&dev.join("mem_info_gtt_total")).unwrap_or(0);
        // An APU carves a small VRAM window and uses system memory through GTT.
        let integrated = total < (1 << 30) && gtt_total > total;
        let mut info = DeviceInfo::new(
            devices.len(),
            name,
            if integrated {
                DeviceType::IntegratedGpu
            } else {
                DeviceType::Gpu
            },
            total,
        );
        info.vendor = Some("AMD".into());
        info.unified_memory = integrated;
        if let Some(used) = read_u64(&dev.join("mem_info_vram_used")) {
            info.free_bytes = Some(total.saturating_sub(used));
            info.free_scope = Some(FreeScope::Device);
        }
        info.max_alloc_bytes = Some(total);
        info.driver_version = driver_version.clone().map(|v| format!("amdgpu {v}"));
        info.pci_bus_id = fs::canonicalize(&dev)
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .filter(|n| n.contains(':'));
        info.uuid = read_trimmed(&dev.join("unique_id"));
        devices.push(info);
    }
    devices
}

/// Whether the HIP runtime can be loaded (needed for allocation, not for discovery).
pub(crate) fn hip_present() -> bool {
    HIP_LIBRARIES.iter().any(|name| {
        // SAFETY: loading the HIP runtime runs its initialisers only.
        unsafe { libloading::Library::new(name) }.is_ok()
    })
}

impl Backend for RocmBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Rocm
    }

    fn probe(&self) -> Result<Vec<DeviceInfo>, Unavailable> {
        if !cfg!(target_os = "linux") {
            return Err(Unavailable::UnsupportedOs);
        }
        let devices = probe_sysfs(Path::new("/sys"));
        if !devices.is_empty() {
            return Ok(devices);
        }
        super::isolate::step("loading libamdhip64");
        if hip_present() {
            return Err(Unavailable::NoDevices);
        }
        match super::library_unavailable(HIP_LIBRARIES.iter().map(|s| s.to_string()).collect()) {
            Unavailable::LibraryNotFound { .. } => Err(Unavailable::LibraryNotFound {
                tried: std::iter::once(
                    "amdgpu sysfs (/sys/class/drm/card*/device/mem_info_vram_total)".to_string(),
                )
                .chain(HIP_LIBRARIES.iter().map(|s| s.to_string()))
                .collect(),
            }),
            other => Err(other),
        }
    }
}

type HipError = c_int;
const HIP_SUCCESS: HipError = 0;
/// hipErrorOutOfMemory (hipErrorMemoryAllocation in older headers).
const HIP_ERROR_OUT_OF_MEMORY: HipError = 2;
const HIP_MEMCPY_HOST_TO_DEVICE: c_int = 1;
const HIP_MEMCPY_DEVICE_TO_HOST: c_int = 2;

/// The HIP entry points gpumem uses, resolved once from libamdhip64.
struct Hip {
    init: unsafe extern "C" fn(c_uint) -> HipError,
    device_count: unsafe extern "C" fn(*mut c_int) -> HipError,
    set_device: unsafe extern "C" fn(c_int) -> HipError,
    malloc: unsafe extern "C" fn(*mut *mut c_void, usize) -> HipError,
    free: unsafe extern "C" fn(*mut c_void) -> HipError,
    mem_get_info: unsafe extern "C" fn(*mut usize, *mut usize) -> HipError,
    memcpy: unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int) -> HipError,
    /// Streams and events for asynchronous copies, when the runtime exports them.
    streams: Option<HipStreams>,
    /// Keeps the functions above mapped.
    _lib: libloading::Library,
}

/// HIP's stream and event entry points (hip_runtime_api.h), for `hipMemcpyAsync`.
#[derive(Clone, Copy)]
struct HipStreams {
    stream_create: unsafe extern "C" fn(*mut *mut c_void) -> HipError,
    stream_destroy: unsafe extern "C" fn(*mut c_void) -> HipError,
    event_create: unsafe extern "C" fn(*mut *mut c_void) -> HipError,
    event_destroy: unsafe extern "C" fn(*mut c_void) -> HipError,
    event_record: unsafe extern "C" fn(*mut c_void, *mut c_void) -> HipError,
    event_synchronize: unsafe extern "C" fn(*mut c_void) -> HipError,
    event_elapsed: unsafe extern "C" fn(*mut f32, *mut c_void, *mut c_void) -> HipError,
    memcpy_async:
        unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int, *mut c_void) -> HipError,
}

impl Hip {
    fn load() -> Result<Self, Unavailable> {
        let lib = HIP_LIBRARIES
            .iter()
            // SAFETY: loading the HIP runtime runs its initialisers only.
            .find_map(|name| unsafe { libloading::Library::new(name) }.ok())
            .ok_or_else(|| {
                super::library_unavailable(HIP_LIBRARIES.iter().map(|s| s.to_string()).collect())
            })?;
        fn sym<T: Copy>(lib: &libloading::Library, name: &str) -> Result<T, Unavailable> {
            // SAFETY: the symbol is declared with its C signature from hip_runtime_api.h.
            unsafe { lib.get::<T>(name.as_bytes()) }
                .map(|s| *s)
                .map_err(|_| Unavailable::MissingSymbol {
                    library: "libamdhip64".into(),
                    symbol: name.into(),
                })
        }
        Ok(Hip {
            init: sym(&lib, "hipInit")?,
            device_count: sym(&lib, "hipGetDeviceCount")?,
            set_device: sym(&lib, "hipSetDevice")?,
            malloc: sym(&lib, "hipMalloc")?,
            free: sym(&lib, "hipFree")?,
            mem_get_info: sym(&lib, "hipMemGetInfo")?,
            memcpy: sym(&lib, "hipMemcpy")?,
            streams: (|| {
                Some(HipStreams {
                    stream_create: sym(&lib, "hipStreamCreate").ok()?,
                    stream_destroy: sym(&lib, "hipStreamDestroy").ok()?,
                    event_create: sym(&lib, "hipEventCreate").ok()?,
                    event_destroy: sym(&lib, "hipEventDestroy").ok()?,
                    event_record: sym(&lib, "hipEventRecord").ok()?,
                    event_synchronize: sym(&lib, "hipEventSynchronize").ok()?,
                    event_elapsed: sym(&lib, "hipEventElapsedTime").ok()?,
                    memcpy_async: sym(&lib, "hipMemcpyAsync").ok()?,
                })
            })(),
            _lib: lib,
        })
    }
}

/// Device memory through `hipMalloc`/`hipFree` on one HIP device.
pub struct HipMemory {
    hip: Hip,
    index: c_int,
    name: String,
    segments: SegmentTable<u64>,
    /// A stream of its own for asynchronous copies, and the copies in flight (their events).
    copies: Option<HipCopies>,
}

/// The copy stream and the start/end events of each copy in flight, by id.
struct HipCopies {
    stream: *mut c_void,
    /// The start and end events of each copy in flight.
    flights: Flights<(*mut c_void, *mut c_void)>,
}

// SAFETY: a HIP stream and events are runtime handles usable from any thread with the device
// selected; they are only used under `flights`' lock or through thread-safe runtime calls.
unsafe impl Send for HipCopies {}
// SAFETY: as above.
unsafe impl Sync for HipCopies {}

impl HipMemory {
    /// Opens HIP device `index` (HIP's ordinal).
    #[expect(
        clippy::cast_possible_truncation,
        reason = "device ordinals come from the driver's own count, an int"
    )]
    pub fn open(index: usize) -> Result<Self, Unavailable> {
        let hip = Hip::load()?;
        // SAFETY: resolved entry points with their C signatures; valid out-pointer.
        let r = unsafe { (hip.init)(0) };
        if r != HIP_SUCCESS {
            return Err(Unavailable::DriverNotLoaded(format!(
                "hipInit returned {r}"
            )));
        }
        let mut count: c_int = 0;
        // SAFETY: as above.
        let r = unsafe { (hip.device_count)(&mut count) };
        if r != HIP_SUCCESS || count <= 0 {
            return Err(Unavailable::NoDevices);
        }
        if index >= count as usize {
            return Err(Unavailable::Failed(format!(
                "no ROCm device {index} ({count} found)"
            )));
        }
        let mut memory = HipMemory {
            hip,
            index: index as c_int,
            name: format!("rocm:{index}"),
            segments: SegmentTable::default(),
            copies: None,
        };
        memory
            .current()
            .map_err(|e| Unavailable::Failed(e.to_string()))?;
        if let Some(s) = memory.hip.streams {
            let mut stream = std::ptr::null_mut();
            // SAFETY: resolved entry point; valid out-pointer; device selected.
            if unsafe { (s.stream_create)(&mut stream) } == HIP_SUCCESS {
                memory.copies = Some(HipCopies {
                    stream,
                    flights: Flights::default(),
                });
            }
        }
        Ok(memory)
    }

    fn call(&self, name: &str, r: HipError) -> Result<(), DeviceError> {
        if r == HIP_SUCCESS {
            Ok(())
        } else {
            Err(DeviceError::Backend(format!(
                "{name} returned hipError {r}"
            )))
        }
    }

    /// Selects this device on the calling thread.
    fn current(&self) -> Result<(), DeviceError> {
        // SAFETY: resolved entry point; the index was validated in `open`.
        self.call("hipSetDevice", unsafe { (self.hip.set_device)(self.index) })
    }

    fn size_of(&self, segment: SegmentHandle) -> Result<u64, DeviceError> {
        self.segments.with(segment, |size| Ok(*size))
    }
}

impl HipMemory {
    /// Starts `hipMemcpyAsync` on the copy stream between events; `to_device` says which way.
    fn start_async(
        &self,
        dst: *mut c_void,
        src: *const c_void,
        len: usize,
        to_device: bool,
    ) -> Result<PendingCopy, DeviceError> {
        let (Some(s), Some(c)) = (self.hip.streams, self.copies.as_ref()) else {
            return Err(DeviceError::Unsupported("no HIP streams".into()));
        };
        self.current()?;
        let (mut start, mut end) = (std::ptr::null_mut(), std::ptr::null_mut());
        let kind = if to_device {
            HIP_MEMCPY_HOST_TO_DEVICE
        } else {
            HIP_MEMCPY_DEVICE_TO_HOST
        };
        // SAFETY: resolved entry points; the caller checked the device span and keeps the host
        // span valid until the copy is waited for (AsyncCopies' contract).
        let result = unsafe {
            self.call("hipEventCreate", (s.event_create)(&mut start))
                .and_then(|()| self.call("hipEventCreate", (s.event_create)(&mut end)))
                .and_then(|()| self.call("hipEventRecord", (s.event_record)(start, c.stream)))
                .and_then(|()| {
                    self.call(
                        "hipMemcpyAsync",
                        (s.memcpy_async)(dst, src, len, kind, c.stream),
                    )
                })
                .and_then(|()| self.call("hipEventRecord", (s.event_record)(end, c.stream)))
        };
        if let Err(e) = result {
            // SAFETY: events made above (or null, which destroy refuses harmlessly); nothing
            // waits on them.
            unsafe {
                if !start.is_null() {
                    (s.event_destroy)(start);
                }
                if !end.is_null() {
                    (s.event_destroy)(end);
                }
            }
            return Err(e);
        }
        Ok(c.flights.insert((start, end)))
    }
}

impl AsyncCopies for HipMemory {
    unsafe fn start(
        &self,
        segment: SegmentHandle,
        offset: u64,
        len: usize,
        host: HostSide,
    ) -> Result<PendingCopy, DeviceError> {
        check_bounds(offset, len, self.size_of(segment)?)?;
        let device = segment.0 + offset;
        match host {
            HostSide::Into(dst) => {
                self.start_async(dst.cast(), device as *const c_void, len, false)
            }
            HostSide::From(src) => self.start_async(device as *mut c_void, src.cast(), len, true),
        }
    }

    fn wait(&self, copy: PendingCopy) -> Result<Option<std::time::Duration>, DeviceError> {
        let (Some(s), Some(c)) = (self.hip.streams, self.copies.as_ref()) else {
            return Err(DeviceError::Unsupported("no HIP streams".into()));
        };
        let (start, end) = c.flights.take(copy)?;
        self.current()?;
        let mut ms = 0f32;
        // SAFETY: both events were recorded on the copy stream; destroyed once here.
        let (synced, timed) = unsafe {
            let synced = (s.event_synchronize)(end);
            let timed = (s.event_elapsed)(&mut ms, start, end);
            (s.event_destroy)(start);
            (s.event_destroy)(end);
            (synced, timed)
        };
        self.call("hipEventSynchronize", synced)?;
        Ok((timed == HIP_SUCCESS)
            .then(|| std::time::Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1e3)))
    }
}

impl Drop for HipMemory {
    fn drop(&mut self) {
        if let (Some(s), Some(c)) = (self.hip.streams, self.copies.take()) {
            let flights = c.flights.drain();
            // SAFETY: each event and the stream are ours, released once after their copies.
            unsafe {
                for (start, end) in flights {
                    (s.event_synchronize)(end);
                    (s.event_destroy)(start);
                    (s.event_destroy)(end);
                }
                (s.stream_destroy)(c.stream);
            }
        }
        let live: Vec<SegmentHandle> = self.segments.drain().into_iter().map(|(h, _)| h).collect();
        if self.current().is_ok() {
            for handle in live {
                // SAFETY: each pointer came from hipMalloc and is freed once.
                unsafe { (self.hip.free)(handle.0 as *mut c_void) };
            }
        }
    }
}

impl DeviceMemory for HipMemory {
    fn reserve_api(&self) -> crate::device::Allocator {
        crate::device::Allocator::HipMalloc
    }

    fn async_copies(&self) -> Option<&dyn AsyncCopies> {
        self.copies.is_some().then_some(self as &dyn AsyncCopies)
    }

    fn name(&self) -> String {
        self.name.clone()
    }

    #[expect(
        clippy::cast_possible_truncation,
        reason = "usize is 64 bits (lib.rs refuses other targets)"
    )]
    fn reserve(&self, bytes: u64) -> Result<Segment, DeviceError> {
        self.current()?;
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid out-pointer; device selected.
        match unsafe { (self.hip.malloc)(&mut ptr, bytes as usize) } {
            HIP_SUCCESS => {
                let handle = SegmentHandle(ptr as u64);
                self.segments.insert_at(handle, bytes);
                Ok(Segment {
                    handle,
                    address: Some(ptr as u64),
                    size: bytes,
                })
            }
            HIP_ERROR_OUT_OF_MEMORY => Err(DeviceError::OutOfMemory { requested: bytes }),
            other => Err(DeviceError::Backend(format!(
                "hipMalloc returned hipError {other}"
            ))),
        }
    }

    fn release(&self, segment: SegmentHandle) -> Result<(), DeviceError> {
        self.segments.remove(segment)?;
        self.current()?;
        // SAFETY: from hipMalloc, removed from the map, so freed once.
        self.call("hipFree", unsafe {
            (self.hip.free)(segment.0 as *mut c_void)
        })
    }

    fn mem_info(&self) -> Result<(u64, u64), DeviceError> {
        self.current()?;
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: valid out-pointers.
        self.call("hipMemGetInfo", unsafe {
            (self.hip.mem_get_info)(&mut free, &mut total)
        })?;
        Ok((free as u64, total as u64))
    }

    fn write(&self, segment: SegmentHandle, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        check_bounds(offset, data.len(), self.size_of(segment)?)?;
        self.current()?;
        let dst = (segment.0 + offset) as *mut c_void;
        // SAFETY: bounds checked; synchronous copy from a host slice.
        self.call("hipMemcpy", unsafe {
            (self.hip.memcpy)(
                dst,
                data.as_ptr().cast(),
                data.len(),
                HIP_MEMCPY_HOST_TO_DEVICE,
            )
        })
    }

    fn read(&self, segment: SegmentHandle, offset: u64, out: &mut [u8]) -> Result<(), DeviceError> {
        check_bounds(offset, out.len(), self.size_of(segment)?)?;
        self.current()?;
        let src = (segment.0 + offset) as *const c_void;
        // SAFETY: bounds checked; synchronous copy into a host slice.
        self.call("hipMemcpy", unsafe {
            (self.hip.memcpy)(
                out.as_mut_ptr().cast(),
                src,
                out.len(),
                HIP_MEMCPY_DEVICE_TO_HOST,
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    #[test]
    fn reads_amdgpu_sysfs() {
        let root = tempfile::tempdir().unwrap();
        let card = root.path().join("class/drm/card1/device");
        write(&card.join("vendor"), "0x1002\n");
        write(&card.join("device"), "0x744c\n");
        write(&card.join("mem_info_vram_total"), "25753026560\n");
        write(&card.join("mem_info_vram_used"), "753026560\n");
        write(&card.join("mem_info_gtt_total"), "16000000000\n");
        write(&card.join("unique_id"), "a1b2c3\n");
        // A non-AMD card and a connector entry are skipped.
        write(
            &root.path().join("class/drm/card0/device/vendor"),
            "0x8086\n",
        );
        write(
            &root
                .path()
                .join("class/drm/card0/device/mem_info_vram_total"),
            "1\n",
        );
        fs::create_dir_all(root.path().join("class/drm/card1-DP-1")).unwrap();
        write(&root.path().join("module/amdgpu/version"), "6.8.5\n");

        let devices = probe_sysfs(root.path());
        assert_eq!(devices.len(), 1);
        let d = &devices[0];
        assert_eq!(d.index, 0);
        assert_eq!(d.name, "AMD GPU 0x744c");
        assert_eq!(d.total_bytes, 25_753_026_560);
        assert_eq!(d.free_bytes, Some(25_000_000_000));
        assert_eq!(d.device_type, DeviceType::Gpu);
        assert_eq!(d.uuid.as_deref(), Some("a1b2c3"));
        assert_eq!(d.driver_version.as_deref(), Some("amdgpu 6.8.5"));
    }

    #[test]
    fn empty_sysfs_has_no_devices() {
        let root = tempfile::tempdir().unwrap();
        assert!(probe_sysfs(root.path()).is_empty());
    }
}
