//! NVIDIA CUDA through the driver API (libcuda), loaded at run time by cudarc.
//!
//! cudarc's loader panics when libcuda is missing and on the first call of a function the
//! library lacks, so this file checks both before calling anything: `is_culib_present()` first,
//! then every symbol gpumem uses.

use std::ffi::{c_char, c_int, CStr};

use cudarc::driver::sys::{self, CUdevice, CUdevice_attribute, CUresult};

use super::isolate::step;
use super::{Backend, BackendKind, DeviceInfo, DeviceType, FreeScope, Unavailable};
use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::device::{
    check_bounds, lock, AsyncCopies, DeviceError, DeviceMemory, Flights, HostSide, PendingCopy,
    Segment, SegmentHandle, SegmentTable, VirtualMemory,
};

/// A page-locked staging buffer of at least `len` bytes: a spare one, else a new one.
fn take_pinned(copies: &Copies, len: usize) -> Result<Pinned, DeviceError> {
    let mut spare = lock(&copies.spare);
    if let Some(i) = spare.iter().position(|p| p.len >= len) {
        return Ok(spare.swap_remove(i));
    }
    drop(spare);
    let mut ptr: *mut std::ffi::c_void = std::ptr::null_mut();
    // SAFETY: valid out-pointer; freed with cuMemFreeHost when the device is dropped.
    match unsafe { sys::cuMemHostAlloc(&mut ptr, len.max(1), 0) } {
        CUresult::CUDA_SUCCESS => Ok(Pinned {
            ptr: ptr.cast(),
            len: len.max(1),
        }),
        CUresult::CUDA_ERROR_OUT_OF_MEMORY => Err(DeviceError::OutOfMemory {
            requested: len as u64,
        }),
        other => Err(DeviceError::Backend(format!(
            "cuMemHostAlloc returned {other:?}"
        ))),
    }
}

/// NVIDIA GPUs through the CUDA driver API (`libcuda`), loaded at run time.
#[derive(Debug, Clone, Copy, Default)]
pub struct CudaBackend;

/// Every driver function this file calls; all are checked before the first call.
const SYMBOLS: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetName",
    "cuDeviceTotalMem_v2",
    "cuDeviceGetAttribute",
    "cuDeviceGetPCIBusId",
    "cuDeviceGetUuid",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxSetCurrent",
    "cuMemGetInfo_v2",
];

fn library_candidates() -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for name in cudarc::get_lib_name_candidates("cuda") {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// Makes sure libcuda can be loaded and has `symbols`, so no cudarc call can panic.
pub(crate) fn ensure_driver(symbols: &[&str]) -> Result<(), Unavailable> {
    step("dlopen libcuda");
    // SAFETY: only probes for the library with dlopen; runs no driver code besides initialisers.
    if !unsafe { sys::is_culib_present() } {
        return Err(super::library_unavailable(library_candidates()));
    }
    // SAFETY: `is_culib_present` succeeded, so `culib` finds the same library and cannot panic.
    let lib = unsafe { sys::culib() };
    for symbol in symbols {
        // SAFETY: looking a symbol up does not call it; the pointer type is irrelevant here.
        if unsafe { lib.get::<*const ()>(symbol.as_bytes()) }.is_err() {
            return Err(Unavailable::MissingSymbol {
                library: "libcuda".into(),
                symbol: symbol.to_string(),
            });
        }
    }
    Ok(())
}

/// A failed driver call, with the function and the driver's error name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CuError {
    pub(crate) call: &'static str,
    pub(crate) result: CUresult,
}

impl std::fmt::Display for CuError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} returned {:?}", self.call, self.result)
    }
}

pub(crate) fn check(call: &'static str, result: CUresult) -> Result<(), CuError> {
    if result == CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(CuError { call, result })
    }
}

fn attribute(device: CUdevice, attr: CUdevice_attribute) -> Option<i32> {
    let mut value: c_int = 0;
    // SAFETY: `value` is a valid out-pointer; symbol presence was checked.
    check("cuDeviceGetAttribute", unsafe {
        sys::cuDeviceGetAttribute(&mut value, attr, device)
    })
    .ok()
    .map(|_| value)
}

