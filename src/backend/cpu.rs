//! System RAM via sysinfo (Linux, macOS, Windows).

use sysinfo::{CpuRefreshKind, MemoryRefreshKind, RefreshKind, System};

use super::{Backend, BackendKind, DeviceInfo, DeviceType, FreeScope, Unavailable};

/// The CPU backend: one device, the machine's RAM.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuBackend;

fn system() -> System {
    System::new_with_specifics(
        RefreshKind::nothing()
            .with_memory(MemoryRefreshKind::nothing().with_ram())
            .with_cpu(CpuRefreshKind::nothing()),
    )
}

/// The CPU's model name, e.g. "AMD EPYC 7B13"; `None` when the OS does not say.
pub fn get_cpu_name() -> Option<String> {
    let sys = system();
    sys.cpus()
        .first()
        .map(|c| c.brand().trim().to_string())
        .filter(|b| !b.is_empty())
}

/// Total RAM in bytes.
pub fn get_system_memory() -> u64 {
    system().total_memory()
}

/// RAM available to new allocations in bytes: Linux's MemAvailable, capped by what this
/// process's memory cgroup still allows (a container's limit is what its OOM killer enforces).
pub fn get_available_memory() -> u64 {
    available(&system())
}

fn available(sys: &System) -> u64 {
    let machine = sys.available_memory();
    sys.cgroup_limits()
        .map_or(machine, |limits| machine.min(limits.free_memory))
}

/// The machine a report was made on.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HostInfo {
    /// Host name, when the OS gives one.
    pub hostname: Option<String>,
    /// Operating system and version.
    pub os: Option<String>,
    /// CPU model string, e.g. "AMD EPYC 7763".
    pub cpu: Option<String>,
    /// Logical CPUs (hardware threads).
    pub cpus: usize,
    /// Physical RAM in bytes.
    pub memory_total_bytes: u64,
    /// RAM available to new allocations.
    pub memory_available_bytes: u64,
    /// The gpumem version that made the report.
    pub gpumem_version: String,
}

/// This machine's name, OS, CPU and memory, as reports record them.
pub fn host_info() -> HostInfo {
    let sys = system();
    HostInfo {
        hostname: System::host_name(),
        os: System::long_os_version(),
        cpu: sys
            .cpus()
            .first()
            .map(|c| c.brand().trim().to_string())
            .filter(|b| !b.is_empty()),
        cpus: sys.cpus().len(),
        memory_total_bytes: sys.total_memory(),
        memory_available_bytes: available(&sys),
        gpumem_version: env!("CARGO_PKG_VERSION").to_string(),
    }
}

impl Backend for CpuBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cpu
    }

    fn probe(&self) -> Result<Vec<DeviceInfo>, Unavailable> {
        let sys = system();
        let total = sys.total_memory();
        if total == 0 {
            return Err(Unavailable::Failed("the OS reported no memory".into()));
        }
        let name = sys
            .cpus()
            .first()
            .map(|c| c.brand().trim().to_string())
            .filter(|b| !b.is_empty())
            .unwrap_or_else(System::cpu_arch);
        let mut device = DeviceInfo::new(0, name, DeviceType::Cpu, total);
        device.vendor = sys
            .cpus()
            .first()
            .map(|c| c.vendor_id().to_string())
            .filter(|v| !v.is_empty());
        device.free_bytes = Some(available(&sys));
        device.free_scope = Some(FreeScope::Device);
        device.max_alloc_bytes = Some(total);
        device.unified_memory = true;
        device.compute_capability = Some(format!("{} × {}", sys.cpus().len(), System::cpu_arch()));
        device.driver_version =
            System::kernel_version().map(|k| format!("{} {k}", std::env::consts::OS));
        Ok(vec![device])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn total_matches_proc_meminfo() {
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
        let kib: u64 = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap();
        let devices = CpuBackend.probe().unwrap();
        assert_eq!(devices.len(), 1);
        assert_eq!(devices[0].total_bytes, kib * 1024);
        assert!(devices[0].free_bytes.unwrap() <= devices[0].total_bytes);
    }
}
