//! OpenCL through the ICD loader (libOpenCL.so.1), loaded at run time by opencl3.
//!
//! Free memory is known only through AMD's `cl_amd_device_attribute_query`; compute capability
//! through NVIDIA's `cl_nv_device_attribute_query`; UUIDs through `cl_khr_device_uuid`.

use opencl3::device::{Device, CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_CPU, CL_DEVICE_TYPE_GPU};
use std::ptr;

use opencl3::command_queue::{enqueue_read_buffer, enqueue_write_buffer, CommandQueue};
use opencl3::context::Context;
use opencl3::error_codes::ClError;
use opencl3::memory::{Buffer, ClMem, CL_MEM_READ_WRITE};
use opencl3::platform::get_platforms;
use opencl3::types::{CL_BLOCKING, CL_NON_BLOCKING};

use crate::device::{
    check_bounds, AsyncCopies, Budget, DeviceError, DeviceMemory, HostSide, PendingCopy, Segment,
    SegmentHandle, SegmentTable,
};

use super::{Backend, BackendKind, DeviceInfo, DeviceType, FreeScope, Unavailable};

/// cl3's code for "the OpenCL library could not be loaded".
const DLOPEN_RUNTIME_LOAD_FAILED: i32 = -2000;
/// cl3's code for "the library lacks this function".
const DLOPEN_FUNCTION_NOT_AVAILABLE: i32 = -2001;
/// The ICD loader's code for "no platform (driver) installed".
const CL_PLATFORM_NOT_FOUND_KHR: i32 = -1001;

/// Any OpenCL platform's devices through the ICD loader, loaded at run time.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenclBackend;

fn library_name() -> String {
    std::env::var("OPENCL_DYLIB_PATH").unwrap_or_else(|_| {
        if cfg!(target_os = "windows") {
            "OpenCL.dll".into()
        } else if cfg!(target_os = "macos") {
            "/System/Library/Frameworks/OpenCL.framework/OpenCL".into()
        } else {
            "libOpenCL.so.1".into()
        }
    })
}

pub(crate) fn unavailable(err: ClError) -> Unavailable {
    match err.0 {
        DLOPEN_RUNTIME_LOAD_FAILED => super::library_unavailable(vec![library_name()]),
        DLOPEN_FUNCTION_NOT_AVAILABLE => Unavailable::MissingSymbol {
            library: library_name(),
            symbol: "an OpenCL 1.2 entry point".into(),
        },
        CL_PLATFORM_NOT_FOUND_KHR => Unavailable::DriverNotLoaded(
            "the ICD loader found no OpenCL platform (install a driver such as pocl-opencl-icd)"
                .into(),
        ),
        _ => Unavailable::Failed(format!("OpenCL error {err}")),
    }
}

/// Serialises platform and device enumeration: PoCL's lazy initialisation is not safe when
/// several threads enumerate at once (it can report no devices), and tests and probes do.
static ENUMERATION: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Every OpenCL device of every platform, in platform order; the index is this order.
pub(crate) fn device_ids() -> Result<Vec<opencl3::types::cl_device_id>, Unavailable> {
    let _guard = crate::device::lock(&ENUMERATION);
    super::isolate::step("clGetPlatformIDs");
    let platforms = get_platforms().map_err(unavailable)?;
    let mut ids = Vec::new();
    for platform in platforms {
        super::isolate::step("clGetDeviceIDs");
        match platform.get_devices(CL_DEVICE_TYPE_ALL) {
            Ok(mut found) => ids.append(&mut found),
            // CL_DEVICE_NOT_FOUND: a platform with no devices is not an error.
            Err(ClError(-1)) => {}
            Err(e) => return Err(unavailable(e)),
        }
    }
    Ok(ids)
}