/// Initialises the driver and returns the number of devices.
pub(crate) fn init_and_count() -> Result<usize, Unavailable> {
    ensure_driver(SYMBOLS)?;
    step("cuInit");
    // SAFETY: symbols were checked; cuInit may be called any number of times.
    match unsafe { sys::cuInit(0) } {
        CUresult::CUDA_SUCCESS => {}
        CUresult::CUDA_ERROR_NO_DEVICE => return Err(Unavailable::NoDevices),
        other => {
            return Err(Unavailable::DriverNotLoaded(format!(
                "cuInit returned {other:?}"
            )))
        }
    }
    let mut count: c_int = 0;
    step("cuDeviceGetCount");
    // SAFETY: valid out-pointer.
    check("cuDeviceGetCount", unsafe {
        sys::cuDeviceGetCount(&mut count)
    })
    .map_err(|e| Unavailable::Failed(e.to_string()))?;
    Ok(usize::try_from(count).unwrap_or(0))
}

/// Runs `f` with the device's primary context current, releasing the context afterwards.
pub(crate) fn with_primary_context<T>(
    device: CUdevice,
    f: impl FnOnce() -> Result<T, CuError>,
) -> Result<T, CuError> {
    let mut ctx = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the context is released below on every path.
    check("cuDevicePrimaryCtxRetain", unsafe {
        sys::cuDevicePrimaryCtxRetain(&mut ctx, device)
    })?;
    // SAFETY: `ctx` was just retained.
    let result = check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(ctx) }).and_then(|_| f());
    // SAFETY: balances the retain above.
    unsafe { sys::cuDevicePrimaryCtxRelease_v2(device) };
    result
}

fn describe(index: usize, driver_version: Option<String>) -> Result<DeviceInfo, CuError> {
    step(&format!("cuDeviceGet* for device {index}"));
    let mut device: CUdevice = 0;
    // SAFETY: valid out-pointer; index < count.
    check("cuDeviceGet", unsafe {
        sys::cuDeviceGet(&mut device, index as c_int)
    })?;
    let mut name = [0 as c_char; 256];
    // SAFETY: the buffer holds `len` bytes and the driver NUL-terminates within it.
    check("cuDeviceGetName", unsafe {
        sys::cuDeviceGetName(name.as_mut_ptr(), name.len() as c_int, device)
    })?;
    // SAFETY: NUL-terminated by the driver (and the buffer was zeroed).
    let name = unsafe { CStr::from_ptr(name.as_ptr()) }
        .to_string_lossy()
        .trim()
        .to_string();
    let mut total: usize = 0;
    // SAFETY: valid out-pointer.
    check("cuDeviceTotalMem_v2", unsafe {
        sys::cuDeviceTotalMem_v2(&mut total, device)
    })?;
    let integrated =
        attribute(device, CUdevice_attribute::CU_DEVICE_ATTRIBUTE_INTEGRATED) == Some(1);
    let mut info = DeviceInfo::new(
        index,
        name,
        if integrated {
            DeviceType::IntegratedGpu
        } else {
            DeviceType::Gpu
        },
        total as u64,
    );
    info.vendor = Some("NVIDIA".into());
    info.unified_memory = integrated;
    info.max_alloc_bytes = Some(total as u64);
    info.driver_version = driver_version;
    if let (Some(major), Some(minor)) = (
        attribute(
            device,
            CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
        ),
        attribute(
            device,
            CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
        ),
    ) {
        info.compute_capability = Some(format!("{major}.{minor}"));
    }
    let mut bus = [0 as c_char; 32];
    // SAFETY: the buffer holds `len` bytes.
    if unsafe { sys::cuDeviceGetPCIBusId(bus.as_mut_ptr(), bus.len() as c_int, device) }
        == CUresult::CUDA_SUCCESS
    {
        // SAFETY: NUL-terminated within the zeroed buffer.
        info.pci_bus_id = Some(
            unsafe { CStr::from_ptr(bus.as_ptr()) }
                .to_string_lossy()
                .to_lowercase(),
        );
    }
    let mut uuid = sys::CUuuid { bytes: [0; 16] };
    // SAFETY: valid out-pointer.
    if unsafe { sys::cuDeviceGetUuid(&mut uuid, device) } == CUresult::CUDA_SUCCESS {
        let hex: String = uuid
            .bytes
            .iter()
            .map(|b| format!("{:02x}", *b as u8))
            .collect();
        info.uuid = Some(format!(
            "GPU-{}-{}-{}-{}-{}",
            &hex[0..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..]
        ));
    }
    step(&format!(
        "cuDevicePrimaryCtxRetain/cuMemGetInfo_v2 for device {index}"
    ));
    let (free, _) = with_primary_context(device, || {
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: valid out-pointers; a context is current.
        check("cuMemGetInfo_v2", unsafe {
            sys::cuMemGetInfo_v2(&mut free, &mut total)
        })?;
        Ok((free, total))
    })?;
    info.free_bytes = Some(free as u64);
    info.free_scope = Some(FreeScope::Device);
    Ok(info)
}

