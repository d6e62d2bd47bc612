//! The device contract: raw memory that the pool (module `alloc`) carves up and that every
//! backend (module `backend`) implements.
//!
//! This module sits below both: the pool depends only on [`DeviceMemory`], and each backend
//! implements it on its driver (host RAM, a simulated card, OpenCL, Vulkan, CUDA, HIP). The pool
//! only does arithmetic on (segment, offset); it never touches device memory itself. Reading
//! and writing bytes exists so that tests and `stress` can prove data integrity through the
//! device's own API.

mod flights;
mod identity;
mod limits;
mod native;

use std::collections::HashMap;
use std::fmt;

pub use flights::{inner, lock, read, write, Flights};
pub use identity::PhysicalId;
pub use limits::VulkanLimits;
pub use native::{Allocator, NativeAllocator, NativePeaks};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

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
        /// Size of the segment in bytes.
        size: u64,
    },
    /// The device cannot do this (e.g. reading a simulated device).
    #[error("{0}")]
    Unsupported(String),
    /// The backend's own error.
    #[error("{0}")]
    Backend(String),
}

/// The driver-reserve design's reserve on a GPU: driver overhead, plus context overhead, plus a fraction of the
/// total as an emergency buffer, the whole capped.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DriverReserve {
    /// Driver overhead in bytes (default 500 MB).
    pub driver: u64,
    /// Context and stream overhead in bytes (default 100 MB).
    pub context: u64,
    /// Fraction of the total kept as an emergency buffer (default 0.10).
    pub fraction: f64,
    /// Cap on the whole reserve in bytes (default 2 GB).
    pub cap: u64,
}

impl Default for DriverReserve {
    fn default() -> Self {
        DriverReserve {
            driver: 500_000_000,
            context: 100_000_000,
            fraction: 0.10,
            cap: 2_000_000_000,
        }
    }
}

impl DriverReserve {
    /// The reserve on a device of `total` bytes.
    ///
    /// ```
    /// use gpumem::device::DriverReserve;
    /// let r = DriverReserve::default();
    /// assert_eq!(r.of(4_000_000_000), 1_000_000_000); // 500 MB + 100 MB + 10 %
    /// assert_eq!(r.of(80_000_000_000), 2_000_000_000); // capped
    /// ```
    #[expect(
        clippy::cast_possible_truncation,
        reason = "a float cast saturates; the result is at most the 2 GB cap"
    )]
    pub fn of(&self, total: u64) -> u64 {
        let r = self.driver as f64 + self.context as f64 + self.fraction * total as f64;
        (r as u64).min(self.cap)
    }
}

/// Raw device memory, implemented once per backend.
pub trait DeviceMemory: Send + Sync {
    /// A short name such as `host`, `sim:80.00 GiB` or `opencl:0 (pthread-…)`.
    fn name(&self) -> String;

    /// The device as its driver names it (`NVIDIA H100 80GB HBM3`, `llvmpipe (…)`), without
    /// the backend and index that reports print beside it; [`DeviceMemory::name`] by default.
    fn device_name(&self) -> String {
        self.name()
    }

    /// Whether results on this device are simulated (no memory is reserved).
    fn simulated(&self) -> bool {
        false
    }

    /// Whether a driver and its contexts take device memory beside what a pool reserves, so
    /// the driver-reserve design's [`DriverReserve`] is kept back (GPUs and software GPUs; not host memory or a
    /// simulation).
    fn has_driver(&self) -> bool {
        !self.simulated()
    }

    /// Whether the device's memory is the host's RAM (host memory, PoCL, lavapipe, integrated
    /// GPUs), so its free figure moves with every other process on the machine.
    fn shares_host_memory(&self) -> bool {
        false
    }

    /// Bytes this handle holds on the device, counted at each reservation and release (`None`
    /// where the backend does not count them and the driver's free figure is the measure).
    fn held_bytes(&self) -> Option<u64> {
        None
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

    /// Virtual memory management, where the device has it (what expandable segments need).
    fn virtual_memory(&self) -> Option<&dyn VirtualMemory> {
        None
    }

    /// Copies the device runs on its own while the caller goes on (a second command queue,
    /// a stream), where the backend has them.
    fn async_copies(&self) -> Option<&dyn AsyncCopies> {
        None
    }

    /// What [`DeviceMemory::reserve`] calls, by its API's name.
    fn reserve_api(&self) -> Allocator {
        Allocator::Reserve
    }

    /// The driver's own caching allocator beside `reserve`, where it has one (CUDA's
    /// stream-ordered memory pool): what a program that pools nothing itself gets.
    fn native_allocator(&self) -> Option<&dyn NativeAllocator> {
        None
    }
}

/// A copy started on the device and not yet waited for.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a started copy must be waited for before its host memory is reused or freed"]
pub struct PendingCopy(pub u64);

/// Copies between segments and host memory that run while the caller goes on: OpenCL's
/// non-blocking reads and writes on a queue of their own, CUDA's `cuMemcpy*Async` on a stream.
pub trait AsyncCopies: Send + Sync {
    /// Starts copying `len` bytes between `offset` of `segment` and the host memory `host`
    /// names, in the direction it names.
    ///
    /// # Safety
    /// The host memory must hold `len` bytes and stay valid, and untouched by anything else
    /// (unchanged, for a write), until [`Self::wait`] has returned for the copy.
    unsafe fn start(
        &self,
        segment: SegmentHandle,
        offset: u64,
        len: usize,
        host: HostSide,
    ) -> Result<PendingCopy, DeviceError>;

