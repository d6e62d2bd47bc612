//! Vulkan through the loader (libvulkan.so.1), loaded at run time by ash.
//!
//! Total memory is the sum of device-local heaps. Free memory comes from `VK_EXT_memory_budget`
//! when the driver has it, and is this process's budget, not the device's.

use std::ffi::CStr;
use std::sync::Mutex;

use ash::vk;

use crate::device::{
    check_bounds, AsyncCopies, Budget, DeviceError, DeviceMemory, Flights, HostSide, PendingCopy,
    Segment, SegmentHandle, SegmentTable,
};

use super::{Backend, BackendKind, DeviceInfo, DeviceType, FreeScope, Unavailable};

/// Any Vulkan device through the loader (`libvulkan`), loaded at run time.
#[derive(Debug, Clone, Copy, Default)]
pub struct VulkanBackend;

fn loader_names() -> Vec<String> {
    if cfg!(target_os = "windows") {
        vec!["vulkan-1.dll".into()]
    } else if cfg!(target_os = "macos") {
        vec![
            "libvulkan.dylib".into(),
            "libvulkan.1.dylib".into(),
            "libMoltenVK.dylib".into(),
        ]
    } else {
        vec!["libvulkan.so.1".into(), "libvulkan.so".into()]
    }
}

/// A loaded Vulkan instance that is destroyed when dropped.
pub(crate) struct VulkanInstance {
    /// Keeps the loader library mapped for as long as the instance lives.
    _entry: ash::Entry,
    pub(crate) instance: ash::Instance,
}

impl VulkanInstance {
    /// Loads the loader and creates a Vulkan 1.1 instance (1.1 for properties2 and budgets).
    pub(crate) fn new() -> Result<Self, Unavailable> {
        // SAFETY: loading the system Vulkan loader runs its initialisers; this is the documented
        // way to use ash with run-time loading.
        super::isolate::step("loading libvulkan");
        let entry = unsafe { ash::Entry::load() }
            .map_err(|_| super::library_unavailable(loader_names()))?;
        let version = unsafe { entry.try_enumerate_instance_version() }
            .ok()
            .flatten()
            .unwrap_or(vk::API_VERSION_1_0);
        if version < vk::API_VERSION_1_1 {
            return Err(Unavailable::DriverNotLoaded(format!(
                "the Vulkan loader supports only {}, 1.1 is needed",
                format_version(version)
            )));
        }
        let app = vk::ApplicationInfo::default()
            .application_name(c"gpumem")
            .api_version(vk::API_VERSION_1_1);
        let create = vk::InstanceCreateInfo::default().application_info(&app);
        super::isolate::step("vkCreateInstance");
        // SAFETY: `create` and `app` outlive the call; no allocator callbacks are used.
        let instance = unsafe { entry.create_instance(&create, None) }.map_err(|e| match e {
            vk::Result::ERROR_INCOMPATIBLE_DRIVER => Unavailable::DriverNotLoaded(
                "no Vulkan driver (ICD) installed, e.g. mesa-vulkan-drivers".into(),
            ),
            other => Unavailable::DriverNotLoaded(format!("vkCreateInstance failed: {other}")),
        })?;
        Ok(VulkanInstance {
            _entry: entry,
            instance,
        })
    }

    /// The physical devices, in the loader's order; the index is this order.
    pub(crate) fn physical_devices(&self) -> Result<Vec<vk::PhysicalDevice>, Unavailable> {
        // SAFETY: the instance is alive for the duration of the call.
        unsafe { self.instance.enumerate_physical_devices() }
            .map_err(|e| Unavailable::Failed(format!("vkEnumeratePhysicalDevices: {e}")))
    }

    /// Whether the device supports a device extension.
    pub(crate) fn has_extension(&self, device: vk::PhysicalDevice, name: &CStr) -> bool {
        // SAFETY: `device` came from this instance.
        unsafe { self.instance.enumerate_device_extension_properties(device) }
            .unwrap_or_default()
            .iter()
            .any(|e| e.extension_name_as_c_str().is_ok_and(|n| n == name))
    }