impl Backend for CudaBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn probe(&self) -> Result<Vec<DeviceInfo>, Unavailable> {
        let count = init_and_count()?;
        let mut version: c_int = 0;
        // SAFETY: valid out-pointer; symbol checked.
        let driver_version = (unsafe { sys::cuDriverGetVersion(&mut version) }
            == CUresult::CUDA_SUCCESS)
            .then(|| format!("CUDA {}.{}", version / 1000, (version % 1000) / 10));
        (0..count)
            .map(|i| {
                describe(i, driver_version.clone()).map_err(|e| Unavailable::Failed(e.to_string()))
            })
            .collect()
    }
}

/// Functions the allocation path calls, checked before the first call.
const MEMORY_SYMBOLS: &[&str] = &[
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemcpyHtoD_v2",
    "cuMemcpyDtoH_v2",
];

/// A retained primary context. CUDA contexts may be made current on any thread.
struct Context(sys::CUcontext);

// SAFETY: a CUDA context handle is usable from any thread once made current there.
unsafe impl Send for Context {}
// SAFETY: as above; the driver serialises its own use of the context.
unsafe impl Sync for Context {}

/// Functions of the virtual memory management API; without them expandable segments are off.
const VMM_SYMBOLS: &[&str] = &[
    "cuMemGetAllocationGranularity",
    "cuMemAddressReserve",
    "cuMemAddressFree",
    "cuMemCreate",
    "cuMemRelease",
    "cuMemMap",
    "cuMemUnmap",
    "cuMemSetAccess",
];

/// The physical allocation mapped at each granule's offset of an address range.
type Granules = BTreeMap<u64, sys::CUmemGenericAllocationHandle>;

/// A live segment: a `cuMemAlloc` block, or an address range with memory mapped into it.
struct CudaSeg {
    size: u64,
    /// For an address range: the physical allocation mapped at each granule's offset.
    granules: Option<Granules>,
}

impl CudaSeg {
    /// Checks that `offset..offset + len` is inside the segment and, for a range, mapped.
    fn check(&self, offset: u64, len: usize, granule: u64) -> Result<(), DeviceError> {
        check_bounds(offset, len, self.size)?;
        let Some(granules) = &self.granules else {
            return Ok(());
        };
        if len == 0 {
            return Ok(());
        }
        let first = offset / granule * granule;
        let end = offset + len as u64;
        let mapped = granules.range(first..end).count() as u64;
        if mapped == (end - first).div_ceil(granule) {
            Ok(())
        } else {
            Err(DeviceError::OutOfBounds {
                offset,
                len: len as u64,
                size: self.size,
            })
        }
    }
}

/// Device memory through `cuMemAlloc`/`cuMemFree` under the device's primary context, and
/// (where the driver has virtual memory management) address ranges mapped granule by granule.
pub struct CudaMemory {
    name: String,
    device: CUdevice,
    context: Context,
    /// Live segments by device pointer, for bounds checks and clean-up on drop.
    segments: SegmentTable<CudaSeg>,
    /// The mapping granule, when the device and driver support virtual memory management.
    granularity: Option<u64>,
    /// Asynchronous copies: a stream of their own, page-locked staging and the copies in flight.
    copies: Option<Copies>,
}

