//! CUDA's asynchronous copies: a stream of their own, page-locked staging buffers, events
//! around each copy to time it.

use super::*;

/// A page-locked staging buffer of at least `len` bytes: a spare one, else a new one.
pub(super) fn take_pinned(copies: &Copies, len: usize) -> Result<Pinned, DeviceError> {
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

/// Functions the asynchronous copies call; without them transfers use blocking copies.
pub(super) const ASYNC_SYMBOLS: &[&str] = &[
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
pub(super) struct Pinned {
    pub(super) ptr: *mut u8,
    pub(super) len: usize,
}

/// A copy in flight: its events, its staging buffer and, for a read, where the bytes go.
pub(super) struct Flight {
    pub(super) start: sys::CUevent,
    pub(super) end: sys::CUevent,
    pub(super) staging: Pinned,
    pub(super) len: usize,
    pub(super) read_into: Option<*mut u8>,
}

/// The stream and its bookkeeping. Raw driver handles and host pointers, used under the locks.
pub(super) struct Copies {
    pub(super) stream: sys::CUstream,
    pub(super) spare: Mutex<Vec<Pinned>>,
    pub(super) flights: Flights<Flight>,
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