    /// Device-local heaps as (size, budget-left) pairs; budget-left is `None` without
    /// `VK_EXT_memory_budget`.
    pub(crate) fn device_local_heaps(&self, device: vk::PhysicalDevice) -> Vec<(u64, Option<u64>)> {
        let budget_ext = self.has_extension(device, ash::ext::memory_budget::NAME);
        let mut budget = vk::PhysicalDeviceMemoryBudgetPropertiesEXT::default();
        let mut props = vk::PhysicalDeviceMemoryProperties2::default();
        if budget_ext {
            props = props.push_next(&mut budget);
        }
        // SAFETY: `device` came from this instance; the chain holds structs that live here.
        unsafe {
            self.instance
                .get_physical_device_memory_properties2(device, &mut props)
        };
        let memory = props.memory_properties;
        let count = (memory.memory_heap_count as usize).min(vk::MAX_MEMORY_HEAPS);
        (0..count)
            .filter(|&i| {
                memory.memory_heaps[i]
                    .flags
                    .contains(vk::MemoryHeapFlags::DEVICE_LOCAL)
            })
            .map(|i| {
                let left =
                    budget_ext.then(|| budget.heap_budget[i].saturating_sub(budget.heap_usage[i]));
                (memory.memory_heaps[i].size, left)
            })
            .collect()
    }
}

impl Drop for VulkanInstance {
    fn drop(&mut self) {
        // SAFETY: nothing created from this instance outlives it.
        unsafe { self.instance.destroy_instance(None) };
    }
}

fn format_version(v: u32) -> String {
    format!(
        "{}.{}.{}",
        vk::api_version_major(v),
        vk::api_version_minor(v),
        vk::api_version_patch(v)
    )
}

fn vendor_name(id: u32) -> Option<&'static str> {
    Some(match id {
        0x10DE => "NVIDIA",
        0x1002 => "AMD",
        0x8086 => "Intel",
        0x13B5 => "ARM",
        0x5143 => "Qualcomm",
        0x106B => "Apple",
        0x1010 => "Imagination",
        0x10005 => "Mesa",
        _ => return None,
    })
}

fn describe(vk_instance: &VulkanInstance, index: usize, device: vk::PhysicalDevice) -> DeviceInfo {
    let instance = &vk_instance.instance;
    // SAFETY: `device` came from this instance.
    let api_version = unsafe { instance.get_physical_device_properties(device) }.api_version;
    let pci_ext = vk_instance.has_extension(device, ash::ext::pci_bus_info::NAME);
    let mut id = vk::PhysicalDeviceIDProperties::default();
    let mut maint3 = vk::PhysicalDeviceMaintenance3Properties::default();
    let mut driver = vk::PhysicalDeviceDriverProperties::default();
    let mut pci = vk::PhysicalDevicePCIBusInfoPropertiesEXT::default();
    let properties = {
        let mut props2 = vk::PhysicalDeviceProperties2::default()
            .push_next(&mut id)
            .push_next(&mut maint3);
        if api_version >= vk::API_VERSION_1_2 {
            props2 = props2.push_next(&mut driver);
        }
        if pci_ext {
            props2 = props2.push_next(&mut pci);
        }
        // SAFETY: every struct in the chain is valid for this device's API version/extensions.
        unsafe { instance.get_physical_device_properties2(device, &mut props2) };
        props2.properties
    };
    let name = properties
        .device_name_as_c_str()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let device_type = match properties.device_type {
        vk::PhysicalDeviceType::DISCRETE_GPU => DeviceType::Gpu,
        vk::PhysicalDeviceType::INTEGRATED_GPU => DeviceType::IntegratedGpu,
        vk::PhysicalDeviceType::CPU => DeviceType::Cpu,
        _ => DeviceType::Other,
    };
    let heaps = vk_instance.device_local_heaps(device);
    let total: u64 = heaps.iter().map(|(size, _)| size).sum();
    let mut info = DeviceInfo::new(index, name, device_type, total);
    info.vendor = vendor_name(properties.vendor_id)
        .map(str::to_string)
        .or_else(|| Some(format!("0x{:04x}", properties.vendor_id)));
    if heaps.iter().all(|(_, left)| left.is_some()) && !heaps.is_empty() {
        info.free_bytes = Some(heaps.iter().filter_map(|(_, left)| *left).sum());
        info.free_scope = Some(FreeScope::Process);
    }
    info.max_alloc_bytes = Some(maint3.max_memory_allocation_size);
    info.unified_memory = matches!(device_type, DeviceType::IntegratedGpu | DeviceType::Cpu);
    if info.unified_memory {
        let free = info.free_bytes.unwrap_or(total);
        info.free_bytes = Some(super::host_shared_free(true, free));
        info.free_scope.get_or_insert(FreeScope::Device);
    }
    info.compute_capability = Some(format!("Vulkan {}", format_version(properties.api_version)));
    info.driver_version = if api_version >= vk::API_VERSION_1_2 {
        let name = driver
            .driver_name_as_c_str()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = driver
            .driver_info_as_c_str()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        Some(format!("{name} {text}").trim().to_string())
    } else {
        Some(format!("0x{:08x}", properties.driver_version))
    };
    if pci_ext {
        info.pci_bus_id = Some(format!(
            "{:04x}:{:02x}:{:02x}.{}",
            pci.pci_domain, pci.pci_bus, pci.pci_device, pci.pci_function
        ));
    }
    if id.device_uuid.iter().any(|&b| b != 0) {
        let hex: String = id.device_uuid.iter().map(|b| format!("{b:02x}")).collect();
        info.uuid = Some(format!(
            "{}-{}-{}-{}-{}",
            &hex[0..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..]
        ));
    }
    info
}