/// Functions the asynchronous copies call; without them transfers use blocking copies.
const ASYNC_SYMBOLS: &[&str] = &[
    "cuStreamCreate",
    "cuStreamDestroy_v2",
    "cuEventCreate",
    "cuEventDestroy_v2",
    "cuEventRecord",
    "cuEventSynchronize",
    "cuEventElapsedTime",
    "cuMemHostAlloc",
    "cuMemFreeHost",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
];

/// A page-locked host buffer (what lets `cuMemcpy*Async` run while the host goes on).
struct Pinned {
    ptr: *mut u8,
    len: usize,
}

/// A copy in flight: its events, its staging buffer and, for a read, where the bytes go.
struct Flight {
    start: sys::CUevent,
    end: sys::CUevent,
    staging: Pinned,
    len: usize,
    read_into: Option<*mut u8>,
}

/// The stream and its bookkeeping. Raw driver handles and host pointers, used under the locks.
struct Copies {
    stream: sys::CUstream,
    spare: Mutex<Vec<Pinned>>,
    flights: Flights<Flight>,
}

// SAFETY: the stream and events are driver handles usable from any thread with the context
// current; the host pointers are page-locked buffers this object owns, touched under the locks.
unsafe impl Send for Copies {}
// SAFETY: as above.
unsafe impl Sync for Copies {}

impl CudaMemory {
    /// Opens CUDA device `index`.
    pub fn open(index: usize) -> Result<Self, Unavailable> {
        let count = init_and_count()?;
        ensure_driver(MEMORY_SYMBOLS)?;
        if index >= count {
            return Err(Unavailable::Failed(format!(
                "no CUDA device {index} ({count} found)"
            )));
        }
        let info = describe(index, None).map_err(|e| Unavailable::Failed(e.to_string()))?;
        let mut device: CUdevice = 0;
        // SAFETY: valid out-pointer; index < count.
        check("cuDeviceGet", unsafe {
            sys::cuDeviceGet(&mut device, index as c_int)
        })
        .map_err(|e| Unavailable::Failed(e.to_string()))?;
        let mut ctx = std::ptr::null_mut();
        // SAFETY: valid out-pointer; released in Drop.
        check("cuDevicePrimaryCtxRetain", unsafe {
            sys::cuDevicePrimaryCtxRetain(&mut ctx, device)
        })
        .map_err(|e| Unavailable::Failed(e.to_string()))?;
        let mut memory = CudaMemory {
            name: format!("cuda:{index} ({})", info.name),
            device,
            context: Context(ctx),
            segments: SegmentTable::default(),
            granularity: None,
            copies: None,
        };
        memory.granularity = memory.vmm_granularity();
        memory.copies = memory.make_copies();
        Ok(memory)
    }

    /// The minimum mapping granule, when the device supports virtual memory management and
    /// the driver exports its functions (older drivers and some stand-ins do not: then
    /// expandable segments fall back to ordinary ones).
    fn vmm_granularity(&self) -> Option<u64> {
        let supported = CUdevice_attribute::CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED;
        if attribute(self.device, supported) != Some(1) || ensure_driver(VMM_SYMBOLS).is_err() {
            return None;
        }
        let prop = self.allocation_prop();
        let mut granularity = 0usize;
        // SAFETY: valid out-pointer and property; the symbol was checked above.
        check("cuMemGetAllocationGranularity", unsafe {
            sys::cuMemGetAllocationGranularity(
                &mut granularity,
                &prop,
                sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
            )
        })
        .ok()?;
        let granularity = granularity as u64;
        granularity.is_power_of_two().then_some(granularity)
    }

