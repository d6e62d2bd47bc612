//! Vulkan's asynchronous copies: staged through a mapped host-visible buffer on the transfer
//! queue, each fenced, waited for in order of the caller's choosing.

use super::memory::*;
use super::*;

impl VulkanMemory {
    /// Starts a staged copy and keeps it for [`AsyncCopies::wait`].
    pub(super) fn start_staged(
        &self,
        segment: SegmentHandle,
        offset: u64,
        len: usize,
        host: HostSide,
    ) -> Result<PendingCopy, DeviceError> {
        let flight = self.start_flight(segment, offset, len, host)?;
        Ok(self.flights.insert(flight))
    }

    /// Starts a copy through a staging buffer (the path of memory the host cannot map): a mapped
    /// host-visible buffer, filled first for a write, copied to or from the segment's buffer on
    /// the transfer queue without waiting. The host memory must stay valid until the flight is
    /// finished.
    pub(super) fn start_flight(
        &self,
        segment: SegmentHandle,
        offset: u64,
        len: usize,
        host: HostSide,
    ) -> Result<VkFlight, DeviceError> {
        let target = match self.access(segment, offset, len)? {
            (_, Some(buffer)) => buffer,
            _ => return Err(DeviceError::Unsupported("not a staged segment".into())),
        };
        let staging_type = self
            .staging_type
            .ok_or_else(|| DeviceError::Unsupported("no host-visible memory for staging".into()))?;
        let size = (len as u64).max(1);
        let (staging, memory) = self.buffer_with_memory(
            size,
            staging_type,
            vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST,
        )?;
        let release = || {
            // SAFETY: nothing was submitted that uses them.
            unsafe {
                self.device.destroy_buffer(staging, None);
                self.device.free_memory(memory, None);
            }
        };
        // SAFETY: host-visible memory of at least `size` bytes, mapped until the copy is done.
        let mapped = match unsafe {
            self.device
                .map_memory(memory, 0, size, vk::MemoryMapFlags::empty())
        } {
            Ok(p) => p.cast::<u8>(),
            Err(e) => {
                release();
                return Err(vk_err("vkMapMemory", e));
            }
        };
        if let Some(src) = host.write_from() {
            // SAFETY: the caller's `src` holds `len` bytes; the mapping as many.
            unsafe { std::ptr::copy_nonoverlapping(src, mapped, len) };
        }
        let submitted = if host.write_from().is_some() {
            self.start_copy_commands(staging, target, 0, offset, len as u64)
        } else {
            self.start_copy_commands(target, staging, offset, 0, len as u64)
        };
        let (cmd, fence) = match submitted {
            Ok(done) => done,
            Err(e) => {
                release();
                return Err(e);
            }
        };
        Ok(VkFlight {
            cmd,
            fence,
            staging,
            memory,
            mapped,
            len,
            read_into: host.read_into(),
        })
    }

    /// Waits for a staged copy, delivers a read's bytes and frees the staging buffer.
    pub(super) fn finish_staged(&self, flight: VkFlight) -> Result<(), DeviceError> {
        let done = self.finish_copy_commands(flight.cmd, flight.fence);
        if let (Ok(()), Some(dst)) = (&done, flight.read_into) {
            // SAFETY: the copy finished; the memory is coherent and `dst` holds `len` bytes by
            // the caller's contract.
            unsafe { std::ptr::copy_nonoverlapping(flight.mapped, dst, flight.len) };
        }
        // SAFETY: the copy is over (fence waited); each is released once.
        unsafe {
            self.device.unmap_memory(flight.memory);
            self.device.destroy_buffer(flight.staging, None);
            self.device.free_memory(flight.memory, None);
        }
        done
    }
}

impl AsyncCopies for VulkanMemory {
    unsafe fn start(
        &self,
        segment: SegmentHandle,
        offset: u64,
        len: usize,
        host: HostSide,
    ) -> Result<PendingCopy, DeviceError> {
        self.start_staged(segment, offset, len, host)
    }

    fn wait(&self, copy: PendingCopy) -> Result<Option<std::time::Duration>, DeviceError> {
        let flight = self.flights.take(copy)?;
        self.finish_staged(flight).map(|()| None)
    }
}
