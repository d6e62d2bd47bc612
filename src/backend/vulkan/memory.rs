//! Vulkan device memory for the pool: a buffer bound to its own allocation per segment, mapped
//! where the host can see it, copied through the transfer queue where it cannot.

use super::*;

/// One `vkAllocateMemory` allocation: a device-local segment the pool carves.
pub(super) struct VkSegment {
    pub(super) memory: vk::DeviceMemory,
    pub(super) size: u64,
    /// Persistent mapping when the memory type is host-visible.
    pub(super) mapped: Option<MappedPtr>,
    /// A buffer over the whole allocation, for staging copies when it is not host-visible.
    pub(super) buffer: Option<vk::Buffer>,
}

/// A staged copy in flight: its commands, its mapped staging buffer and, for a read, where the
/// bytes go once it is done.
pub(super) struct VkFlight {
    pub(super) cmd: vk::CommandBuffer,
    pub(super) fence: vk::Fence,
    pub(super) staging: vk::Buffer,
    pub(super) memory: vk::DeviceMemory,
    pub(super) mapped: *mut u8,
    pub(super) len: usize,
    pub(super) read_into: Option<*mut u8>,
}

// SAFETY: Vulkan handles are plain identifiers; the pointers are a mapping this device owns and
// the caller's buffer it promised to keep (AsyncCopies' contract), used under `flights`' lock.
unsafe impl Send for VkFlight {}

/// A pointer into a persistent mapping.
#[derive(Clone, Copy)]
pub(super) struct MappedPtr(*mut u8);

// SAFETY: the mapping stays valid until the segment is freed, which takes the segment map's
// write lock; copies through it are bounds-checked and touch only caller-owned ranges.
unsafe impl Send for MappedPtr {}
// SAFETY: as above.
unsafe impl Sync for MappedPtr {}

/// How to open a Vulkan device for allocation.
#[derive(Debug, Clone, Copy, Default)]
pub struct VulkanOptions {
    /// Copy through a staging buffer and a transfer queue even when device memory is
    /// host-visible (the path discrete GPUs need; forcing it lets it be tested on lavapipe).
    pub force_staging: bool,
}

/// Device memory through `vkAllocateMemory` from a device-local memory type.
pub struct VulkanMemory {
    pub(super) name: String,
    pub(super) model: String,
    pub(super) heap_index: u32,
    pub(super) heap_size: u64,
    pub(super) budget_ext: bool,
    pub(super) memory_type: u32,
    pub(super) staging_type: Option<u32>,
    pub(super) max_alloc: u64,
    pub(super) align: u64,
    pub(super) budget: Budget,
    /// The heap is host RAM (lavapipe, integrated GPUs).
    pub(super) host_shared: bool,
    pub(super) segments: SegmentTable<VkSegment>,
    pub(super) transfer: Mutex<(vk::Queue, vk::CommandPool)>,
    /// Staged copies submitted and not yet waited for, by id.
    pub(super) flights: Flights<VkFlight>,
    pub(super) physical: vk::PhysicalDevice,
    pub(super) device: ash::Device,
    // Destroyed last (see Drop): everything above was made from it.
    pub(super) instance: VulkanInstance,
}

pub(super) fn vk_err(call: &str, e: vk::Result) -> DeviceError {
    match e {
        vk::Result::ERROR_OUT_OF_DEVICE_MEMORY
        | vk::Result::ERROR_OUT_OF_HOST_MEMORY
        | vk::Result::ERROR_TOO_MANY_OBJECTS => DeviceError::OutOfMemory { requested: 0 },
        other => DeviceError::Backend(format!("{call}: {other}")),
    }
}

impl VulkanMemory {
    /// Opens physical device `index` (in `discover` order) with default options.
    pub fn open(index: usize) -> Result<Self, Unavailable> {
        Self::open_with(index, VulkanOptions::default())
    }

