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
    cgroup_room(&|path| crate::input::read_system_text(std::path::Path::new(path), 1 << 20))
        .map_or(machine, |room| machine.min(room))
}

/// What this process's memory cgroup still allows: its limit less its working set (usage less
/// inactive page cache, which the kernel reclaims before the limit bites — kubelet's measure).
/// Charged page cache is not counted as used: a container that has read large files would
/// otherwise look nearly full (sysinfo's cgroup figure counts it). `None` without a limit.
fn cgroup_room(read: &dyn Fn(&str) -> Option<String>) -> Option<u64> {
    let number = |text: Option<String>| text.and_then(|t| t.trim().parse::<u64>().ok());
    let stat = |path: &str, key: &str| {
        read(path).and_then(|t| {
            t.lines().find_map(|l| {
                let (k, v) = l.split_once(' ')?;
                (k == key).then(|| v.trim().parse::<u64>().ok()).flatten()
            })
        })
    };
    // cgroup v2, then v1; a v1 "unlimited" limit is a huge page-aligned number.
    let (limit, usage, inactive) = if let Some(max) = read("/sys/fs/cgroup/memory.max") {
        (
            number(Some(max))?,
            number(read("/sys/fs/cgroup/memory.current"))?,
            stat("/sys/fs/cgroup/memory.stat", "inactive_file").unwrap_or(0),
        )
    } else {
        (
            number(read("/sys/fs/cgroup/memory/memory.limit_in_bytes"))?,
            number(read("/sys/fs/cgroup/memory/memory.usage_in_bytes"))?,
            stat("/sys/fs/cgroup/memory/memory.stat", "total_inactive_file").unwrap_or(0),
        )
    };
    if limit >= 1 << 60 {
        return None;
    }
    Some(limit.saturating_sub(usage.saturating_sub(inactive)))
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

#[cfg(test)]
mod cgroup_tests {
    use super::cgroup_room;

    fn files<'a>(entries: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |path| {
            entries
                .iter()
                .find(|(p, _)| *p == path)
                .map(|(_, t)| t.to_string())
        }
    }

    #[test]
    fn page_cache_is_not_counted_as_used() {
        // v1, 8 GiB limit, 7 GiB charged of which 5 GiB is inactive page cache: 6 GiB left.
        let v1 = files(&[
            (
                "/sys/fs/cgroup/memory/memory.limit_in_bytes",
                "8589934592\n",
            ),
            (
                "/sys/fs/cgroup/memory/memory.usage_in_bytes",
                "7516192768\n",
            ),
            (
                "/sys/fs/cgroup/memory/memory.stat",
                "cache 1\ninactive_file 2\ntotal_inactive_file 5368709120\n",
            ),
        ]);
        assert_eq!(cgroup_room(&v1), Some(6 << 30));
        // v2 with the same figures.
        let v2 = files(&[
            ("/sys/fs/cgroup/memory.max", "8589934592\n"),
            ("/sys/fs/cgroup/memory.current", "7516192768\n"),
            (
                "/sys/fs/cgroup/memory.stat",
                "anon 1\ninactive_file 5368709120\n",
            ),
        ]);
        assert_eq!(cgroup_room(&v2), Some(6 << 30));
    }

    #[test]
    fn no_limit_means_the_machine_decides() {
        let v2 = files(&[
            ("/sys/fs/cgroup/memory.max", "max\n"),
            ("/sys/fs/cgroup/memory.current", "1\n"),
        ]);
        assert_eq!(cgroup_room(&v2), None);
        let v1 = files(&[
            (
                "/sys/fs/cgroup/memory/memory.limit_in_bytes",
                "9223372036854771712\n",
            ),
            (
                "/sys/fs/cgroup/memory/memory.usage_in_bytes",
                "23973134336\n",
            ),
        ]);
        assert_eq!(cgroup_room(&v1), None);
        assert_eq!(cgroup_room(&files(&[])), None);
    }
}