fn format_uuid(bytes: &[u8]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    if hex.len() != 32 {
        return hex;
    }
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

fn describe(index: usize, device: &Device) -> Result<DeviceInfo, ClError> {
    let extensions = device.extensions().unwrap_or_default();
    let has = |ext: &str| extensions.split_whitespace().any(|e| e == ext);
    let unified = device.host_unified_memory().unwrap_or(false);
    let dev_type = device.dev_type()?;
    let device_type = if dev_type & CL_DEVICE_TYPE_GPU != 0 {
        if unified {
            DeviceType::IntegratedGpu
        } else {
            DeviceType::Gpu
        }
    } else if dev_type & CL_DEVICE_TYPE_CPU != 0 {
        DeviceType::Cpu
    } else {
        // Accelerators and custom devices.
        DeviceType::Other
    };
    let mut info = DeviceInfo::new(
        index,
        device.name()?.trim(),
        device_type,
        device.global_mem_size()?,
    );
    info.vendor = device.vendor().ok().map(|v| v.trim().to_string());
    info.max_alloc_bytes = device.max_mem_alloc_size().ok();
    info.unified_memory = unified || device_type == DeviceType::Cpu;
    if info.unified_memory {
        info.free_bytes = Some(super::host_shared_free(true, info.total_bytes));
        info.free_scope = Some(FreeScope::Device);
    }
    info.driver_version = device.driver_version().ok().map(|v| v.trim().to_string());
    info.compute_capability = if has("cl_nv_device_attribute_query") {
        match (
            device.compute_capability_major_nv(),
            device.compute_capability_minor_nv(),
        ) {
            (Ok(major), Ok(minor)) => Some(format!("{major}.{minor}")),
            _ => None,
        }
    } else {
        // "OpenCL 3.0 PoCL HSTR: ..." -> "OpenCL 3.0"
        device
            .version()
            .ok()
            .map(|v| v.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
    };
    if has("cl_nv_device_attribute_query") {
        if let (Ok(bus), Ok(slot)) = (device.pci_bus_id_nv(), device.pci_slot_id_nv()) {
            // NVIDIA reports the device number as the slot (an H200 at 00:06.0 gives 6).
            info.pci_bus_id = Some(format!("0000:{bus:02x}:{slot:02x}.0"));
        }
    }
    if has("cl_amd_device_attribute_query") {
        // The extension reports free memory in KiB.
        if let Ok(free_kib) = device.global_free_memory_amd() {
            info.free_bytes = Some(free_kib as u64 * 1024);
            info.free_scope = Some(FreeScope::Device);
        }
    }
    if has("cl_khr_device_uuid") {
        info.uuid = device.uuid_khr().ok().map(|u| format_uuid(&u));
    }
    Ok(info)
}

impl Backend for OpenclBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Opencl
    }

    fn probe(&self) -> Result<Vec<DeviceInfo>, Unavailable> {
        device_ids()?
            .into_iter()
            .enumerate()
            .map(|(index, id)| describe(index, &Device::new(id)).map_err(unavailable))
            .collect()
    }
}

/// Device memory through `clCreateBuffer` on one OpenCL device.
///
/// OpenCL reports no free memory (except AMD's extension), and some drivers (PoCL) commit
/// lazily, so the device's global memory size is enforced here: `mem_info` reports total minus
/// what this process reserved through this object.
pub struct OpenclMemory {
    name: String,
    model: String,
    total: u64,
    max_alloc: u64,
    align: u64,
    budget: Budget,
    /// The device's memory is host RAM (PoCL, integrated GPUs).
    host_shared: bool,
    // Field order matters: buffers are released before the queue and context.
    segments: SegmentTable<Buffer<u8>>,
    queue: CommandQueue,
    /// A second queue, with profiling, for the copies that run while the caller goes on.
    transfers: Option<CommandQueue>,
    device: Device,
    _context: Context,
}

impl OpenclMemory {
    /// Opens device `index` (in `discover` order) on a context of its own.
    pub fn open(index: usize) -> Result<Self, Unavailable> {
        let ids = device_ids()?;
        let id = *ids.get(index).ok_or_else(|| {
            Unavailable::Failed(format!("no OpenCL device {index} ({} found)", ids.len()))
        })?;
        let device = Device::new(id);
        let context = Context::from_device(&device).map_err(unavailable)?;
        Self::on_context(format!("opencl:{index}"), index, &device, context)
    }