    /// Opens physical device `index` with `options`.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "Vulkan has at most 32 memory types; queue family counts are u32 in Vulkan"
    )]
    pub fn open_with(index: usize, options: VulkanOptions) -> Result<Self, Unavailable> {
        let instance = VulkanInstance::new()?;
        let physicals = instance.physical_devices()?;
        let physical = *physicals.get(index).ok_or_else(|| {
            Unavailable::Failed(format!(
                "no Vulkan device {index} ({} found)",
                physicals.len()
            ))
        })?;
        let info = describe(&instance, index, physical);
        let vki = &instance.instance;
        // SAFETY: `physical` came from this instance.
        let memory = unsafe { vki.get_physical_device_memory_properties(physical) };
        let types =
            &memory.memory_types[..(memory.memory_type_count as usize).min(vk::MAX_MEMORY_TYPES)];
        let host = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        let device_local = |t: &vk::MemoryType| {
            t.property_flags
                .contains(vk::MemoryPropertyFlags::DEVICE_LOCAL)
        };
        let pick = types
            .iter()
            .position(|t| {
                device_local(t) && t.property_flags.contains(host) && !options.force_staging
            })
            .or_else(|| types.iter().position(device_local))
            .ok_or_else(|| Unavailable::Failed("no device-local memory type".into()))?
            as u32;
        let host_visible =
            types[pick as usize].property_flags.contains(host) && !options.force_staging;
        let staging_type = types
            .iter()
            .position(|t| t.property_flags.contains(host))
            .map(|i| i as u32);
        let heap_index = types[pick as usize].heap_index;
        let heap_size = memory.memory_heaps[heap_index as usize].size;
        // SAFETY: `physical` came from this instance.
        let families = unsafe { vki.get_physical_device_queue_family_properties(physical) };
        let transfer_bits =
            vk::QueueFlags::TRANSFER | vk::QueueFlags::GRAPHICS | vk::QueueFlags::COMPUTE;
        let family = families
            .iter()
            .position(|f| f.queue_flags.intersects(transfer_bits) && f.queue_count > 0)
            .ok_or_else(|| Unavailable::Failed("no queue family can transfer".into()))?
            as u32;
        let priorities = [1.0f32];
        let queue_info = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&priorities)];
        let create = vk::DeviceCreateInfo::default().queue_create_infos(&queue_info);
        // SAFETY: create info and the arrays it points to live through the call.
        let device = unsafe { vki.create_device(physical, &create, None) }
            .map_err(|e| Unavailable::Failed(format!("vkCreateDevice: {e}")))?;
        // SAFETY: queue 0 of `family` was requested above.
        let queue = unsafe { device.get_device_queue(family, 0) };
        let pool_info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(family)
            .flags(
                vk::CommandPoolCreateFlags::TRANSIENT
                    | vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER,
            );
        // SAFETY: valid device and create info.
        let command_pool = match unsafe { device.create_command_pool(&pool_info, None) } {
            Ok(p) => p,
            Err(e) => {
                // SAFETY: nothing else was created from the device.
                unsafe { device.destroy_device(None) };
                return Err(Unavailable::Failed(format!("vkCreateCommandPool: {e}")));
            }
        };
        // SAFETY: `physical` came from this instance.
        let limits = unsafe { vki.get_physical_device_properties(physical) }.limits;
        let align = limits
            .non_coherent_atom_size
            .max(limits.min_storage_buffer_offset_alignment)
            .max(512)
            .next_power_of_two();
        Ok(VulkanMemory {
            name: format!("vulkan:{index} ({})", info.name),
            model: info.name.clone(),
            heap_index,
            heap_size,
            budget_ext: instance.has_extension(physical, ash::ext::memory_budget::NAME),
            memory_type: pick,
            staging_type: if host_visible { None } else { staging_type },
            max_alloc: info.max_alloc_bytes.unwrap_or(heap_size),
            align,
            budget: Budget::new(Some(heap_size)),
            host_shared: info.unified_memory,
            segments: SegmentTable::default(),
            transfer: Mutex::new((queue, command_pool)),
            flights: Flights::default(),
            physical,
            device,
            instance,
        })
    }

    pub(super) fn free_segment(&self, seg: VkSegment) {
        // SAFETY: the segment was removed from the map, so no copy is using it; each handle is
        // destroyed once.
        unsafe {
            if seg.mapped.is_some() {
                self.device.unmap_memory(seg.memory);
            }
            if let Some(buffer) = seg.buffer {
                self.device.destroy_buffer(buffer, None);
            }
            self.device.free_memory(seg.memory, None);
        }
    }

    /// Allocates `size` bytes of `memory_type` with a buffer bound over all of it.
    pub(super) fn buffer_with_memory(
        &self,
        size: u64,
        memory_type: u32,
        usage: vk::BufferUsageFlags,
    ) -> Result<(vk::Buffer, vk::DeviceMemory), DeviceError> {
        let info = vk::BufferCreateInfo::default()
            .size(size)
            .usage(usage)
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: valid device and create info.
        let buffer = unsafe { self.device.create_buffer(&info, None) }
            .map_err(|e| vk_err("vkCreateBuffer", e))?;
        // SAFETY: `buffer` was just created on this device.
        let req = unsafe { self.device.get_buffer_memory_requirements(buffer) };
        let alloc = vk::MemoryAllocateInfo::default()
            .allocation_size(req.size.max(size))
            .memory_type_index(memory_type);
        // SAFETY: valid device and allocate info.
        let memory = match unsafe { self.device.allocate_memory(&alloc, None) } {
            Ok(m) => m,
            Err(e) => {
                // SAFETY: the buffer is unused.
                unsafe { self.device.destroy_buffer(buffer, None) };
                return Err(vk_err("vkAllocateMemory", e));
            }
        };
        // SAFETY: memory is large enough and of a type the buffer accepts.
        if let Err(e) = unsafe { self.device.bind_buffer_memory(buffer, memory, 0) } {
            // SAFETY: neither is in use.
            unsafe {
                self.device.destroy_buffer(buffer, None);
                self.device.free_memory(memory, None);
            }
            return Err(vk_err("vkBindBufferMemory", e));
        }
        Ok((buffer, memory))
    }

    /// Waits for a submitted copy's fence, then frees its fence and command buffer.
    pub(super) fn finish_copy_commands(
        &self,
        cmd: vk::CommandBuffer,
        fence: vk::Fence,
    ) -> Result<(), DeviceError> {
        // SAFETY: the fence belongs to a submitted copy; waiting has no other precondition.
        let waited = unsafe { self.device.wait_for_fences(&[fence], true, u64::MAX) };
        let guard = crate::device::lock(&self.transfer);
        // SAFETY: the copy finished (or the wait failed and the device is lost); each is freed
        // once, the command buffer under the pool's lock.
        unsafe {
            self.device.destroy_fence(fence, None);
            self.device.free_command_buffers(guard.1, &[cmd]);
        }
        waited.map_err(|e| vk_err("vkWaitForFences", e))
    }

    /// Records and submits one buffer copy without waiting; returns its command buffer and
    /// fence for [`Self::finish_copy_commands`].
    pub(super) fn start_copy_commands(
        &self,
        src: vk::Buffer,
        dst: vk::Buffer,
        src_offset: u64,
        dst_offset: u64,
        size: u64,
    ) -> Result<(vk::CommandBuffer, vk::Fence), DeviceError> {
        let guard = crate::device::lock(&self.transfer);
        let (queue, pool) = *guard;
        let alloc = vk::CommandBufferAllocateInfo::default()
            .command_pool(pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(1);
        // SAFETY: the pool is used only under `transfer`'s lock.
        let cmd = unsafe { self.device.allocate_command_buffers(&alloc) }
            .map_err(|e| vk_err("vkAllocateCommandBuffers", e))?[0];
        // SAFETY: fence creation with a valid device.
        let fence = unsafe {
            self.device
                .create_fence(&vk::FenceCreateInfo::default(), None)
        };
        let result = fence
            .map_err(|e| vk_err("vkCreateFence", e))
            .and_then(|fence| {
                let begin = vk::CommandBufferBeginInfo::default()
                    .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
                let region = [vk::BufferCopy {
                    src_offset,
                    dst_offset,
                    size,
                }];
                let cmds = [cmd];
                let submit = [vk::SubmitInfo::default().command_buffers(&cmds)];
                // SAFETY: recording and submitting one copy between live buffers.
                let r = unsafe {
                    self.device
                        .begin_command_buffer(cmd, &begin)
                        .and_then(|_| {
                            self.device.cmd_copy_buffer(cmd, src, dst, &region);
                            self.device.end_command_buffer(cmd)
                        })
                        .and_then(|_| self.device.queue_submit(queue, &submit, fence))
                };
                match r {
                    Ok(()) => Ok(fence),
                    Err(e) => {
                        // SAFETY: never submitted.
                        unsafe { self.device.destroy_fence(fence, None) };
                        Err(vk_err("vkQueueSubmit", e))
                    }
                }
            });
        match result {
            Ok(fence) => Ok((cmd, fence)),
            Err(e) => {
                // SAFETY: the command buffer was never submitted.
                unsafe { self.device.free_command_buffers(pool, &[cmd]) };
                Err(e)
            }
        }
    }

    pub(super) fn access(
        &self,
        segment: SegmentHandle,
        offset: u64,
        len: usize,
    ) -> Result<(Option<MappedPtr>, Option<vk::Buffer>), DeviceError> {
        self.segments.with(segment, |seg| {
            check_bounds(offset, len, seg.size)?;
            Ok((seg.mapped, seg.buffer))
        })
    }
}

