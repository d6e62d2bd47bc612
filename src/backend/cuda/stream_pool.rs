//! CUDA's own caching allocator: `cuMemAllocAsync`/`cuMemFreeAsync` on the device's default
//! memory pool, on a stream of gpumem's own (what `bench-alloc --compare native` sets the pool
//! beside).
//!
//! The pool keeps what is freed for reuse up to its release threshold. CUDA's default threshold
//! is 0: every synchronisation hands the pool's unused memory back to the device. PyTorch's
//! `cudaMallocAsync` backend sets it to the maximum (`lazy_init_device` in
//! `c10/cuda/CUDAMallocAsyncAllocator.cpp`) so the pool caches as its own allocator does, and
//! gives the cache back only on `empty_cache` (a device synchronisation, then
//! `cuMemPoolTrimTo(pool, 0)`). A replay does the same: the threshold at the maximum while it
//! runs, the cache trimmed when it ends, and the default threshold put back.

use super::*;

/// Functions the stream-ordered allocator calls, checked before the first call.
const POOL_SYMBOLS: &[&str] = &[
    "cuDeviceGetDefaultMemPool",
    "cuMemPoolSetAttribute",
    "cuMemPoolGetAttribute",
    "cuMemPoolTrimTo",
    "cuMemAllocAsync",
    "cuMemFreeAsync",
    "cuStreamCreate",
    "cuStreamSynchronize",
    "cuStreamDestroy_v2",
];

/// The device's default memory pool and the stream allocations are ordered on.
pub(super) struct StreamPool {
    pool: sys::CUmemoryPool,
    stream: sys::CUstream,
}

// SAFETY: the pool and stream are driver handles usable from any thread with the context
// current; the driver serialises its own use of them.
unsafe impl Send for StreamPool {}
// SAFETY: as above.
unsafe impl Sync for StreamPool {}

impl StreamPool {
    /// Waits for the stream, gives the pool's cache back and destroys the stream. The context
    /// must be current and every allocation freed.
    pub(super) fn close(self) {
        // SAFETY: both handles are ours; nothing is queued on the stream after this.
        unsafe {
            sys::cuStreamSynchronize(self.stream);
            sys::cuMemPoolTrimTo(self.pool, 0);
            sys::cuStreamDestroy_v2(self.stream);
        }
    }
}

fn backend(e: CuError) -> DeviceError {
    DeviceError::Backend(e.to_string())
}

impl CudaMemory {
    /// The default memory pool and a stream, when the device supports memory pools and the
    /// driver exports what they need.
    pub(super) fn make_stream_pool(&self) -> Option<StreamPool> {
        let supported = CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED;
        if attribute(self.device, supported) != Some(1) || ensure_driver(POOL_SYMBOLS).is_err() {
            return None;
        }
        self.current().ok()?;
        let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
        // SAFETY: valid out-pointer; the context is current; symbols checked above.
        check("cuDeviceGetDefaultMemPool", unsafe {
            sys::cuDeviceGetDefaultMemPool(&mut pool, self.device)
        })
        .ok()?;
        let mut stream: sys::CUstream = std::ptr::null_mut();
        // SAFETY: valid out-pointer; the context is current.
        check("cuStreamCreate", unsafe {
            sys::cuStreamCreate(&mut stream, 0)
        })
        .ok()?;
        Some(StreamPool { pool, stream })
    }

    fn stream_pool(&self) -> Result<&StreamPool, DeviceError> {
        self.stream_pool
            .as_ref()
            .ok_or_else(|| DeviceError::Unsupported("no stream-ordered allocation".into()))
    }

    fn set_pool_attribute(
        &self,
        attr: sys::CUmemPool_attribute,
        value: u64,
    ) -> Result<(), CuError> {
        let Some(p) = self.stream_pool.as_ref() else {
            return Ok(());
        };
        let mut value: sys::cuuint64_t = value;
        // SAFETY: the attributes set here take a cuuint64_t, which `value` is.
        check("cuMemPoolSetAttribute", unsafe {
            sys::cuMemPoolSetAttribute(p.pool, attr, (&raw mut value).cast())
        })
    }

