//! CUDA device memory for the pool: segments from `cuMemAlloc`, or reserved ranges mapped a
//! granule at a time (the virtual memory API) for expandable segments.

use super::copies::*;
use super::*;

/// Functions the allocation path calls, checked before the first call.
pub(super) const MEMORY_SYMBOLS: &[&str] = &[
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemcpyHtoD_v2",
    "cuMemcpyDtoH_v2",
];

/// A retained primary context. CUDA contexts may be made current on any thread.
pub(super) struct Context(sys::CUcontext);

// SAFETY: a CUDA context handle is usable from any thread once made current there.
unsafe impl Send for Context {}
// SAFETY: as above; the driver serialises its own use of the context.
unsafe impl Sync for Context {}

/// Functions of the virtual memory management API; without them expandable segments are off.
pub(super) const VMM_SYMBOLS: &[&str] = &[
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
pub(super) type Granules = BTreeMap<u64, sys::CUmemGenericAllocationHandle>;

/// A live segment: a `cuMemAlloc` block, or an address range with memory mapped into it.
pub(super) struct CudaSeg {
    pub(super) size: u64,
    /// For an address range: the physical allocation mapped at each granule's offset.
    pub(super) granules: Option<Granules>,
    /// From the stream-ordered pool (`cuMemAllocAsync`), freed on its stream.
    pub(super) stream_ordered: bool,
}

impl CudaSeg {
    /// Checks that `offset..offset + len` is inside the segment and, for a range, mapped.
    pub(super) fn check(&self, offset: u64, len: usize, granule: u64) -> Result<(), DeviceError> {
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
    pub(super) name: String,
    pub(super) model: String,
    pub(super) device: CUdevice,
    pub(super) context: Context,
    /// Live segments by device pointer, for bounds checks and clean-up on drop.
    pub(super) segments: SegmentTable<CudaSeg>,
    /// The mapping granule, when the device and driver support virtual memory management.
    pub(super) granularity: Option<u64>,
    /// Asynchronous copies: a stream of their own, page-locked staging and the copies in flight.
    pub(super) copies: Option<Copies>,
    /// The device's default memory pool and a stream to allocate on, where the device and
    /// driver have stream-ordered allocation.
    pub(super) stream_pool: Option<StreamPool>,
}

// SAFETY: the stream and events are driver handles usable from any thread with the context
// current; the host pointers are page-locked buffers this object owns, touched under the locks.
unsafe impl Send for Copies {}
// SAFETY: as above.
unsafe impl Sync for Copies {}

impl CudaMemory {
    /// Opens CUDA device `index`.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "device ordinals come from the driver's own count, an int"
    )]
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
            model: info.name.clone(),
            device,
            context: Context(ctx),
            segments: SegmentTable::default(),
            granularity: None,
            copies: None,
            stream_pool: None,
        };
        memory.granularity = memory.vmm_granularity();
        memory.copies = memory.make_copies();
        memory.stream_pool = memory.make_stream_pool();
        Ok(memory)
    }

    /// The minimum mapping granule, when the device supports virtual memory management and
    /// the driver exports its functions (older drivers and some stand-ins do not: then
    /// expandable segments fall back to ordinary ones).
    pub(super) fn vmm_granularity(&self) -> Option<u64> {
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
    pub(super) fn make_copies(&self) -> Option<Copies> {
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
    pub(super) fn start_copy(
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
    pub(super) fn allocation_prop(&self) -> sys::CUmemAllocationProp {
        // SAFETY: a plain C struct for which all-zero is the documented starting value.
        let mut prop: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
        prop.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = self.device;
        prop
    }

    /// Unmaps and frees the granules at `offsets` of the range at `base`.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "usize is 64 bits (lib.rs refuses other targets)"
    )]
    pub(super) fn unmap_granules(
        &self,
        base: u64,
        granules: Vec<(u64, sys::CUmemGenericAllocationHandle)>,
    ) {
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
    pub(super) fn with_span<R>(
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
    #[expect(
        clippy::cast_possible_truncation,
        reason = "usize is 64 bits (lib.rs refuses other targets)"
    )]
    pub(super) fn free_segment(
        &self,
        handle: SegmentHandle,
        seg: CudaSeg,
    ) -> Result<(), DeviceError> {
        match seg.granules {
            None if seg.stream_ordered => self.free_async(handle),
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
    /// A linear allocation of `bytes` at `ptr` as `call` (stream-ordered or not) answered it:
    /// recorded as a segment, or the error it was.
    pub(super) fn linear_segment(
        &self,
        result: CUresult,
        ptr: sys::CUdeviceptr,
        bytes: u64,
        (call, stream_ordered): (&str, bool),
    ) -> Result<Segment, DeviceError> {
        match result {
            CUresult::CUDA_SUCCESS => {
                let handle = SegmentHandle(ptr);
                self.segments.insert_at(
                    handle,
                    CudaSeg {
                        size: bytes,
                        granules: None,
                        stream_ordered,
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
            other => Err(DeviceError::Backend(format!("{call} returned {other:?}"))),
        }
    }

    pub(super) fn current(&self) -> Result<(), DeviceError> {
        // SAFETY: the context is retained for this object's lifetime.
        check("cuCtxSetCurrent", unsafe {
            sys::cuCtxSetCurrent(self.context.0)
        })
        .map_err(|e| DeviceError::Backend(e.to_string()))
    }

    /// Checks an access of `len` bytes at `offset` of `segment`.
    pub(super) fn check_access(
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
            if let Some(p) = self.stream_pool.take() {
                p.close();
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

    fn device_name(&self) -> String {
        self.model.clone()
    }

    #[expect(
        clippy::cast_possible_truncation,
        reason = "usize is 64 bits (lib.rs refuses other targets)"
    )]
    fn reserve(&self, bytes: u64) -> Result<Segment, DeviceError> {
        self.current()?;
        let mut ptr: sys::CUdeviceptr = 0;
        // SAFETY: valid out-pointer; the context is current.
        let result = unsafe { sys::cuMemAlloc_v2(&mut ptr, bytes as usize) };
        self.linear_segment(result, ptr, bytes, ("cuMemAlloc_v2", false))
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

    fn reserve_api(&self) -> Allocator {
        Allocator::CuMemAlloc
    }

    fn native_allocator(&self) -> Option<&dyn NativeAllocator> {
        self.stream_pool
            .is_some()
            .then_some(self as &dyn NativeAllocator)
    }
}

impl VirtualMemory for CudaMemory {
    fn granularity(&self) -> u64 {
        self.granularity.unwrap_or(2 << 20)
    }

    #[expect(
        clippy::cast_possible_truncation,
        reason = "usize is 64 bits (lib.rs refuses other targets)"
    )]
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
                stream_ordered: false,
            },
        );
        Ok(Segment {
            handle,
            address: Some(ptr),
            size: bytes,
        })
    }

    #[expect(
        clippy::cast_possible_truncation,
        reason = "usize is 64 bits (lib.rs refuses other targets)"
    )]
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