    /// A stream for asynchronous copies, when the driver exports what they need.
    fn make_copies(&self) -> Option<Copies> {
        ensure_driver(ASYNC_SYMBOLS).ok()?;
        self.current().ok()?;
        let mut stream: sys::CUstream = std::ptr::null_mut();
        // SAFETY: valid out-pointer; the context is current; symbols checked above.
        check("cuStreamCreate", unsafe {
            sys::cuStreamCreate(&mut stream, 0)
        })
        .ok()?;
        Some(Copies {
            stream,
            spare: Mutex::new(Vec::new()),
            flights: Flights::default(),
        })
    }

    /// Starts a copy between `segment` and a staging buffer, recording events around it.
    fn start_copy(
        &self,
        segment: SegmentHandle,
        offset: u64,
        len: usize,
        host: HostSide,
    ) -> Result<PendingCopy, DeviceError> {
        let read_into = host.read_into();
        let copies = self
            .copies
            .as_ref()
            .ok_or_else(|| DeviceError::Unsupported("no asynchronous copies".into()))?;
        self.check_access(segment, offset, len)?;
        self.current()?;
        let staging = take_pinned(copies, len)?;
        if let Some(src) = host.write_from() {
            // SAFETY: the caller's `src` holds `len` bytes; the staging buffer at least as many.
            unsafe { std::ptr::copy_nonoverlapping(src, staging.ptr, len) };
        }
        let backend =
            |call: &str, r: CUresult| DeviceError::Backend(format!("{call} returned {r:?}"));
        let (mut start, mut end): (sys::CUevent, sys::CUevent) =
            (std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: valid out-pointers; the context is current; the device span was checked and
        // the staging buffer is page-locked and ours until the copy is waited for.
        let result = unsafe {
            let steps = [
                ("cuEventCreate", sys::cuEventCreate(&mut start, 0)),
                ("cuEventCreate", sys::cuEventCreate(&mut end, 0)),
                ("cuEventRecord", sys::cuEventRecord(start, copies.stream)),
            ];
            match steps
                .into_iter()
                .find(|(_, r)| *r != CUresult::CUDA_SUCCESS)
            {
                Some((call, r)) => Err(backend(call, r)),
                None => {
                    let device = segment.0 + offset;
                    let copied = match read_into {
                        Some(_) => sys::cuMemcpyDtoHAsync_v2(
                            staging.ptr.cast(),
                            device,
                            len,
                            copies.stream,
                        ),
                        None => sys::cuMemcpyHtoDAsync_v2(
                            device,
                            staging.ptr.cast(),
                            len,
                            copies.stream,
                        ),
                    };
                    let recorded = sys::cuEventRecord(end, copies.stream);
                    match (copied, recorded) {
                        (CUresult::CUDA_SUCCESS, CUresult::CUDA_SUCCESS) => Ok(()),
                        (CUresult::CUDA_SUCCESS, r) => Err(backend("cuEventRecord", r)),
                        (r, _) => Err(backend("cuMemcpyAsync", r)),
                    }
                }
            }
        };
        if let Err(e) = result {
            // SAFETY: nothing was queued that uses them past this point (a failed enqueue).
            unsafe {
                sys::cuEventDestroy_v2(start);
                sys::cuEventDestroy_v2(end);
            }
            lock(&copies.spare).push(staging);
            return Err(e);
        }
        Ok(copies.flights.insert(Flight {
            start,
            end,
            staging,
            len,
            read_into,
        }))
    }

    /// Pinned device memory on this device.
    fn allocation_prop(&self) -> sys::CUmemAllocationProp {
        // SAFETY: a plain C struct for which all-zero is the documented starting value.
        let mut prop: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
        prop.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = self.device;
        prop
    }

    /// Unmaps and frees the granules at `offsets` of the range at `base`.
    fn unmap_granules(&self, base: u64, granules: Vec<(u64, sys::CUmemGenericAllocationHandle)>) {
        let Some(granule) = self.granularity else {
            return;
        };
        for (offset, handle) in granules {
            // SAFETY: the granule was mapped by `map` and is unmapped and released once.
            unsafe {
                sys::cuMemUnmap(base + offset, granule as usize);
                sys::cuMemRelease(handle);
            }
        }
    }

    /// Runs `f` on a range's granule map once `offset..offset + bytes` is known to be whole
    /// granules inside it; `f` gets the map, the span's end and the error for a bad span.
    fn with_span<R>(
        &self,
        range: SegmentHandle,
        offset: u64,
        bytes: u64,
        f: impl FnOnce(&mut Granules, u64, DeviceError) -> Result<R, DeviceError>,
    ) -> Result<R, DeviceError> {
        let granule = self.granularity.unwrap_or(2 << 20);
        self.segments.with_mut(range, |seg| {
            let bad = DeviceError::OutOfBounds {
                offset,
                len: bytes,
                size: seg.size,
            };
            let Some(granules) = seg.granules.as_mut() else {
                return Err(DeviceError::Unsupported("not an address range".into()));
            };
            let end = offset.checked_add(bytes).filter(|&e| e <= seg.size);
            match end {
                Some(end) if offset % granule == 0 && bytes % granule == 0 && bytes > 0 => {
                    f(granules, end, bad)
                }
                _ => Err(bad),
            }
        })
    }

    /// Gives a segment back to the driver (a range: its granules, then its addresses).
    fn free_segment(&self, handle: SegmentHandle, seg: CudaSeg) -> Result<(), DeviceError> {
        match seg.granules {
            None => {
                // SAFETY: the pointer came from cuMemAlloc and left the table, so freed once.
                check("cuMemFree_v2", unsafe { sys::cuMemFree_v2(handle.0) })
            }
            Some(granules) => {
                self.unmap_granules(handle.0, granules.into_iter().collect());
                // SAFETY: the range came from cuMemAddressReserve and left the table.
                check("cuMemAddressFree", unsafe {
                    sys::cuMemAddressFree(handle.0, seg.size as usize)
                })
            }
        }
        .map_err(|e| DeviceError::Backend(e.to_string()))
    }

    /// Makes the context current on this thread (cheap when it already is).
    fn current(&self) -> Result<(), DeviceError> {
        // SAFETY: the context is retained for this object's lifetime.
        check("cuCtxSetCurrent", unsafe {
            sys::cuCtxSetCurrent(self.context.0)
        })
        .map_err(|e| DeviceError::Backend(e.to_string()))
    }

    /// Checks an access of `len` bytes at `offset` of `segment`.
    fn check_access(
        &self,
        segment: SegmentHandle,
        offset: u64,
        len: usize,
    ) -> Result<(), DeviceError> {
        let granule = self.granularity.unwrap_or(1);
        self.segments
            .with(segment, |seg| seg.check(offset, len, granule))
    }
}

impl Drop for CudaMemory {
    fn drop(&mut self) {
        if let Some(copies) = self.copies.take() {
            if self.current().is_ok() {
                let flights = copies.flights.drain();
                // SAFETY: each handle and buffer is ours and released once, after its copy.
                unsafe {
                    for f in flights {
                        sys::cuEventSynchronize(f.end);
                        sys::cuEventDestroy_v2(f.start);
                        sys::cuEventDestroy_v2(f.end);
                        sys::cuMemFreeHost(f.staging.ptr.cast());
                    }
                    for p in lock(&copies.spare).drain(..) {
                        sys::cuMemFreeHost(p.ptr.cast());
                    }
                    sys::cuStreamDestroy_v2(copies.stream);
                }
            }
        }
        let segments = self.segments.drain();
        if self.current().is_ok() {
            for (handle, seg) in segments {
                let _ = self.free_segment(handle, seg);
            }
        }
        // SAFETY: balances the retain in `open`.
        unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.device) };
    }
}

