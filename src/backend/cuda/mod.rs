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
    check_bounds, lock, Allocator, AsyncCopies, DeviceError, DeviceMemory, Flights, HostSide,
    NativeAllocator, NativePeaks, PendingCopy, Segment, SegmentHandle, SegmentTable, VirtualMemory,
};

mod copies;
mod memory;
mod stream_pool;

use stream_pool::StreamPool;

pub use memory::CudaMemory;

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

#[expect(
    clippy::cast_possible_truncation,
    reason = "a fixed 256-byte name buffer; a fixed 32-byte bus-id buffer; device ordinals come from the driver's own count, an int"
)]
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
