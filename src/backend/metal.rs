//! Apple Metal (macOS only). Elsewhere it is reported as not supported on this OS.

use super::{Backend, BackendKind, DeviceInfo, Unavailable};

/// Apple's Metal API (macOS only; elsewhere it reports itself unavailable).
#[derive(Debug, Clone, Copy, Default)]
pub struct MetalBackend;

impl Backend for MetalBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Metal
    }

    #[cfg(not(target_os = "macos"))]
    fn probe(&self) -> Result<Vec<DeviceInfo>, Unavailable> {
        Err(Unavailable::UnsupportedOs)
    }

    #[cfg(target_os = "macos")]
    fn probe(&self) -> Result<Vec<DeviceInfo>, Unavailable> {
        use super::{DeviceType, FreeScope};

        let devices = metal::Device::all();
        Ok(devices
            .iter()
            .enumerate()
            .map(|(index, device)| {
                // The working set is what Metal lets this process keep resident; on Apple
                // silicon it is the practical GPU memory limit (about 70-75 % of RAM).
                let total = device.recommended_max_working_set_size();
                let unified = device.has_unified_memory();
                let mut info = DeviceInfo::new(
                    index,
                    device.name(),
                    if unified {
                        DeviceType::IntegratedGpu
                    } else {
                        DeviceType::Gpu
                    },
                    total,
                );
                info.vendor = Some(if unified {
                    "Apple".into()
                } else {
                    "unknown".into()
                });
                info.free_bytes = Some(total.saturating_sub(device.current_allocated_size()));
                info.free_scope = Some(FreeScope::Process);
                info.max_alloc_bytes = Some(device.max_buffer_length());
                info.unified_memory = unified;
                info.uuid = Some(format!("{:016x}", device.registry_id()));
                info
            })
            .collect())
    }
}
