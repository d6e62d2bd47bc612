//! The device's own allocator, as a program that pools nothing would use it: what
//! `bench-alloc --compare native` sets the pool beside.

use serde::Serialize;

use super::{DeviceError, Segment, SegmentHandle};

/// Which allocator a device's own allocations go through, by the name of its API call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Allocator {
    /// CUDA's stream-ordered allocator on the device's default memory pool
    /// (`cuMemAllocAsync`/`cuMemFreeAsync`).
    #[serde(rename = "cuMemAllocAsync (default pool)")]
    CuMemAllocAsync,
    /// CUDA's synchronous `cuMemAlloc`/`cuMemFree`.
    #[serde(rename = "cuMemAlloc")]
    CuMemAlloc,
    /// HIP's `hipMalloc`/`hipFree`.
    #[serde(rename = "hipMalloc")]
    HipMalloc,
    /// OpenCL's `clCreateBuffer`/`clReleaseMemObject`.
    #[serde(rename = "clCreateBuffer")]
    ClCreateBuffer,
    /// Vulkan's `vkAllocateMemory`/`vkFreeMemory`.
    #[serde(rename = "vkAllocateMemory")]
    VkAllocateMemory,
    /// Host memory mapped from the OS (`mmap`/`munmap`).
    #[serde(rename = "mmap")]
    Mmap,
    /// Host memory from the process's allocator.
    #[serde(rename = "malloc")]
    Malloc,
    /// A simulated device's bookkeeping (no memory).
    #[serde(rename = "simulated")]
    Simulated,
    /// The device's [`super::DeviceMemory::reserve`], for a device that does not name its API.
    #[serde(rename = "reserve")]
    Reserve,
}

impl Allocator {
    /// The API call's name, as the JSON carries it.
    pub fn name(self) -> &'static str {
        match self {
            Allocator::CuMemAllocAsync => "cuMemAllocAsync (default pool)",
            Allocator::CuMemAlloc => "cuMemAlloc",
            Allocator::HipMalloc => "hipMalloc",
            Allocator::ClCreateBuffer => "clCreateBuffer",
            Allocator::VkAllocateMemory => "vkAllocateMemory",
            Allocator::Mmap => "mmap",
            Allocator::Malloc => "malloc",
            Allocator::Simulated => "simulated",
            Allocator::Reserve => "reserve",
        }
    }
}

/// What the allocator itself reports of a replay: its high watermarks since
/// [`NativeAllocator::begin`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NativePeaks {
    /// The most bytes it held from the device (CUDA: `CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH`).
    pub reserved: u64,
    /// The most bytes it had handed out, as it sized them (`CU_MEMPOOL_ATTR_USED_MEM_HIGH`).
    pub used: u64,
}

/// A device allocator of the driver's own with a cache of its own (CUDA's stream-ordered
/// memory pool), where a device has one beside [`super::DeviceMemory::reserve`]. Its
/// allocations are read and written through the device's `read` and `write`, like segments.
/// One replay at a time: `begin`, allocations and frees, `finish`.
pub trait NativeAllocator: Send + Sync {
    /// Which allocator this is.
    fn allocator(&self) -> Allocator;

    /// Starts a replay: the allocator's cached memory given back and its watermarks reset.
    fn begin(&self) -> Result<(), DeviceError>;

    /// Allocates `bytes`.
    fn allocate(&self, bytes: u64) -> Result<Segment, DeviceError>;

    /// Frees an allocation (queued where the allocator is stream-ordered).
    fn free(&self, allocation: SegmentHandle) -> Result<(), DeviceError>;

    /// Waits until every queued free has happened, so their memory is free for any use.
    fn synchronize(&self) -> Result<(), DeviceError>;

    /// Ends a replay whose allocations are all freed: waits for the frees, reads the
    /// watermarks (`None` where the driver does not report them) and gives the cached memory
    /// back to the device.
    fn finish(&self) -> Result<Option<NativePeaks>, DeviceError>;
}