impl DeviceMemory for CudaMemory {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn reserve(&self, bytes: u64) -> Result<Segment, DeviceError> {
        self.current()?;
        let mut ptr: sys::CUdeviceptr = 0;
        // SAFETY: valid out-pointer; the context is current.
        match unsafe { sys::cuMemAlloc_v2(&mut ptr, bytes as usize) } {
            CUresult::CUDA_SUCCESS => {
                let handle = SegmentHandle(ptr);
                self.segments.insert_at(
                    handle,
                    CudaSeg {
                        size: bytes,
                        granules: None,
                    },
                );
                Ok(Segment {
                    handle,
                    address: Some(ptr),
                    size: bytes,
                })
            }
            CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                Err(DeviceError::OutOfMemory { requested: bytes })
            }
            other => Err(DeviceError::Backend(format!(
                "cuMemAlloc_v2 returned {other:?}"
            ))),
        }
    }

    fn release(&self, segment: SegmentHandle) -> Result<(), DeviceError> {
        let seg = self.segments.remove(segment)?;
        self.current()?;
        self.free_segment(segment, seg)
    }

    fn mem_info(&self) -> Result<(u64, u64), DeviceError> {
        self.current()?;
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: valid out-pointers; the context is current.
        check("cuMemGetInfo_v2", unsafe {
            sys::cuMemGetInfo_v2(&mut free, &mut total)
        })
        .map_err(|e| DeviceError::Backend(e.to_string()))?;
        Ok((free as u64, total as u64))
    }

    fn write(&self, segment: SegmentHandle, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.check_access(segment, offset, data.len())?;
        self.current()?;
        // SAFETY: bounds checked; synchronous copy from a host slice.
        check("cuMemcpyHtoD_v2", unsafe {
            sys::cuMemcpyHtoD_v2(segment.0 + offset, data.as_ptr().cast(), data.len())
        })
        .map_err(|e| DeviceError::Backend(e.to_string()))
    }

    fn read(&self, segment: SegmentHandle, offset: u64, out: &mut [u8]) -> Result<(), DeviceError> {
        self.check_access(segment, offset, out.len())?;
        self.current()?;
        // SAFETY: bounds checked; synchronous copy into a host slice.
        check("cuMemcpyDtoH_v2", unsafe {
            sys::cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), segment.0 + offset, out.len())
        })
        .map_err(|e| DeviceError::Backend(e.to_string()))
    }

    fn virtual_memory(&self) -> Option<&dyn VirtualMemory> {
        self.granularity
            .is_some()
            .then_some(self as &dyn VirtualMemory)
    }

    fn async_copies(&self) -> Option<&dyn AsyncCopies> {
        self.copies.is_some().then_some(self as &dyn AsyncCopies)
    }
}