/// Raw handles, for a program that records its own commands on pool memory: an allocation is
/// `native_memory(info.segment)` from `info.offset`, to bind a buffer of its own to.
impl VulkanMemory {
    /// The `VkDeviceMemory` of `segment`, valid while the segment is reserved.
    pub fn native_memory(&self, segment: SegmentHandle) -> Result<vk::DeviceMemory, DeviceError> {
        self.segments.with(segment, |seg| Ok(seg.memory))
    }

    /// The buffer over the whole of `segment`, where the pool made one (memory that is not
    /// host-visible, copied through staging); `None` for mapped memory.
    pub fn native_buffer(&self, segment: SegmentHandle) -> Result<Option<vk::Buffer>, DeviceError> {
        self.segments.with(segment, |seg| Ok(seg.buffer))
    }

    /// The logical device every segment was allocated on.
    pub fn native_device(&self) -> vk::Device {
        self.device.handle()
    }

    /// The instance and physical device the logical device was made from.
    pub fn native_instance(&self) -> (vk::Instance, vk::PhysicalDevice) {
        (self.instance.instance.handle(), self.physical)
    }

    /// The index of the memory type every segment uses.
    pub fn native_memory_type(&self) -> u32 {
        self.memory_type
    }
}

impl Drop for VulkanMemory {
    fn drop(&mut self) {
        let flights = self.flights.drain();
        for flight in flights {
            let _ = self.finish_staged(flight);
        }
        for (_, seg) in self.segments.drain() {
            self.free_segment(seg);
        }
        let pool = crate::device::inner(&mut self.transfer).1;
        // SAFETY: no command buffer is in flight (copies wait for their fences); the device is
        // destroyed after everything made from it, and the instance after the device.
        unsafe {
            self.device.destroy_command_pool(pool, None);
            self.device.destroy_device(None);
        }
    }
}

