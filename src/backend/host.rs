//! Host RAM as a device: real memory from the operating system, mapped page by page, with an
//! optional cap so that out-of-memory paths run on real allocations.

use super::cpu::{get_available_memory, get_system_memory};
use crate::device::{
    check_bounds, Budget, DeviceError, DeviceMemory, Segment, SegmentHandle, SegmentTable,
};

/// Host memory block: a raw pointer the device owns; only touched under the bounds check.
struct HostBlock {
    ptr: *mut u8,
    len: usize,
    /// Bytes charged to the budget: `len` rounded up to whole pages, what the OS commits.
    charged: u64,
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

/// The OS page size: the smallest amount a mapping really costs.
fn page_size() -> u64 {
    #[cfg(unix)]
    {
        // SAFETY: sysconf has no preconditions.
        let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if p > 0 {
            return p as u64;
        }
    }
    4096
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

    fn has_driver(&self) -> bool {
        false
    }

    fn reserve(&self, bytes: u64) -> Result<Segment, DeviceError> {
        let oom = DeviceError::OutOfMemory { requested: bytes };
        if bytes == 0 {
            return Err(DeviceError::Unsupported("zero-byte segment".into()));
        }
        // A mapping costs whole pages, so the cap is charged in pages: 2M buffers of 512 B on
        // host:1GiB would otherwise commit 8 GiB.
        let page = page_size();
        let charged = bytes
            .checked_next_multiple_of(page)
            .ok_or(DeviceError::OutOfMemory { requested: bytes })?;
        self.budget.claim(charged)?;
        let mapped = usize::try_from(bytes)
            .ok()
            .and_then(|len| os_map(len).map(|ptr| (ptr, len)));
        let Some((ptr, len)) = mapped else {
            self.budget.give_back(charged);
            return Err(oom);
        };
        let handle = self.segments.add(HostBlock { ptr, len, charged });
        Ok(Segment {
            handle,
            address: Some(ptr as u64),
            size: bytes,
        })
    }

    fn release(&self, segment: SegmentHandle) -> Result<(), DeviceError> {
        let block = self.segments.remove(segment)?;
        os_unmap(block.ptr, block.len);
        self.budget.give_back(block.charged);
        Ok(())
    }

    fn mem_info(&self) -> Result<(u64, u64), DeviceError> {
        match self.capacity {
            Some(cap) => Ok((self.budget.left().unwrap_or(0), cap)),
            None => Ok((get_available_memory(), get_system_memory())),
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
}
