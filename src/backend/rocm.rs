//! AMD ROCm: the amdgpu driver's sysfs files for memory, and HIP (libamdhip64), loaded at run
//! time, for allocation.
//!
//! sysfs answers without initialising a GPU runtime, which takes seconds on ROCm, so discovery
//! reads `/sys/class/drm/card*/device/mem_info_*` and only checks that HIP can be loaded.

use std::fs;
use std::path::Path;

use super::{Backend, BackendKind, DeviceInfo, DeviceType, FreeScope, Unavailable};

/// The ROCm backend.
#[derive(Debug, Clone, Copy, Default)]
pub struct RocmBackend;

/// HIP runtime names tried, in order.
pub(crate) const HIP_LIBRARIES: &[&str] =
    &["libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"];

const AMD_VENDOR: &str = "0x1002";

fn read_trimmed(path: &Path) -> Option<String> {
    fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn read_u64(path: &Path) -> Option<u64> {
    read_trimmed(path)?.parse().ok()
}

/// Lists amdgpu devices under a sysfs root (normally `/sys`), in card order.
pub fn probe_sysfs(sysfs: &Path) -> Vec<DeviceInfo> {
    let drm = sysfs.join("class/drm");
    let mut cards: Vec<(u32, std::path::PathBuf)> = fs::read_dir(&drm)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    // card0, card1, ... but not card0-DP-1 connectors.
                    let number = name.strip_prefix("card")?.parse::<u32>().ok()?;
                    Some((number, e.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    cards.sort();
    let driver_version = read_trimmed(&sysfs.join("module/amdgpu/version"));
    let mut devices = Vec::new();
    for (_, card) in cards {
        let dev = card.join("device");
        if read_trimmed(&dev.join("vendor")).as_deref() != Some(AMD_VENDOR) {
            continue;
        }
        let Some(total) = read_u64(&dev.join("mem_info_vram_total")) else {
            continue;
        };
        let device_id = read_trimmed(&dev.join("device")).unwrap_or_default();
        let name = read_trimmed(&dev.join("product_name"))
            .unwrap_or_else(|| format!("AMD GPU {device_id}"));
        let gtt_total = read_u64(&dev.join("mem_info_gtt_total")).unwrap_or(0);
        // An APU carves a small VRAM window and uses system memory through GTT.
        let integrated = total < (1 << 30) && gtt_total > total;
        let mut info = DeviceInfo::new(
            devices.len(),
            name,
            if integrated {
                DeviceType::IntegratedGpu
            } else {
                DeviceType::Gpu
            },
            total,
        );
        info.vendor = Some("AMD".into());
        info.unified_memory = integrated;
        if let Some(used) = read_u64(&dev.join("mem_info_vram_used")) {
            info.free_bytes = Some(total.saturating_sub(used));
            info.free_scope = Some(FreeScope::Device);
        }
        info.max_alloc_bytes = Some(total);
        info.driver_version = driver_version.clone().map(|v| format!("amdgpu {v}"));
        info.pci_bus_id = fs::canonicalize(&dev)
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .filter(|n| n.contains(':'));
        info.uuid = read_trimmed(&dev.join("unique_id"));
        devices.push(info);
    }
    devices
}

/// Whether the HIP runtime can be loaded (needed for allocation, not for discovery).
pub(crate) fn hip_present() -> bool {
    HIP_LIBRARIES.iter().any(|name| {
        // SAFETY: loading the HIP runtime runs its initialisers only.
        unsafe { libloading::Library::new(name) }.is_ok()
    })
}

impl Backend for RocmBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Rocm
    }

    fn probe(&self) -> Result<Vec<DeviceInfo>, Unavailable> {
        if !cfg!(target_os = "linux") {
            return Err(Unavailable::UnsupportedOs);
        }
        let devices = probe_sysfs(Path::new("/sys"));
        if !devices.is_empty() {
            return Ok(devices);
        }
        if hip_present() {
            Err(Unavailable::NoDevices)
        } else {
            Err(Unavailable::LibraryNotFound {
                tried: std::iter::once(
                    "amdgpu sysfs (/sys/class/drm/card*/device/mem_info_vram_total)".to_string(),
                )
                .chain(HIP_LIBRARIES.iter().map(|s| s.to_string()))
                .collect(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    #[test]
    fn reads_amdgpu_sysfs() {
        let root = tempfile::tempdir().unwrap();
        let card = root.path().join("class/drm/card1/device");
        write(&card.join("vendor"), "0x1002\n");
        write(&card.join("device"), "0x744c\n");
        write(&card.join("mem_info_vram_total"), "25753026560\n");
        write(&card.join("mem_info_vram_used"), "753026560\n");
        write(&card.join("mem_info_gtt_total"), "16000000000\n");
        write(&card.join("unique_id"), "a1b2c3\n");
        // A non-AMD card and a connector entry are skipped.
        write(
            &root.path().join("class/drm/card0/device/vendor"),
            "0x8086\n",
        );
        write(
            &root
                .path()
                .join("class/drm/card0/device/mem_info_vram_total"),
            "1\n",
        );
        fs::create_dir_all(root.path().join("class/drm/card1-DP-1")).unwrap();
        write(&root.path().join("module/amdgpu/version"), "6.8.5\n");

        let devices = probe_sysfs(root.path());
        assert_eq!(devices.len(), 1);
        let d = &devices[0];
        assert_eq!(d.index, 0);
        assert_eq!(d.name, "AMD GPU 0x744c");
        assert_eq!(d.total_bytes, 25_753_026_560);
        assert_eq!(d.free_bytes, Some(25_000_000_000));
        assert_eq!(d.device_type, DeviceType::Gpu);
        assert_eq!(d.uuid.as_deref(), Some("a1b2c3"));
        assert_eq!(d.driver_version.as_deref(), Some("amdgpu 6.8.5"));
    }

    #[test]
    fn empty_sysfs_has_no_devices() {
        let root = tempfile::tempdir().unwrap();
        assert!(probe_sysfs(root.path()).is_empty());
    }
}
