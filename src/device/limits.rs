//! What a Vulkan device lets a compute engine do with one buffer: the limits ggml-vulkan reads
//! to lay out its buffers and to decide which ops it can run (llama.cpp's Vulkan backend).

use serde::{Deserialize, Serialize};

/// The limits of one Vulkan device that decide where llama.cpp's ggml-vulkan backend puts
/// tensors and ops, read from the driver (`VkPhysicalDeviceLimits`, maintenance 3 and 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VulkanLimits {
    /// `minStorageBufferOffsetAlignment`: every tensor's offset in a device buffer is a
    /// multiple.
    pub offset_alignment: u64,
    /// `minMemoryMapAlignment`: the same for host memory the device maps (ggml-vulkan's pinned
    /// host buffers, which llama.cpp gives the CPU's compute buffer).
    pub map_alignment: u64,
    /// `maxStorageBufferRange`, the most bytes one shader binding reaches; `None` where the
    /// device indexes buffers with 64 bits (`VK_EXT_shader_64bit_indexing`), which lifts it.
    pub storage_range: Option<u64>,
    /// `maxMemoryAllocationSize`: the largest single allocation.
    pub max_allocation: u64,
    /// `maxBufferSize` (maintenance 4), else the largest allocation: the largest buffer.
    pub max_buffer: u64,
}

/// ggml-vulkan's suballocation block: it caps each buffer it allocates at 1 GiB (or the device's
/// largest allocation), so a larger compute buffer comes in several chunks.
const SUBALLOCATION_BLOCK: u64 = 1 << 30;

impl VulkanLimits {
    /// The limits planned for a Vulkan device that is not present: the widest storage range
    /// `maxStorageBufferRange` (a 32-bit field) can report, allocations of 4 GiB (above ggml's
    /// 1 GiB chunk), and the coarsest alignments drivers report (the 256 bytes the Vulkan
    /// specification allows a storage offset, a 4 KiB page for mapped memory), so that the
    /// layout is never finer than a driver's.
    pub const UNSEEN: VulkanLimits = VulkanLimits {
        offset_alignment: 256,
        map_alignment: 4096,
        storage_range: Some(u32::MAX as u64),
        max_allocation: 4 << 30,
        max_buffer: 4 << 30,
    };

    /// The largest chunk ggml's graph allocator fills before starting another
    /// (`suballocation_block_size`).
    pub fn chunk(&self) -> u64 {
        SUBALLOCATION_BLOCK.min(self.max_allocation)
    }

    /// The most bytes a tensor an op reads or writes may span for the device to run the op
    /// (`ggml_backend_vk_device_supports_op`'s size check): the largest buffer, and the storage
    /// range where one applies.
    pub fn tensor_limit(&self) -> u64 {
        self.storage_range
            .map_or(self.max_buffer, |r| r.min(self.max_buffer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_with_64_bit_indexing_is_limited_by_its_largest_buffer_only() {
        let lavapipe = VulkanLimits {
            offset_alignment: 16,
            map_alignment: 64,
            storage_range: Some(128 << 20),
            max_allocation: 2 << 30,
            max_buffer: u64::from(u32::MAX),
        };
        assert_eq!(lavapipe.tensor_limit(), 128 << 20);
        assert_eq!(lavapipe.chunk(), 1 << 30);
        let wide = VulkanLimits {
            storage_range: None,
            max_allocation: 512 << 20,
            ..lavapipe
        };
        assert_eq!(wide.tensor_limit(), u64::from(u32::MAX));
        assert_eq!(wide.chunk(), 512 << 20);
    }
}
