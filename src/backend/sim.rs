//! A simulated device: capacity only, no memory behind it.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::device::{DeviceError, DeviceMemory, Segment, SegmentHandle, VirtualMemory};

/// The simulated mapping granule (CUDA's on current GPUs).
const SIM_GRANULE: u64 = 2 << 20;

/// A capacity-only address space: reserves nothing, so "what would this workload reserve on an
/// 80 GB card" can be planned here, and the pool's own overhead measured without device cost.
pub struct SimDevice {
    capacity: u64,
    state: Mutex<SimState>,
}

struct SimState {
    reserved: u64,
    next_address: u64,
    /// Handle -> (address, bytes charged to the capacity).
    segments: HashMap<SegmentHandle, (u64, u64)>,
    /// Address ranges (virtual memory): handle -> range size. Their charge is what is mapped.
    ranges: HashMap<SegmentHandle, u64>,
    next_handle: u64,
}

impl SimState {
    /// A fresh handle and address for `span` bytes of address space.
    fn place(&mut self, span: u64) -> (SegmentHandle, u64) {
        let handle = SegmentHandle(self.next_handle);
        self.next_handle += 1;
        let address = self.next_address;
        // Keep simulated addresses 2 MiB aligned and never reused, like a fresh VA range.
        self.next_address = self
            .next_address
            .saturating_add(span.div_ceil(SIM_GRANULE) * SIM_GRANULE);
        (handle, address)
    }
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
                ranges: HashMap::new(),
                next_handle: 1,
            }),
        }
    }
}

impl DeviceMemory for SimDevice {
    fn reserve_api(&self) -> crate::device::Allocator {
        crate::device::Allocator::Simulated
    }

    fn name(&self) -> String {
        format!("sim:{}", crate::units::format_bytes(self.capacity))
    }

    fn simulated(&self) -> bool {
        true
    }

    fn reserve(&self, bytes: u64) -> Result<Segment, DeviceError> {
        let mut s = crate::device::lock(&self.state);
        if bytes == 0
            || s.reserved
                .checked_add(bytes)
                .is_none_or(|n| n > self.capacity)
        {
            return Err(DeviceError::OutOfMemory { requested: bytes });
        }
        s.reserved += bytes;
        let (handle, address) = s.place(bytes);
        s.segments.insert(handle, (address, bytes));
        Ok(Segment {
            handle,
            address: Some(address),
            size: bytes,
        })
    }

    fn release(&self, segment: SegmentHandle) -> Result<(), DeviceError> {
        let mut s = crate::device::lock(&self.state);
        let (_, size) = s
            .segments
            .remove(&segment)
            .ok_or(DeviceError::InvalidSegment(segment))?;
        s.reserved -= size;
        s.ranges.remove(&segment);
        Ok(())
    }

    fn mem_info(&self) -> Result<(u64, u64), DeviceError> {
        let s = crate::device::lock(&self.state);
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

    fn virtual_memory(&self) -> Option<&dyn VirtualMemory> {
        Some(self)
    }
}

impl VirtualMemory for SimDevice {
    fn granularity(&self) -> u64 {
        SIM_GRANULE
    }

    fn reserve_range(&self, bytes: u64) -> Result<Segment, DeviceError> {
        if bytes == 0 || bytes % SIM_GRANULE != 0 {
            return Err(DeviceError::Unsupported(format!(
                "an address range of {bytes} bytes is not a whole number of granules"
            )));
        }
        let mut s = crate::device::lock(&self.state);
        let (handle, address) = s.place(bytes);
        s.segments.insert(handle, (address, 0));
        s.ranges.insert(handle, bytes);
        Ok(Segment {
            handle,
            address: Some(address),
            size: bytes,
        })
    }

    fn map(&self, range: SegmentHandle, offset: u64, bytes: u64) -> Result<(), DeviceError> {
        let mut s = self.lock_range(range, offset, bytes)?;
        if s.reserved
            .checked_add(bytes)
            .is_none_or(|n| n > self.capacity)
        {
            return Err(DeviceError::OutOfMemory { requested: bytes });
        }
        s.reserved += bytes;
        if let Some(seg) = s.segments.get_mut(&range) {
            seg.1 += bytes;
        }
        Ok(())
    }

    fn unmap(&self, range: SegmentHandle, offset: u64, bytes: u64) -> Result<(), DeviceError> {
        let mut s = self.lock_range(range, offset, bytes)?;
        let charged = s.segments.get_mut(&range).map_or(0, |seg| {
            let taken = bytes.min(seg.1);
            seg.1 -= taken;
            taken
        });
        s.reserved -= charged;
        Ok(())
    }
}

impl SimDevice {
    /// The state, locked, once `offset..offset + bytes` is known to be whole granules of
    /// `range`.
    fn lock_range(
        &self,
        range: SegmentHandle,
        offset: u64,
        bytes: u64,
    ) -> Result<std::sync::MutexGuard<'_, SimState>, DeviceError> {
        let s = crate::device::lock(&self.state);
        let span = *s
            .ranges
            .get(&range)
            .ok_or(DeviceError::InvalidSegment(range))?;
        check_granules(offset, bytes, span)?;
        Ok(s)
    }
}

/// `offset..offset + bytes` is whole granules inside a range of `span` bytes.
fn check_granules(offset: u64, bytes: u64, span: u64) -> Result<(), DeviceError> {
    let whole = offset % SIM_GRANULE == 0 && bytes % SIM_GRANULE == 0;
    if !whole || offset.checked_add(bytes).is_none_or(|end| end > span) {
        return Err(DeviceError::OutOfBounds {
            offset,
            len: bytes,
            size: span,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn sim_ranges_charge_what_is_mapped() {
        let dev = SimDevice::new(1 << 30);
        let vmm = dev.virtual_memory().unwrap();
        let range = vmm.reserve_range(4 << 30).unwrap();
        assert_eq!(dev.mem_info().unwrap().0, 1 << 30);
        vmm.map(range.handle, 0, 512 << 20).unwrap();
        assert!(vmm.map(range.handle, 512 << 20, 768 << 20).is_err());
        assert!(vmm.map(range.handle, 1, SIM_GRANULE).is_err());
        assert_eq!(dev.mem_info().unwrap().0, 512 << 20);
        vmm.unmap(range.handle, 256 << 20, 256 << 20).unwrap();
        dev.release(range.handle).unwrap();
        assert_eq!(dev.mem_info().unwrap().0, 1 << 30);
    }
}