    /// Opens `device` on the caller's own `context`, so that pool memory can be bound to the
    /// caller's kernels. The context is retained here and released when this is dropped; the
    /// caller keeps its own reference.
    ///
    /// # Safety
    /// `context` must be a valid OpenCL context that includes `device`.
    ///
    /// # Example
    /// The caller's context, a pool on it, and the `cl_mem` its kernels take:
    /// ```
    /// use std::sync::Arc;
    /// use gpumem::alloc::{MemoryConfig, Pool};
    /// use gpumem::backend::OpenclMemory;
    /// use opencl3::{context::Context, device::{Device, CL_DEVICE_TYPE_ALL}, platform::get_platforms};
    ///
    /// // No OpenCL driver here: nothing to show.
    /// let Some(id) = get_platforms().ok().and_then(|p| {
    ///     p.iter().find_map(|p| p.get_devices(CL_DEVICE_TYPE_ALL).ok()?.first().copied())
    /// }) else { return };
    /// let mine = Context::from_device(&Device::new(id)).unwrap();
    ///
    /// // SAFETY: `mine` is a live context holding `id`.
    /// let device = Arc::new(unsafe { OpenclMemory::with_context(mine.get(), id) }.unwrap());
    /// assert_eq!(device.native_context(), mine.get());
    /// let pool = Pool::new(device.clone(), MemoryConfig::default()).unwrap();
    /// let a = pool.allocate(4096).unwrap();
    /// let info = pool.info(&a).unwrap();
    /// let mem = device.native_buffer(info.segment).unwrap();
    /// // The buffer is in the caller's context: kernels built there can take it.
    /// let ctx = opencl3::memory::get_mem_object_info(mem, opencl3::memory::CL_MEM_CONTEXT).unwrap();
    /// assert_eq!(ctx.to_ptr() as opencl3::types::cl_context, mine.get());
    /// pool.free(a).unwrap();
    /// drop(pool);
    /// drop(device); // the caller's context outlives the pool
    /// ```
    pub unsafe fn with_context(
        context: opencl3::types::cl_context,
        device: opencl3::types::cl_device_id,
    ) -> Result<Self, Unavailable> {
        // SAFETY: a valid context by the caller's contract; the retain is released by the
        // Context wrapper when this device is dropped.
        unsafe { opencl3::context::context::retain_context(context) }
            .map_err(|e| unavailable(ClError(e)))?;
        let device = Device::new(device);
        let context = Context::new(context, &[device.id()]);
        Self::on_context("opencl (the caller's context)".into(), 0, &device, context)
    }

    /// The device on `context`: its queues, its size and alignment.
    fn on_context(
        label: String,
        index: usize,
        device: &Device,
        context: Context,
    ) -> Result<Self, Unavailable> {
        let info = describe(index, device).map_err(unavailable)?;
        #[allow(deprecated)] // clCreateCommandQueue: the OpenCL 1.2 call every driver has.
        let queue = CommandQueue::create_default(&context, 0).map_err(unavailable)?;
        #[allow(deprecated)]
        let transfers = CommandQueue::create_default(
            &context,
            opencl3::command_queue::CL_QUEUE_PROFILING_ENABLE,
        )
        .ok();
        // CL_DEVICE_MEM_BASE_ADDR_ALIGN is in bits.
        let align_bits: u64 = device.mem_base_addr_align().map(u64::from).unwrap_or(4096);
        Ok(OpenclMemory {
            name: format!("{label} ({})", info.name),
            model: info.name.clone(),
            total: info.total_bytes,
            max_alloc: info.max_alloc_bytes.unwrap_or(info.total_bytes),
            align: (align_bits / 8).max(1).next_power_of_two(),
            budget: Budget::new(Some(info.total_bytes)),
            host_shared: info.unified_memory,
            segments: SegmentTable::default(),
            queue,
            transfers,
            device: *device,
            _context: context,
        })
    }

    /// The `cl_mem` of `segment` ([`crate::alloc::AllocationInfo::segment`]), valid while the
    /// segment is reserved: an allocation is this buffer from its `offset`, to bind to a
    /// kernel as a sub-buffer or with the offset as an argument.
    pub fn native_buffer(
        &self,
        segment: SegmentHandle,
    ) -> Result<opencl3::types::cl_mem, DeviceError> {
        self.segments.with(segment, |buffer| Ok(buffer.get()))
    }

    /// The context every segment lives in.
    pub fn native_context(&self) -> opencl3::types::cl_context {
        self.context().get()
    }

