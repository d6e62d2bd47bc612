//! A simulated device: capacity only, no memory behind it.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::device::{DeviceError, DeviceMemory, Segment, SegmentHandle};

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