    /// Starts copying `len` bytes at `offset` of `segment` to `dst`.
    ///
    /// # Safety
    /// `dst..dst + len` must stay valid, and untouched by anything else, until [`Self::wait`]
    /// has returned for the copy.
    unsafe fn start_read(
        &self,
        segment: SegmentHandle,
        offset: u64,
        dst: *mut u8,
        len: usize,
    ) -> Result<PendingCopy, DeviceError> {
        // SAFETY: the caller's contract is `start`'s.
        unsafe { self.start(segment, offset, len, HostSide::Into(dst)) }
    }

    /// Starts copying `len` bytes from `src` to `offset` of `segment`.
    ///
    /// # Safety
    /// `src..src + len` must stay valid and unchanged until [`Self::wait`] has returned.
    unsafe fn start_write(
        &self,
        segment: SegmentHandle,
        offset: u64,
        src: *const u8,
        len: usize,
    ) -> Result<PendingCopy, DeviceError> {
        // SAFETY: the caller's contract is `start`'s.
        unsafe { self.start(segment, offset, len, HostSide::From(src)) }
    }

    /// Waits for a started copy. Returns how long the device spent on it when the device
    /// measured that (OpenCL profiling), else `None`.
    fn wait(&self, copy: PendingCopy) -> Result<Option<std::time::Duration>, DeviceError>;
}

/// The host end of an asynchronous copy, which also says its direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostSide {
    /// Device to host: the bytes land here.
    Into(*mut u8),
    /// Host to device: the bytes come from here.
    From(*const u8),
}

impl HostSide {
    /// Where a read delivers, `None` for a write.
    pub fn read_into(self) -> Option<*mut u8> {
        match self {
            HostSide::Into(dst) => Some(dst),
            HostSide::From(_) => None,
        }
    }

    /// What a write sends, `None` for a read.
    pub fn write_from(self) -> Option<*const u8> {
        match self {
            HostSide::From(src) => Some(src),
            HostSide::Into(_) => None,
        }
    }
}

/// An address range reserved with no memory behind it, into which memory is mapped and
/// unmapped in granules: CUDA's `cuMemAddressReserve`/`cuMemCreate`/`cuMemMap`, or on the host
/// an inaccessible mapping made accessible page by page. A range is released with
/// [`DeviceMemory::release`], which unmaps whatever is still mapped; reads and writes go
/// through [`DeviceMemory::read`]/[`DeviceMemory::write`] on its handle and must stay within
/// mapped granules.
pub trait VirtualMemory: Send + Sync {
    /// The mapping granule in bytes (a power of two): offsets and lengths are multiples of it.
    fn granularity(&self) -> u64;

    /// Reserves `bytes` of address space (a multiple of the granularity), nothing mapped.
    fn reserve_range(&self, bytes: u64) -> Result<Segment, DeviceError>;

    /// Maps fresh memory at `offset..offset + bytes` of `range`; out of memory when the
    /// device has none left.
    fn map(&self, range: SegmentHandle, offset: u64, bytes: u64) -> Result<(), DeviceError>;

    /// Unmaps `offset..offset + bytes` of `range`, giving the memory back.
    fn unmap(&self, range: SegmentHandle, offset: u64, bytes: u64) -> Result<(), DeviceError>;
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

    /// Bytes claimed against the budget now.
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
        write(&self.map).insert(handle, value);
    }

    /// Retires a segment; unknown handles are an error.
    pub fn remove(&self, handle: SegmentHandle) -> Result<T, DeviceError> {
        write(&self.map)
            .remove(&handle)
            .ok_or(DeviceError::InvalidSegment(handle))
    }

    /// Runs `f` on a live segment.
    pub fn with<R>(
        &self,
        handle: SegmentHandle,
        f: impl FnOnce(&T) -> Result<R, DeviceError>,
    ) -> Result<R, DeviceError> {
        let map = read(&self.map);
        f(map
            .get(&handle)
            .ok_or(DeviceError::InvalidSegment(handle))?)
    }

    /// Runs `f` on a segment with exclusive access (changes to its bookkeeping).
    pub fn with_mut<R>(
        &self,
        handle: SegmentHandle,
        f: impl FnOnce(&mut T) -> Result<R, DeviceError>,
    ) -> Result<R, DeviceError> {
        let mut map = write(&self.map);
        f(map
            .get_mut(&handle)
            .ok_or(DeviceError::InvalidSegment(handle))?)
    }

    /// Retires every segment, for clean-up on drop.
    pub fn drain(&self) -> Vec<(SegmentHandle, T)> {
        write(&self.map).drain().collect()
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