    /// The device.
    pub fn native_device(&self) -> opencl3::types::cl_device_id {
        self.device.id()
    }

    /// The in-order queue the pool's blocking reads and writes go through; the caller's kernels
    /// on it see them in order.
    pub fn native_queue(&self) -> opencl3::types::cl_command_queue {
        self.queue.get()
    }

    fn context(&self) -> &Context {
        &self._context
    }

    fn mem(
        &self,
        segment: SegmentHandle,
        offset: u64,
        len: usize,
    ) -> Result<opencl3::types::cl_mem, DeviceError> {
        self.segments.with(segment, |buffer| {
            let size = buffer
                .size()
                .map_err(|e| DeviceError::Backend(format!("clGetMemObjectInfo: {e}")))?
                as u64;
            check_bounds(offset, len, size)?;
            Ok(buffer.get())
        })
    }
}

impl DeviceMemory for OpenclMemory {
    fn reserve_api(&self) -> crate::device::Allocator {
        crate::device::Allocator::ClCreateBuffer
    }

    fn name(&self) -> String {
        self.name.clone()
    }

    fn device_name(&self) -> String {
        self.model.clone()
    }

    #[expect(
        clippy::cast_possible_truncation,
        reason = "usize is 64 bits (lib.rs refuses other targets)"
    )]
    fn reserve(&self, bytes: u64) -> Result<Segment, DeviceError> {
        let oom = DeviceError::OutOfMemory { requested: bytes };
        if bytes > self.max_alloc {
            return Err(oom);
        }
        self.budget.claim(bytes)?;
        // SAFETY: no host pointer is passed; the size is non-zero and within the device maximum.
        let created = unsafe {
            Buffer::<u8>::create(
                &self._context,
                CL_MEM_READ_WRITE,
                bytes as usize,
                ptr::null_mut(),
            )
        };
        match created {
            Ok(buffer) => {
                let handle = self.segments.add(buffer);
                Ok(Segment {
                    handle,
                    address: None,
                    size: bytes,
                })
            }
            Err(e) => {
                self.budget.give_back(bytes);
                // Allocation failures, resource exhaustion and over-size buffers all mean "this
                // does not fit", which the pool handles by retrying or falling back.
                match e.0 {
                    -4 | -5 | -6 | -61 => Err(oom),
                    _ => Err(DeviceError::Backend(format!("clCreateBuffer: {e}"))),
                }
            }
        }
    }

    fn release(&self, segment: SegmentHandle) -> Result<(), DeviceError> {
        let buffer = self.segments.remove(segment)?;
        let size = buffer.size().unwrap_or(0) as u64;
        drop(buffer); // clReleaseMemObject
        self.budget.give_back(size);
        Ok(())
    }

    fn shares_host_memory(&self) -> bool {
        self.host_shared
    }

    fn held_bytes(&self) -> Option<u64> {
        Some(self.budget.used())
    }

    fn mem_info(&self) -> Result<(u64, u64), DeviceError> {
        let left = self.budget.left().unwrap_or(0);
        Ok((super::host_shared_free(self.host_shared, left), self.total))
    }

    fn max_allocation(&self) -> Option<u64> {
        Some(self.max_alloc)
    }

    fn alignment(&self) -> u64 {
        self.align.max(512)
    }

    fn async_copies(&self) -> Option<&dyn AsyncCopies> {
        self.transfers.is_some().then_some(self as &dyn AsyncCopies)
    }

    #[expect(
        clippy::cast_possible_truncation,
        reason = "usize is 64 bits (lib.rs refuses other targets)"
    )]
    fn write(&self, segment: SegmentHandle, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        let mem = self.mem(segment, offset, data.len())?;
        // SAFETY: blocking write of `data` into a live buffer, bounds checked above.
        unsafe {
            enqueue_write_buffer(
                self.queue.get(),
                mem,
                CL_BLOCKING,
                offset as usize,
                data.len(),
                data.as_ptr().cast(),
                0,
                ptr::null(),
            )
        }
        .map(release_event)
        .map_err(|e| DeviceError::Backend(format!("clEnqueueWriteBuffer: {}", ClError(e))))
    }

    #[expect(
        clippy::cast_possible_truncation,
        reason = "usize is 64 bits (lib.rs refuses other targets)"
    )]
    fn read(&self, segment: SegmentHandle, offset: u64, out: &mut [u8]) -> Result<(), DeviceError> {
        let mem = self.mem(segment, offset, out.len())?;
        // SAFETY: blocking read into `out` from a live buffer, bounds checked above.
        unsafe {
            enqueue_read_buffer(
                self.queue.get(),
                mem,
                CL_BLOCKING,
                offset as usize,
                out.len(),
                out.as_mut_ptr().cast(),
                0,
                ptr::null(),
            )
        }
        .map(release_event)
        .map_err(|e| DeviceError::Backend(format!("clEnqueueReadBuffer: {}", ClError(e))))
    }
}

