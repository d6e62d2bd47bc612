//! Vulkan through the loader (libvulkan.so.1), loaded at run time by ash.
//!
//! Total memory is the sum of device-local heaps. Free memory comes from `VK_EXT_memory_budget`
//! when the driver has it, and is this process's budget, not the device's.

use std::ffi::CStr;
use std::sync::Mutex;

use ash::vk;

use crate::device::{
    check_bounds, AsyncCopies, Budget, DeviceError, DeviceMemory, Flights, HostSide, PendingCopy,
    Segment, SegmentHandle, SegmentTable, VulkanLimits,
};

use super::{Backend, BackendKind, DeviceInfo, DeviceType, FreeScope, Unavailable};

mod copies;
mod memory;

pub use memory::{VulkanMemory, VulkanOptions};

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

/// The buffer limits llama.cpp's Vulkan backend reads: the core limits, the largest
/// allocation (maintenance 3) and, where maintenance 4 is there, the largest buffer.
fn limits(
    vk_instance: &VulkanInstance,
    device: vk::PhysicalDevice,
    properties: &vk::PhysicalDeviceProperties,
    maint3: &vk::PhysicalDeviceMaintenance3Properties,
) -> VulkanLimits {
    let max_buffer = if properties.api_version >= vk::API_VERSION_1_3
        || vk_instance.has_extension(device, ash::khr::maintenance4::NAME)
    {
        let mut maint4 = vk::PhysicalDeviceMaintenance4Properties::default();
        let mut props2 = vk::PhysicalDeviceProperties2::default().push_next(&mut maint4);
        // SAFETY: `device` came from this instance, which supports maintenance 4 (core in 1.3
        // or the extension).
        unsafe {
            vk_instance
                .instance
                .get_physical_device_properties2(device, &mut props2);
        }
        maint4.max_buffer_size
    } else {
        maint3.max_memory_allocation_size
    };
    let limits = &properties.limits;
    VulkanLimits {
        offset_alignment: limits.min_storage_buffer_offset_alignment,
        map_alignment: u64::try_from(limits.min_memory_map_alignment).unwrap_or(1),
        storage_range: (!vk_instance.has_extension(device, SHADER_64BIT_INDEXING))
            .then_some(u64::from(limits.max_storage_buffer_range)),
        max_allocation: maint3.max_memory_allocation_size,
        max_buffer,
    }
}

/// The extension that lifts `maxStorageBufferRange` for ggml-vulkan's shaders (newer than the
/// headers ash carries).
const SHADER_64BIT_INDEXING: &CStr = c"VK_EXT_shader_64bit_indexing";

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
    info.vulkan_limits = Some(limits(vk_instance, device, &properties, &maint3));
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
