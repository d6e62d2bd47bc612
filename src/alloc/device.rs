//! The device contract: raw memory the pool carves up, and two devices that need no GPU.
//!
//! The pool only does arithmetic on (segment, offset); it never touches device memory itself.
//! Reading and writing bytes exists so that tests and `stress` can prove data integrity through
//! the device's own API.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};

use thiserror::Error;

/// Opaque handle of one segment reserved from a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SegmentHandle(pub u64);

/// A segment the device reserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// The handle to release it and to read or write through.
    pub handle: SegmentHandle,
    /// The device address of its first byte, where the backend has addresses.
    pub address: Option<u64>,
    /// Its size in bytes.
    pub size: u64,
}

/// What a device can fail with.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DeviceError {
    /// The device cannot reserve `requested` more bytes.
    #[error("device out of memory reserving {requested} bytes")]
    OutOfMemory {
        /// The segment size asked for.
        requested: u64,
    },
    /// The handle is not a live segment of this device.
    #[error("unknown segment {0:?}")]
    InvalidSegment(SegmentHandle),
    /// A read or write outside the segment.
    #[error("access of {len} bytes at offset {offset} outside a segment of {size} bytes")]
    OutOfBounds {
        /// Offset of the access.
        offset: u64,
        /// Length of the access.
        len: u64,
        /// The segment's size.
        size: u64,
    },
    /// The device cannot do this (e.g. reading a simulated device).
    #[error("{0}")]
    Unsupported(String),
    /// The backend's own error.
    #[error("{0}")]
    Backend(String),
}

/// Raw device memory, implemented once per backend.
pub trait DeviceMemory: Send + Sync {
    /// A short name such as `host`, `sim:80.00 GiB` or `opencl:0 (pthread-…)`.
    fn name(&self) -> String;

    /// Whether results on this device are simulated (no memory is reserved).
    fn simulated(&self) -> bool {
        false
    }

    /// Reserves a segment of exactly `bytes` bytes.
    fn reserve(&self, bytes: u64) -> Result<Segment, DeviceError>;

    /// Returns a segment to the device.
    fn release(&self, segment: SegmentHandle) -> Result<(), DeviceError>;

    /// `(free, total)` bytes as the device reports them now.
    fn mem_info(&self) -> Result<(u64, u64), DeviceError>;

    /// The largest single reservation the device allows, when it has such a limit.
    fn max_allocation(&self) -> Option<u64> {
        None
    }

    /// Required alignment of block offsets within a segment, in bytes (a power of two).
    fn alignment(&self) -> u64 {
        512
    }

    /// Copies `data` into the segment at `offset`.
    fn write(&self, segment: SegmentHandle, offset: u64, data: &[u8]) -> Result<(), DeviceError>;

    /// Copies bytes at `offset` of the segment into `out`.
    fn read(&self, segment: SegmentHandle, offset: u64, out: &mut [u8]) -> Result<(), DeviceError>;
}

impl fmt::Debug for dyn DeviceMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DeviceMemory({})", self.name())
    }
}

/// Bytes reserved against an optional capacity. Claims are atomic, so concurrent reservations
/// cannot overshoot the cap; backends whose drivers commit lazily (PoCL, host mmap) or report no
/// free memory enforce their size with it.
#[derive(Debug, Default)]
pub struct Budget {
    used: AtomicU64,
    cap: Option<u64>,
}

impl Budget {
    /// A budget of `cap` bytes (`None`: unlimited, only counted).
    pub fn new(cap: Option<u64>) -> Self {
        Budget {
            used: AtomicU64::new(0),
            cap,
        }
    }