impl VirtualMemory for CudaMemory {
    fn granularity(&self) -> u64 {
        self.granularity.unwrap_or(2 << 20)
    }

    fn reserve_range(&self, bytes: u64) -> Result<Segment, DeviceError> {
        let granule = self.granularity();
        if bytes == 0 || bytes % granule != 0 {
            return Err(DeviceError::Unsupported(format!(
                "an address range of {bytes} bytes is not a whole number of granules"
            )));
        }
        self.current()?;
        let mut ptr: sys::CUdeviceptr = 0;
        // SAFETY: valid out-pointer; the context is current; VMM symbols were checked.
        match unsafe { sys::cuMemAddressReserve(&mut ptr, bytes as usize, 0, 0, 0) } {
            CUresult::CUDA_SUCCESS => {}
            CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                return Err(DeviceError::OutOfMemory { requested: bytes })
            }
            other => {
                return Err(DeviceError::Backend(format!(
                    "cuMemAddressReserve returned {other:?}"
                )))
            }
        }
        let handle = SegmentHandle(ptr);
        self.segments.insert_at(
            handle,
            CudaSeg {
                size: bytes,
                granules: Some(BTreeMap::new()),
            },
        );
        Ok(Segment {
            handle,
            address: Some(ptr),
            size: bytes,
        })
    }

    fn map(&self, range: SegmentHandle, offset: u64, bytes: u64) -> Result<(), DeviceError> {
        let granule = self.granularity();
        self.current()?;
        let prop = self.allocation_prop();
        let access = sys::CUmemAccessDesc {
            location: prop.location,
            flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        self.with_span(range, offset, bytes, |granules, end, bad| {
            if granules.range(offset..end).next().is_some() {
                return Err(bad);
            }
            // One physical allocation per granule, so any granule can be unmapped later.
            let mut made = Vec::new();
            let mut failure = None;
            for at in (offset..end).step_by(granule as usize) {
                let mut handle: sys::CUmemGenericAllocationHandle = 0;
                // SAFETY: valid out-pointer and property; the context is current.
                let created = unsafe { sys::cuMemCreate(&mut handle, granule as usize, &prop, 0) };
                if created != CUresult::CUDA_SUCCESS {
                    failure = Some(if created == CUresult::CUDA_ERROR_OUT_OF_MEMORY {
                        DeviceError::OutOfMemory { requested: bytes }
                    } else {
                        DeviceError::Backend(format!("cuMemCreate returned {created:?}"))
                    });
                    break;
                }
                // SAFETY: the granule lies inside the reserved range and is not mapped.
                let mapped = unsafe { sys::cuMemMap(range.0 + at, granule as usize, 0, handle, 0) };
                if mapped != CUresult::CUDA_SUCCESS {
                    // SAFETY: the handle was just created and is not mapped.
                    unsafe { sys::cuMemRelease(handle) };
                    failure = Some(DeviceError::Backend(format!(
                        "cuMemMap returned {mapped:?}"
                    )));
                    break;
                }
                made.push((at, handle));
            }
            if failure.is_none() {
                // SAFETY: the whole span was just mapped.
                let set =
                    unsafe { sys::cuMemSetAccess(range.0 + offset, bytes as usize, &access, 1) };
                if set != CUresult::CUDA_SUCCESS {
                    failure = Some(DeviceError::Backend(format!(
                        "cuMemSetAccess returned {set:?}"
                    )));
                }
            }
            if let Some(e) = failure {
                self.unmap_granules(range.0, made);
                return Err(e);
            }
            granules.extend(made);
            Ok(())
        })
    }

    fn unmap(&self, range: SegmentHandle, offset: u64, bytes: u64) -> Result<(), DeviceError> {
        let granule = self.granularity();
        self.current()?;
        self.with_span(range, offset, bytes, |granules, end, bad| {
            let inside: Vec<u64> = granules.range(offset..end).map(|(&o, _)| o).collect();
            if inside.len() as u64 != bytes / granule {
                return Err(bad);
            }
            let taken = inside
                .into_iter()
                .filter_map(|o| granules.remove(&o).map(|h| (o, h)))
                .collect();
            self.unmap_granules(range.0, taken);
            Ok(())
        })
    }
}