impl DeviceMemory for VulkanMemory {
    fn reserve_api(&self) -> crate::device::Allocator {
        crate::device::Allocator::VkAllocateMemory
    }

    fn async_copies(&self) -> Option<&dyn AsyncCopies> {
        // Only a staged device has copies of its own; host-visible memory is copied by the
        // CPU, which a transfer thread overlaps better.
        self.staging_type
            .is_some()
            .then_some(self as &dyn AsyncCopies)
    }

    fn name(&self) -> String {
        self.name.clone()
    }

    fn device_name(&self) -> String {
        self.model.clone()
    }

    fn reserve(&self, bytes: u64) -> Result<Segment, DeviceError> {
        let oom = DeviceError::OutOfMemory { requested: bytes };
        if bytes > self.max_alloc {
            return Err(oom);
        }
        self.budget.claim(bytes)?;
        let made = if self.staging_type.is_some() {
            let usage = vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST;
            self.buffer_with_memory(bytes, self.memory_type, usage)
                .map(|(buffer, memory)| VkSegment {
                    memory,
                    size: bytes,
                    mapped: None,
                    buffer: Some(buffer),
                })
        } else {
            let info = vk::MemoryAllocateInfo::default()
                .allocation_size(bytes)
                .memory_type_index(self.memory_type);
            // SAFETY: valid device and allocate info.
            unsafe { self.device.allocate_memory(&info, None) }
                .map_err(|e| vk_err("vkAllocateMemory", e))
                .and_then(|memory| {
                    // SAFETY: host-visible memory, mapped whole for the segment's lifetime.
                    match unsafe {
                        self.device.map_memory(
                            memory,
                            0,
                            vk::WHOLE_SIZE,
                            vk::MemoryMapFlags::empty(),
                        )
                    } {
                        Ok(ptr) => Ok(VkSegment {
                            memory,
                            size: bytes,
                            mapped: Some(MappedPtr(ptr.cast())),
                            buffer: None,
                        }),
                        Err(e) => {
                            // SAFETY: unused memory.
                            unsafe { self.device.free_memory(memory, None) };
                            Err(vk_err("vkMapMemory", e))
                        }
                    }
                })
        };
        match made {
            Ok(seg) => {
                let handle = self.segments.add(seg);
                Ok(Segment {
                    handle,
                    address: None,
                    size: bytes,
                })
            }
            Err(e) => {
                self.budget.give_back(bytes);
                Err(match e {
                    DeviceError::OutOfMemory { .. } => oom,
                    other => other,
                })
            }
        }
    }