    /// Claims `bytes`, or fails with out-of-memory when the cap would be passed.
    pub fn claim(&self, bytes: u64) -> Result<(), DeviceError> {
        let cap = self.cap.unwrap_or(u64::MAX);
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |r| {
                r.checked_add(bytes).filter(|&n| n <= cap)
            })
            .map(|_| ())
            .map_err(|_| DeviceError::OutOfMemory { requested: bytes })
    }

    /// Gives claimed bytes back.
    pub fn give_back(&self, bytes: u64) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
    }

    /// Bytes claimed now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }

    /// Bytes left under the cap (`None` without a cap).
    pub fn left(&self) -> Option<u64> {
        self.cap.map(|c| c.saturating_sub(self.used()))
    }
}

/// A backend's live segments by handle: the one place handles are minted, looked up and
/// retired, so every backend detects unknown and double-released handles the same way.
#[derive(Debug)]
pub struct SegmentTable<T> {
    next: AtomicU64,
    map: RwLock<HashMap<SegmentHandle, T>>,
}

impl<T> Default for SegmentTable<T> {
    fn default() -> Self {
        SegmentTable {
            next: AtomicU64::new(1),
            map: RwLock::new(HashMap::new()),
        }
    }
}

impl<T> SegmentTable<T> {
    /// Stores a segment under a fresh handle.
    pub fn add(&self, value: T) -> SegmentHandle {
        let handle = SegmentHandle(self.next.fetch_add(1, Ordering::Relaxed));
        self.insert_at(handle, value);
        handle
    }

    /// Stores a segment under a handle the driver chose (e.g. a device pointer).
    pub fn insert_at(&self, handle: SegmentHandle, value: T) {
        self.map
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(handle, value);
    }

    /// Retires a segment; unknown handles are an error.
    pub fn remove(&self, handle: SegmentHandle) -> Result<T, DeviceError> {
        self.map
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&handle)
            .ok_or(DeviceError::InvalidSegment(handle))
    }

    /// Runs `f` on a live segment.
    pub fn with<R>(
        &self,
        handle: SegmentHandle,
        f: impl FnOnce(&T) -> Result<R, DeviceError>,
    ) -> Result<R, DeviceError> {
        let map = self.map.read().unwrap_or_else(|e| e.into_inner());
        f(map
            .get(&handle)
            .ok_or(DeviceError::InvalidSegment(handle))?)
    }

    /// Retires every segment, for clean-up on drop.
    pub fn drain(&self) -> Vec<(SegmentHandle, T)> {
        self.map
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .collect()
    }
}

/// Checks that `[offset, offset + len)` lies inside a segment of `size` bytes.
pub fn check_bounds(offset: u64, len: usize, size: u64) -> Result<(), DeviceError> {
    let len = len as u64;
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(DeviceError::OutOfBounds { offset, len, size }),
    }
}

/// Host memory block: a raw pointer the device owns; only touched under the bounds check.
struct HostBlock {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the pointer is uniquely owned by the HostDevice map; reads and writes go through
// bounds-checked copies, and concurrent access to disjoint ranges is what a GPU allows too.
unsafe impl Send for HostBlock {}
// SAFETY: as above; the map's RwLock serialises insertion and removal.
unsafe impl Sync for HostBlock {}

/// Maps `len` bytes of fresh zeroed pages straight from the OS: a real reservation, committed
/// page by page on first touch, like a driver that maps lazily. `None` when the OS refuses.
#[cfg(unix)]
fn os_map(len: usize) -> Option<*mut u8> {
    // SAFETY: an anonymous private mapping with no address hint has no preconditions.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    (p != libc::MAP_FAILED).then_some(p.cast())
}

#[cfg(unix)]
fn os_unmap(ptr: *mut u8, len: usize) {
    // SAFETY: `ptr`/`len` describe a mapping made by `os_map`, unmapped once.
    unsafe { libc::munmap(ptr.cast(), len) };
}

#[cfg(not(unix))]
fn os_map(len: usize) -> Option<*mut u8> {
    let layout = std::alloc::Layout::from_size_align(len, 4096).ok()?;
    // SAFETY: non-zero size (checked by the caller).
    let p = unsafe { std::alloc::alloc_zeroed(layout) };
    (!p.is_null()).then_some(p)
}

#[cfg(not(unix))]
fn os_unmap(ptr: *mut u8, len: usize) {
    if let Ok(layout) = std::alloc::Layout::from_size_align(len, 4096) {
        // SAFETY: allocated by `os_map` with this layout, freed once.
        unsafe { std::alloc::dealloc(ptr, layout) };
    }
}

/// Real memory from the operating system, optionally capped so that out-of-memory paths can be
/// tested with real allocations.
pub struct HostDevice {
    capacity: Option<u64>,
    budget: Budget,
    segments: SegmentTable<HostBlock>,
}

impl HostDevice {
    /// Host memory capped at `capacity` bytes (`None`: the machine's RAM is the limit).
    pub fn new(capacity: Option<u64>) -> Self {
        HostDevice {
            capacity,
            budget: Budget::new(capacity),
            segments: SegmentTable::default(),
        }
    }

