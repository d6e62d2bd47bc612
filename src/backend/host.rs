//! Host RAM as a device: real memory from the operating system, mapped page by page, with an
//! optional cap so that out-of-memory paths run on real allocations.

use std::collections::BTreeMap;
use std::sync::Mutex;

use super::cpu::{get_available_memory, get_system_memory};
use crate::device::{
    check_bounds, Budget, DeviceError, DeviceMemory, Segment, SegmentHandle, SegmentTable,
    VirtualMemory,
};

/// Host memory block: a raw pointer the device owns; only touched under the bounds check.
struct HostBlock {
    ptr: *mut u8,
    len: usize,
    /// Bytes charged to the budget: `len` rounded up to whole pages, what the OS commits.
    /// For an address range, what is mapped.
    charged: u64,
    /// For an address range: its accessible parts, offset -> length, adjacent ones merged.
    /// `None` for an ordinary segment (all of it accessible).
    mapped: Option<Mutex<BTreeMap<u64, u64>>>,
}

impl HostBlock {
    /// Checks that `offset..offset + len` is inside the block and, for a range, mapped.
    fn check(&self, offset: u64, len: usize) -> Result<(), DeviceError> {
        check_bounds(offset, len, self.len as u64)?;
        let Some(mapped) = &self.mapped else {
            return Ok(());
        };
        let mapped = crate::device::lock(mapped);
        let end = offset + len as u64;
        let covered = mapped
            .range(..=offset)
            .next_back()
            .is_some_and(|(&start, &n)| start + n >= end);
        if covered || len == 0 {
            Ok(())
        } else {
            Err(DeviceError::OutOfBounds {
                offset,
                len: len as u64,
                size: self.len as u64,
            })
        }
    }
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

/// Reserves `len` bytes of address space with no access and no memory committed.
#[cfg(unix)]
fn os_reserve(len: usize) -> Option<*mut u8> {
    // SAFETY: an anonymous private mapping with no address hint has no preconditions.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    (p != libc::MAP_FAILED).then_some(p.cast())
}

/// Makes `len` bytes at `ptr` (inside a reserved range, page-aligned) accessible, or (with
/// `access` false) drops their pages and makes them inaccessible again.
#[cfg(unix)]
fn os_protect(ptr: *mut u8, len: usize, access: bool) -> bool {
    if !access {
        // SAFETY: a page-aligned span of a private anonymous mapping this device made; the
        // pages are dropped (read back as zeros if ever mapped again).
        unsafe { libc::madvise(ptr.cast(), len, libc::MADV_DONTNEED) };
    }
    let prot = if access {
        libc::PROT_READ | libc::PROT_WRITE
    } else {
        libc::PROT_NONE
    };
    // SAFETY: as above.
    unsafe { libc::mprotect(ptr.cast(), len, prot) == 0 }
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
    fn reserve_api(&self) -> crate::device::Allocator {
        if cfg!(unix) {
            crate::device::Allocator::Mmap
        } else {
            crate::device::Allocator::Malloc
        }
    }

    fn name(&self) -> String {
        match self.capacity {
            Some(c) => format!("host:{}", crate::units::format_bytes(c)),
            None => "host".into(),
        }
    }

    fn has_driver(&self) -> bool {
        false
    }

    // Without a capacity the free figure is the machine's available memory; with one it is
    // this device's own count.
    fn shares_host_memory(&self) -> bool {
        self.capacity.is_none()
    }

    fn held_bytes(&self) -> Option<u64> {
        Some(self.budget.used())
    }

    #[cfg(unix)]
    fn virtual_memory(&self) -> Option<&dyn VirtualMemory> {
        Some(self)
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
        let handle = self.segments.add(HostBlock {
            ptr,
            len,
            charged,
            mapped: None,
        });
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

    #[expect(
        clippy::cast_possible_truncation,
        reason = "usize is 64 bits (lib.rs refuses other targets)"
    )]
    fn write(&self, segment: SegmentHandle, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.segments.with(segment, |block| {
            block.check(offset, data.len())?;
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

    #[expect(
        clippy::cast_possible_truncation,
        reason = "usize is 64 bits (lib.rs refuses other targets)"
    )]
    fn read(&self, segment: SegmentHandle, offset: u64, out: &mut [u8]) -> Result<(), DeviceError> {
        self.segments.with(segment, |block| {
            block.check(offset, out.len())?;
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

#[cfg(unix)]
impl VirtualMemory for HostDevice {
    fn granularity(&self) -> u64 {
        page_size()
    }

    fn reserve_range(&self, bytes: u64) -> Result<Segment, DeviceError> {
        if bytes == 0 || bytes % page_size() != 0 {
            return Err(DeviceError::Unsupported(format!(
                "an address range of {bytes} bytes is not a whole number of pages"
            )));
        }
        let len =
            usize::try_from(bytes).map_err(|_| DeviceError::OutOfMemory { requested: bytes })?;
        let ptr = os_reserve(len).ok_or(DeviceError::OutOfMemory { requested: bytes })?;
        let handle = self.segments.add(HostBlock {
            ptr,
            len,
            charged: 0,
            mapped: Some(Mutex::new(BTreeMap::new())),
        });
        Ok(Segment {
            handle,
            address: Some(ptr as u64),
            size: bytes,
        })
    }

    fn map(&self, range: SegmentHandle, offset: u64, bytes: u64) -> Result<(), DeviceError> {
        self.protect(range, offset, bytes, true)
    }

    fn unmap(&self, range: SegmentHandle, offset: u64, bytes: u64) -> Result<(), DeviceError> {
        self.protect(range, offset, bytes, false)
    }
}

#[cfg(unix)]
impl HostDevice {
    /// Maps (`access`) or unmaps whole pages of a range, charging or refunding the budget.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "usize is 64 bits (lib.rs refuses other targets)"
    )]
    fn protect(
        &self,
        range: SegmentHandle,
        offset: u64,
        bytes: u64,
        access: bool,
    ) -> Result<(), DeviceError> {
        let page = page_size();
        self.segments.with_mut(range, |block| {
            let bad = DeviceError::OutOfBounds {
                offset,
                len: bytes,
                size: block.len as u64,
            };
            let Some(mapped) = block.mapped.as_mut() else {
                return Err(DeviceError::Unsupported("not an address range".into()));
            };
            let mapped = crate::device::inner(mapped);
            if offset % page != 0 || bytes % page != 0 || bytes == 0 {
                return Err(bad);
            }
            check_bounds(offset, bytes as usize, block.len as u64).map_err(|_| bad.clone())?;
            let end = offset + bytes;
            let overlapping: Vec<(u64, u64)> = mapped
                .range(..end)
                .filter(|(&s, &n)| s + n > offset)
                .map(|(&s, &n)| (s, n))
                .collect();
            let already: u64 = overlapping
                .iter()
                .map(|&(s, n)| (s + n).min(end) - s.max(offset))
                .sum();
            // Only whole unmapped (to map) or whole mapped (to unmap) spans: no double charge.
            if (access && already != 0) || (!access && already != bytes) {
                return Err(bad);
            }
            if access {
                self.budget.claim(bytes)?;
            }
            // SAFETY: offset..end is inside the reservation (checked above).
            let ptr = unsafe { block.ptr.add(offset as usize) };
            if !os_protect(ptr, bytes as usize, access) {
                if access {
                    self.budget.give_back(bytes);
                }
                return Err(DeviceError::OutOfMemory { requested: bytes });
            }
            if access {
                let (mut start, mut len) = (offset, bytes);
                if let Some((&s, &n)) = mapped.range(..offset).next_back() {
                    if s + n == offset {
                        mapped.remove(&s);
                        start = s;
                        len += n;
                    }
                }
                if let Some(n) = mapped.remove(&end) {
                    len += n;
                }
                mapped.insert(start, len);
                block.charged += bytes;
            } else {
                for (s, n) in overlapping {
                    mapped.remove(&s);
                    if s < offset {
                        mapped.insert(s, offset - s);
                    }
                    if s + n > end {
                        mapped.insert(end, s + n - end);
                    }
                }
                block.charged -= bytes;
                self.budget.give_back(bytes);
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn host_ranges_map_and_unmap_whole_pages() {
        let dev = HostDevice::new(Some(8 << 20));
        let vmm = dev.virtual_memory().unwrap();
        let page = vmm.granularity();
        // Address space beyond the cap costs nothing until mapped.
        let range = vmm.reserve_range(64 << 20).unwrap();
        assert_eq!(dev.reserved(), 0);
        // Unmapped memory is out of bounds, not a crash.
        assert!(matches!(
            dev.write(range.handle, 0, b"x"),
            Err(DeviceError::OutOfBounds { .. })
        ));
        vmm.map(range.handle, 0, 4 * page).unwrap();
        vmm.map(range.handle, 4 * page, 4 * page).unwrap();
        assert_eq!(dev.reserved(), 8 * page);
        // A write across two maps lands; mapping a mapped page twice is refused.
        dev.write(range.handle, 4 * page - 3, b"across").unwrap();
        let mut out = [0u8; 6];
        dev.read(range.handle, 4 * page - 3, &mut out).unwrap();
        assert_eq!(&out, b"across");
        assert!(vmm.map(range.handle, 2 * page, 4 * page).is_err());
        assert!(vmm.map(range.handle, 1, page).is_err());
        // More than the cap is out of memory.
        assert_eq!(
            vmm.map(range.handle, 8 * page, 8 << 20),
            Err(DeviceError::OutOfMemory { requested: 8 << 20 })
        );
        vmm.unmap(range.handle, 4 * page, 4 * page).unwrap();
        assert_eq!(dev.reserved(), 4 * page);
        assert!(vmm.unmap(range.handle, 4 * page, page).is_err());
        assert!(dev.read(range.handle, 4 * page, &mut out).is_err());
        dev.release(range.handle).unwrap();
        assert_eq!(dev.reserved(), 0);
    }

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