    fn release(&self, segment: SegmentHandle) -> Result<(), DeviceError> {
        let seg = self.segments.remove(segment)?;
        let size = seg.size;
        self.free_segment(seg);
        self.budget.give_back(size);
        Ok(())
    }

    fn shares_host_memory(&self) -> bool {
        self.host_shared
    }

    fn held_bytes(&self) -> Option<u64> {
        Some(self.budget.used())
    }

    fn mem_info(&self) -> Result<(u64, u64), DeviceError> {
        let ours =
            crate::backend::host_shared_free(self.host_shared, self.budget.left().unwrap_or(0));
        if self.budget_ext {
            let heaps = self.instance.device_local_heaps(self.physical);
            // The budget covers every user of the heap, this process's own allocations included.
            if let Some((_, Some(left))) = heaps.get(self.heap_index as usize) {
                return Ok(((*left).min(ours), self.heap_size));
            }
        }
        Ok((ours, self.heap_size))
    }

    fn max_allocation(&self) -> Option<u64> {
        Some(self.max_alloc)
    }

    fn alignment(&self) -> u64 {
        self.align
    }

    #[expect(
        clippy::cast_possible_truncation,
        reason = "usize is 64 bits (lib.rs refuses other targets)"
    )]
    fn write(&self, segment: SegmentHandle, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        match self.access(segment, offset, data.len())? {
            (Some(ptr), _) => {
                // SAFETY: bounds checked; the mapping lives while the segment does.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        data.as_ptr(),
                        ptr.0.add(offset as usize),
                        data.len(),
                    )
                };
                Ok(())
            }
            (None, Some(_)) => {
                let flight =
                    self.start_flight(segment, offset, data.len(), HostSide::From(data.as_ptr()))?;
                self.finish_staged(flight)
            }
            (None, None) => Err(DeviceError::Unsupported(
                "segment has neither mapping nor buffer".into(),
            )),
        }
    }

    #[expect(
        clippy::cast_possible_truncation,
        reason = "usize is 64 bits (lib.rs refuses other targets)"
    )]
    fn read(&self, segment: SegmentHandle, offset: u64, out: &mut [u8]) -> Result<(), DeviceError> {
        match self.access(segment, offset, out.len())? {
            (Some(ptr), _) => {
                // SAFETY: bounds checked; the mapping lives while the segment does.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        ptr.0.add(offset as usize),
                        out.as_mut_ptr(),
                        out.len(),
                    )
                };
                Ok(())
            }
            (None, Some(_)) => {
                let flight = self.start_flight(
                    segment,
                    offset,
                    out.len(),
                    HostSide::Into(out.as_mut_ptr()),
                )?;
                self.finish_staged(flight)
            }
            (None, None) => Err(DeviceError::Unsupported(
                "segment has neither mapping nor buffer".into(),
            )),
        }
    }
}