impl AsyncCopies for OpenclMemory {
    #[expect(
        clippy::cast_possible_truncation,
        reason = "usize is 64 bits (lib.rs refuses other targets)"
    )]
    unsafe fn start(
        &self,
        segment: SegmentHandle,
        offset: u64,
        len: usize,
        host: HostSide,
    ) -> Result<PendingCopy, DeviceError> {
        let queue = self.transfer_queue()?;
        let mem = self.mem(segment, offset, len)?;
        // SAFETY: bounds checked above; the caller keeps the host memory valid (and a write's
        // unchanged) until the copy is waited for; the buffer outlives the command (OpenCL keeps
        // it while commands use it).
        let event = unsafe {
            match host {
                HostSide::Into(dst) => enqueue_read_buffer(
                    queue,
                    mem,
                    CL_NON_BLOCKING,
                    offset as usize,
                    len,
                    dst.cast(),
                    0,
                    ptr::null(),
                ),
                HostSide::From(src) => enqueue_write_buffer(
                    queue,
                    mem,
                    CL_NON_BLOCKING,
                    offset as usize,
                    len,
                    src.cast(),
                    0,
                    ptr::null(),
                ),
            }
        }
        .map_err(|e| DeviceError::Backend(format!("clEnqueue*Buffer: {}", ClError(e))))?;
        flush(queue)?;
        Ok(PendingCopy(event as u64))
    }

    fn wait(&self, copy: PendingCopy) -> Result<Option<std::time::Duration>, DeviceError> {
        // Dropping the wrapper releases the event.
        let event = opencl3::event::Event::new(copy.0 as opencl3::types::cl_event);
        event
            .wait()
            .map_err(|e| DeviceError::Backend(format!("clWaitForEvents: {e}")))?;
        let timed = event
            .profiling_command_start()
            .and_then(|start| event.profiling_command_end().map(|end| (start, end)));
        Ok(timed
            .ok()
            .map(|(start, end)| std::time::Duration::from_nanos(end.saturating_sub(start))))
    }
}

impl OpenclMemory {
    fn transfer_queue(&self) -> Result<opencl3::types::cl_command_queue, DeviceError> {
        self.transfers
            .as_ref()
            .map(CommandQueue::get)
            .ok_or_else(|| DeviceError::Unsupported("no transfer queue".into()))
    }
}

/// Hands enqueued commands to the device at once, so a copy runs while the caller goes on.
fn flush(queue: opencl3::types::cl_command_queue) -> Result<(), DeviceError> {
    opencl3::command_queue::flush(queue)
        .map_err(|e| DeviceError::Backend(format!("clFlush: {}", ClError(e))))
}

fn release_event(event: opencl3::types::cl_event) {
    // Dropping the wrapper releases the event the blocking call returned.
    drop(opencl3::event::Event::new(event));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_formatting() {
        let bytes: Vec<u8> = (0u8..16).collect();
        assert_eq!(format_uuid(&bytes), "00010203-0405-0607-0809-0a0b0c0d0e0f");
    }

    #[test]
    fn error_codes_map_to_reasons() {
        assert!(matches!(
            unavailable(ClError(-2000)),
            Unavailable::LibraryNotFound { .. }
        ));
        assert!(matches!(
            unavailable(ClError(-1001)),
            Unavailable::DriverNotLoaded(_)
        ));
        assert!(matches!(unavailable(ClError(-5)), Unavailable::Failed(_)));
    }
}