impl AsyncCopies for CudaMemory {
    unsafe fn start(
        &self,
        segment: SegmentHandle,
        offset: u64,
        len: usize,
        host: HostSide,
    ) -> Result<PendingCopy, DeviceError> {
        self.start_copy(segment, offset, len, host)
    }

    fn wait(&self, copy: PendingCopy) -> Result<Option<std::time::Duration>, DeviceError> {
        let copies = self
            .copies
            .as_ref()
            .ok_or_else(|| DeviceError::Unsupported("no asynchronous copies".into()))?;
        let flight = copies.flights.take(copy)?;
        self.current()?;
        let mut ms = 0f32;
        // SAFETY: the events were recorded on the stream by `start_copy`.
        let synced = unsafe { sys::cuEventSynchronize(flight.end) };
        // SAFETY: as above, both recorded.
        let timed = unsafe { sys::cuEventElapsedTime(&mut ms, flight.start, flight.end) };
        if synced == CUresult::CUDA_SUCCESS {
            if let Some(dst) = flight.read_into {
                // SAFETY: the copy into staging is complete; `dst` holds `len` bytes by the
                // caller's contract for `start_read`.
                unsafe { std::ptr::copy_nonoverlapping(flight.staging.ptr, dst, flight.len) };
            }
        }
        // SAFETY: the events are ours, destroyed once.
        unsafe {
            sys::cuEventDestroy_v2(flight.start);
            sys::cuEventDestroy_v2(flight.end);
        }
        lock(&copies.spare).push(flight.staging);
        check("cuEventSynchronize", synced).map_err(|e| DeviceError::Backend(e.to_string()))?;
        Ok((timed == CUresult::CUDA_SUCCESS)
            .then(|| std::time::Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1e3)))
    }
}