impl Backend for VulkanBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Vulkan
    }

    fn probe(&self) -> Result<Vec<DeviceInfo>, Unavailable> {
        let instance = VulkanInstance::new()?;
        let devices = instance.physical_devices()?;
        Ok(devices
            .into_iter()
            .enumerate()
            .map(|(i, d)| describe(&instance, i, d))
            .collect())
    }
}

/// One `vkAllocateMemory` allocation: a device-local segment the pool carves.
struct VkSegment {
    memory: vk::DeviceMemory,
    size: u64,
    /// Persistent mapping when the memory type is host-visible.
    mapped: Option<MappedPtr>,
    /// A buffer over the whole allocation, for staging copies when it is not host-visible.
    buffer: Option<vk::Buffer>,
}

/// A staged copy in flight: its commands, its mapped staging buffer and, for a read, where the
/// bytes go once it is done.
struct VkFlight {
    cmd: vk::CommandBuffer,
    fence: vk::Fence,
    staging: vk::Buffer,
    memory: vk::DeviceMemory,
    mapped: *mut u8,
    len: usize,
    read_into: Option<*mut u8>,
}

// SAFETY: Vulkan handles are plain identifiers; the pointers are a mapping this device owns and
// the caller's buffer it promised to keep (AsyncCopies' contract), used under `flights`' lock.
unsafe impl Send for VkFlight {}

/// A pointer into a persistent mapping.
#[derive(Clone, Copy)]
struct MappedPtr(*mut u8);

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
    name: String,
    heap_index: u32,
    heap_size: u64,
    budget_ext: bool,
    memory_type: u32,
    staging_type: Option<u32>,
    max_alloc: u64,
    align: u64,
    budget: Budget,
    /// The heap is host RAM (lavapipe, integrated GPUs).
    host_shared: bool,
    segments: SegmentTable<VkSegment>,
    transfer: Mutex<(vk::Queue, vk::CommandPool)>,
    /// Staged copies submitted and not yet waited for, by id.
    flights: Flights<VkFlight>,
    physical: vk::PhysicalDevice,
    device: ash::Device,
    // Destroyed last (see Drop): everything above was made from it.
    instance: VulkanInstance,
}

fn vk_err(call: &str, e: vk::Result) -> DeviceError {
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

    fn free_segment(&self, seg: VkSegment) {
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
    fn buffer_with_memory(
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
    fn finish_copy_commands(
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
    fn start_copy_commands(
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

    fn access(
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

impl VulkanMemory {
    /// Starts a staged copy and keeps it for [`AsyncCopies::wait`].
    fn start_staged(
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
    fn start_flight(
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
    fn finish_staged(&self, flight: VkFlight) -> Result<(), DeviceError> {
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
        let ours = super::host_shared_free(self.host_shared, self.budget.left().unwrap_or(0));
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
