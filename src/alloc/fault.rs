//! Fault injection: a device wrapper that refuses a fraction of reservations (segments, and
//! memory mapped into expandable segments' address ranges), to prove that every failure is
//! survived through the pool's retry or CPU fallback.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::device::{DeviceError, DeviceMemory, Segment, SegmentHandle, VirtualMemory};

/// Wraps a device so that `rate` of its reservations fail with out-of-memory.
pub struct FaultInjector<D> {
    inner: D,
    rate: f64,
    state: Mutex<u64>,
    injected: AtomicU64,
}

impl<D: DeviceMemory> FaultInjector<D> {
    /// Fails `rate` (0–1) of reservations, chosen by a generator seeded with `seed`.
    pub fn new(inner: D, rate: f64, seed: u64) -> Self {
        FaultInjector {
            inner,
            rate: rate.clamp(0.0, 1.0),
            state: Mutex::new(seed ^ 0x5DEE_CE66_D1CE_4E5B),
            injected: AtomicU64::new(0),
        }
    }

    /// Reservations failed on purpose so far.
    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::Relaxed)
    }

    fn roll(&self) -> bool {
        let mut s = crate::device::lock(&self.state);
        // xorshift64*: enough to spread failures; deterministic for a seed.
        *s ^= *s >> 12;
        *s ^= *s << 25;
        *s ^= *s >> 27;
        let v = s.wrapping_mul(0x2545_F491_4F6C_DD1D);
        ((v >> 11) as f64 / (1u64 << 53) as f64) < self.rate
    }
}

impl<D: DeviceMemory> DeviceMemory for FaultInjector<D> {
    fn name(&self) -> String {
        format!(
            "{} (injecting {:.0} % failures)",
            self.inner.name(),
            self.rate * 100.0
        )
    }

    fn device_name(&self) -> String {
        self.inner.device_name()
    }

    fn simulated(&self) -> bool {
        self.inner.simulated()
    }

    fn has_driver(&self) -> bool {
        self.inner.has_driver()
    }

    fn virtual_memory(&self) -> Option<&dyn VirtualMemory> {
        self.inner
            .virtual_memory()
            .map(|_| self as &dyn VirtualMemory)
    }

    fn async_copies(&self) -> Option<&dyn crate::device::AsyncCopies> {
        self.inner.async_copies()
    }

    fn reserve_api(&self) -> crate::device::Allocator {
        self.inner.reserve_api()
    }

    // No native allocator: its allocations would bypass the injected failures.

    fn reserve(&self, bytes: u64) -> Result<Segment, DeviceError> {
        if self.roll() {
            self.injected.fetch_add(1, Ordering::Relaxed);
            return Err(DeviceError::OutOfMemory { requested: bytes });
        }
        self.inner.reserve(bytes)
    }

    fn release(&self, segment: SegmentHandle) -> Result<(), DeviceError> {
        self.inner.release(segment)
    }

    fn mem_info(&self) -> Result<(u64, u64), DeviceError> {
        self.inner.mem_info()
    }

    fn shares_host_memory(&self) -> bool {
        self.inner.shares_host_memory()
    }

    fn held_bytes(&self) -> Option<u64> {
        self.inner.held_bytes()
    }

    fn max_allocation(&self) -> Option<u64> {
        self.inner.max_allocation()
    }

    fn alignment(&self) -> u64 {
        self.inner.alignment()
    }

    fn write(&self, segment: SegmentHandle, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.inner.write(segment, offset, data)
    }

    fn read(&self, segment: SegmentHandle, offset: u64, out: &mut [u8]) -> Result<(), DeviceError> {
        self.inner.read(segment, offset, out)
    }
}

/// Mapping memory into a range is a reservation too: `rate` of maps fail with out-of-memory.
impl<D: DeviceMemory> VirtualMemory for FaultInjector<D> {
    fn granularity(&self) -> u64 {
        self.inner.virtual_memory().map_or(1, |v| v.granularity())
    }

    fn reserve_range(&self, bytes: u64) -> Result<Segment, DeviceError> {
        self.vmm()?.reserve_range(bytes)
    }

    fn map(&self, range: SegmentHandle, offset: u64, bytes: u64) -> Result<(), DeviceError> {
        let vmm = self.vmm()?;
        if self.roll() {
            self.injected.fetch_add(1, Ordering::Relaxed);
            return Err(DeviceError::OutOfMemory { requested: bytes });
        }
        vmm.map(range, offset, bytes)
    }

    fn unmap(&self, range: SegmentHandle, offset: u64, bytes: u64) -> Result<(), DeviceError> {
        self.vmm()?.unmap(range, offset, bytes)
    }
}

impl<D: DeviceMemory> FaultInjector<D> {
    fn vmm(&self) -> Result<&dyn VirtualMemory, DeviceError> {
        self.inner
            .virtual_memory()
            .ok_or_else(|| DeviceError::Unsupported("no virtual memory".into()))
    }
}

impl DeviceMemory for std::sync::Arc<dyn DeviceMemory> {
    fn name(&self) -> String {
        (**self).name()
    }
    fn device_name(&self) -> String {
        (**self).device_name()
    }
    fn simulated(&self) -> bool {
        (**self).simulated()
    }
    fn has_driver(&self) -> bool {
        (**self).has_driver()
    }
    fn shares_host_memory(&self) -> bool {
        (**self).shares_host_memory()
    }
    fn held_bytes(&self) -> Option<u64> {
        (**self).held_bytes()
    }
    fn virtual_memory(&self) -> Option<&dyn crate::device::VirtualMemory> {
        (**self).virtual_memory()
    }
    fn async_copies(&self) -> Option<&dyn crate::device::AsyncCopies> {
        (**self).async_copies()
    }
    fn reserve_api(&self) -> crate::device::Allocator {
        (**self).reserve_api()
    }
    fn native_allocator(&self) -> Option<&dyn crate::device::NativeAllocator> {
        (**self).native_allocator()
    }
    fn reserve(&self, bytes: u64) -> Result<Segment, DeviceError> {
        (**self).reserve(bytes)
    }
    fn release(&self, segment: SegmentHandle) -> Result<(), DeviceError> {
        (**self).release(segment)
    }
    fn mem_info(&self) -> Result<(u64, u64), DeviceError> {
        (**self).mem_info()
    }
    fn max_allocation(&self) -> Option<u64> {
        (**self).max_allocation()
    }
    fn alignment(&self) -> u64 {
        (**self).alignment()
    }
    fn write(&self, segment: SegmentHandle, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        (**self).write(segment, offset, data)
    }
    fn read(&self, segment: SegmentHandle, offset: u64, out: &mut [u8]) -> Result<(), DeviceError> {
        (**self).read(segment, offset, out)
    }
}