    fn pool_attribute(&self, attr: sys::CUmemPool_attribute) -> Option<u64> {
        let p = self.stream_pool.as_ref()?;
        let mut value: sys::cuuint64_t = 0;
        // SAFETY: the watermarks are cuuint64_t, which `value` is.
        check("cuMemPoolGetAttribute", unsafe {
            sys::cuMemPoolGetAttribute(p.pool, attr, (&raw mut value).cast())
        })
        .ok()
        .map(|_| value)
    }

    /// Queues the free of a stream-ordered allocation on its stream.
    pub(super) fn free_async(&self, handle: SegmentHandle) -> Result<(), CuError> {
        let Some(p) = self.stream_pool.as_ref() else {
            return Err(CuError {
                call: "cuMemFreeAsync",
                result: CUresult::CUDA_ERROR_INVALID_VALUE,
            });
        };
        // SAFETY: the pointer came from cuMemAllocAsync on this stream and left the table.
        check("cuMemFreeAsync", unsafe {
            sys::cuMemFreeAsync(handle.0, p.stream)
        })
    }
}

impl NativeAllocator for CudaMemory {
    fn allocator(&self) -> Allocator {
        Allocator::CuMemAllocAsync
    }

    fn begin(&self) -> Result<(), DeviceError> {
        use sys::CUmemPool_attribute::*;
        let p = self.stream_pool()?;
        self.current()?;
        // SAFETY: both handles are ours.
        check("cuStreamSynchronize", unsafe {
            sys::cuStreamSynchronize(p.stream)
        })
        .and_then(|()| {
            // SAFETY: as above.
            check("cuMemPoolTrimTo", unsafe {
                sys::cuMemPoolTrimTo(p.pool, 0)
            })
        })
        .and_then(|()| self.set_pool_attribute(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, u64::MAX))
        // The watermarks can only be reset to 0.
        .and_then(|()| self.set_pool_attribute(CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, 0))
        .and_then(|()| self.set_pool_attribute(CU_MEMPOOL_ATTR_USED_MEM_HIGH, 0))
        .map_err(backend)
    }

    #[expect(
        clippy::cast_possible_truncation,
        reason = "usize is 64 bits (lib.rs refuses other targets)"
    )]
    fn allocate(&self, bytes: u64) -> Result<Segment, DeviceError> {
        let p = self.stream_pool()?;
        self.current()?;
        let mut ptr: sys::CUdeviceptr = 0;
        // SAFETY: valid out-pointer; the context is current; the stream is ours.
        let result = unsafe { sys::cuMemAllocAsync(&mut ptr, bytes as usize, p.stream) };
        self.linear_segment(result, ptr, bytes, ("cuMemAllocAsync", true))
    }

    fn free(&self, allocation: SegmentHandle) -> Result<(), DeviceError> {
        let seg = self.segments.remove(allocation)?;
        if !seg.stream_ordered {
            self.segments.insert_at(allocation, seg);
            return Err(DeviceError::InvalidSegment(allocation));
        }
        self.current()?;
        self.free_async(allocation).map_err(backend)
    }

    fn synchronize(&self) -> Result<(), DeviceError> {
        let p = self.stream_pool()?;
        self.current()?;
        // SAFETY: the stream is ours.
        check("cuStreamSynchronize", unsafe {
            sys::cuStreamSynchronize(p.stream)
        })
        .map_err(backend)
    }

    fn finish(&self) -> Result<Option<NativePeaks>, DeviceError> {
        use sys::CUmemPool_attribute::*;
        self.synchronize()?;
        let peaks = self
            .pool_attribute(CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH)
            .zip(self.pool_attribute(CU_MEMPOOL_ATTR_USED_MEM_HIGH))
            .map(|(reserved, used)| NativePeaks { reserved, used });
        let p = self.stream_pool()?;
        // SAFETY: the pool is ours and the stream has drained.
        check("cuMemPoolTrimTo", unsafe {
            sys::cuMemPoolTrimTo(p.pool, 0)
        })
        .and_then(|()| self.set_pool_attribute(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, 0))
        .map_err(backend)?;
        Ok(peaks)
    }
}