    /// Bytes currently reserved through this device.
    pub fn reserved(&self) -> u64 {
        self.budget.used()
    }
}

impl Drop for HostDevice {
    fn drop(&mut self) {
        for (_, block) in self.segments.drain() {
            os_unmap(block.ptr, block.len);
        }
    }
}

impl DeviceMemory for HostDevice {
    fn name(&self) -> String {
        match self.capacity {
            Some(c) => format!("host:{}", crate::units::format_bytes(c)),
            None => "host".into(),
        }
    }

    fn reserve(&self, bytes: u64) -> Result<Segment, DeviceError> {
        let oom = DeviceError::OutOfMemory { requested: bytes };
        if bytes == 0 {
            return Err(DeviceError::Unsupported("zero-byte segment".into()));
        }
        self.budget.claim(bytes)?;
        let mapped = usize::try_from(bytes)
            .ok()
            .and_then(|len| os_map(len).map(|ptr| (ptr, len)));
        let Some((ptr, len)) = mapped else {
            self.budget.give_back(bytes);
            return Err(oom);
        };
        let handle = self.segments.add(HostBlock { ptr, len });
        Ok(Segment {
            handle,
            address: Some(ptr as u64),
            size: bytes,
        })
    }

    fn release(&self, segment: SegmentHandle) -> Result<(), DeviceError> {
        let block = self.segments.remove(segment)?;
        os_unmap(block.ptr, block.len);
        self.budget.give_back(block.len as u64);
        Ok(())
    }

    fn mem_info(&self) -> Result<(u64, u64), DeviceError> {
        match self.capacity {
            Some(cap) => Ok((self.budget.left().unwrap_or(0), cap)),
            None => Ok((
                crate::backend::get_available_memory(),
                crate::backend::get_system_memory(),
            )),
        }
    }

    fn write(&self, segment: SegmentHandle, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.segments.with(segment, |block| {
            check_bounds(offset, data.len(), block.len as u64)?;
            // SAFETY: bounds checked above; the source is a distinct Rust slice.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    data.as_ptr(),
                    block.ptr.add(offset as usize),
                    data.len(),
                )
            };
            Ok(())
        })
    }

    fn read(&self, segment: SegmentHandle, offset: u64, out: &mut [u8]) -> Result<(), DeviceError> {
        self.segments.with(segment, |block| {
            check_bounds(offset, out.len(), block.len as u64)?;
            // SAFETY: bounds checked above; the destination is a distinct Rust slice.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    block.ptr.add(offset as usize),
                    out.as_mut_ptr(),
                    out.len(),
                )
            };
            Ok(())
        })
    }
}

/// A capacity-only address space: reserves nothing, so "what would this workload reserve on an
/// 80 GB card" can be planned here, and the pool's own overhead measured without device cost.
pub struct SimDevice {
    capacity: u64,
    state: Mutex<SimState>,
}

struct SimState {
    reserved: u64,
    next_address: u64,
    segments: HashMap<SegmentHandle, (u64, u64)>,
    next_handle: u64,
}

impl SimDevice {
    /// A simulated device of `capacity` bytes.
    pub fn new(capacity: u64) -> Self {
        SimDevice {
            capacity,
            state: Mutex::new(SimState {
                reserved: 0,
                next_address: 1 << 40,
                segments: HashMap::new(),
                next_handle: 1,
            }),
        }
    }
}

impl DeviceMemory for SimDevice {
    fn name(&self) -> String {
        format!("sim:{}", crate::units::format_bytes(self.capacity))
    }

    fn simulated(&self) -> bool {
        true
    }

    fn reserve(&self, bytes: u64) -> Result<Segment, DeviceError> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if bytes == 0
            || s.reserved
                .checked_add(bytes)
                .is_none_or(|n| n > self.capacity)
        {
            return Err(DeviceError::OutOfMemory { requested: bytes });
        }
        s.reserved += bytes;
        let handle = SegmentHandle(s.next_handle);
        s.next_handle += 1;
        let address = s.next_address;
        // Keep simulated addresses 2 MiB aligned and never reused, like a fresh VA range.
        s.next_address = s
            .next_address
            .saturating_add(bytes.div_ceil(2 << 20) * (2 << 20));
        s.segments.insert(handle, (address, bytes));
        Ok(Segment {
            handle,
            address: Some(address),
            size: bytes,
        })
    }

    fn release(&self, segment: SegmentHandle) -> Result<(), DeviceError> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (_, size) = s
            .segments
            .remove(&segment)
            .ok_or(DeviceError::InvalidSegment(segment))?;
        s.reserved -= size;
        Ok(())
    }

    fn mem_info(&self) -> Result<(u64, u64), DeviceError> {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        Ok((self.capacity - s.reserved, self.capacity))
    }

    fn write(&self, _: SegmentHandle, _: u64, _: &[u8]) -> Result<(), DeviceError> {
        Err(DeviceError::Unsupported(
            "a simulated device holds no data".into(),
        ))
    }

    fn read(&self, _: SegmentHandle, _: u64, _: &mut [u8]) -> Result<(), DeviceError> {
        Err(DeviceError::Unsupported(
            "a simulated device holds no data".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_reserves_real_memory_and_round_trips_bytes() {
        let dev = HostDevice::new(Some(8 << 20));
        let seg = dev.reserve(4 << 20).unwrap();
        assert_eq!(dev.mem_info().unwrap(), (4 << 20, 8 << 20));
        dev.write(seg.handle, 100, b"gpumem").unwrap();
        let mut out = [0u8; 6];
        dev.read(seg.handle, 100, &mut out).unwrap();
        assert_eq!(&out, b"gpumem");
        assert!(matches!(
            dev.write(seg.handle, (4 << 20) - 2, b"abc"),
            Err(DeviceError::OutOfBounds { .. })
        ));
        assert_eq!(
            dev.reserve(5 << 20),
            Err(DeviceError::OutOfMemory { requested: 5 << 20 })
        );
        dev.release(seg.handle).unwrap();
        assert_eq!(
            dev.release(seg.handle),
            Err(DeviceError::InvalidSegment(seg.handle))
        );
        assert_eq!(dev.reserved(), 0);
    }

    #[test]
    fn sim_counts_capacity_only() {
        let dev = SimDevice::new(80 << 30);
        let a = dev.reserve(60 << 30).unwrap();
        assert!(dev.reserve(30 << 30).is_err());
        let b = dev.reserve(20 << 30).unwrap();
        assert_ne!(a.address, b.address);
        assert_eq!(dev.mem_info().unwrap(), (0, 80 << 30));
        assert!(dev.write(a.handle, 0, b"x").is_err());
        dev.release(a.handle).unwrap();
        dev.release(b.handle).unwrap();
        assert_eq!(dev.mem_info().unwrap(), (80 << 30, 80 << 30));
    }
}
