//! GPUs a plan can be made for without one at hand (`--device sim:h100`): each with the total
//! memory its driver reports, the figure engines budget from (an "80 GB" H100 is 81,559 MiB, not
//! 80 GB or 80 GiB), and where that figure was read.

/// Whose GPU it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuVendor {
    /// NVIDIA: driven by CUDA.
    Nvidia,
    /// AMD: driven by ROCm.
    Amd,
}

/// A GPU model and the total memory its driver reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownGpu {
    /// The names `sim:NAME` takes, the first the one reports use.
    pub names: &'static [&'static str],
    /// The product name as the driver reports it (`nvidia-smi --query-gpu=name`).
    pub product: &'static str,
    /// Whose GPU it is, which says the backend that drives it.
    pub vendor: GpuVendor,
    /// Total memory in bytes, as the driver reports it.
    pub total_bytes: u64,
    /// Where the total was read: a public log of the driver's own report.
    pub source: &'static str,
}

const MIB: u64 = 1 << 20;

const fn nvidia(
    names: &'static [&'static str],
    product: &'static str,
    total_mib: u64,
    source: &'static str,
) -> KnownGpu {
    KnownGpu {
        names,
        product,
        vendor: GpuVendor::Nvidia,
        total_bytes: total_mib * MIB,
        source,
    }
}

/// Every GPU `sim:NAME` knows, by `nvidia-smi`'s `memory.total` (MiB) or ROCm's own figure.
pub const KNOWN_GPUS: &[KnownGpu] = &[
    nvidia(
        &["h100", "h100-80gb", "h100-sxm"],
        "NVIDIA H100 80GB HBM3",
        81_559,
        "nvidia-smi in NVIDIA/nccl#1264 (driver 550.54.15) and modal-labs/modal-client#2797",
    ),
    nvidia(
        &["h200", "h200-141gb"],
        "NVIDIA H200",
        143_771,
        "nvidia-smi of an 8 x H200 host (driver 570.158.01), public logs",
    ),
    nvidia(
        &["a100-80gb", "a100"],
        "NVIDIA A100-SXM4-80GB",
        81_920,
        "nvidia-smi, modal-labs/modal-client#2797",
    ),
    nvidia(
        &["a100-40gb"],
        "NVIDIA A100-SXM4-40GB",
        40_960,
        "nvidia-smi, modal-labs/modal-client#2797",
    ),
    nvidia(
        &["l40s"],
        "NVIDIA L40S",
        46_068,
        "nvidia-smi, modal-labs/modal-client#2797",
    ),
    nvidia(
        &["l4"],
        "NVIDIA L4",
        23_034,
        "nvidia-smi, modal-labs/modal-client#2797",
    ),
    nvidia(
        &["a10"],
        "NVIDIA A10",
        23_028,
        "nvidia-smi, modal-labs/modal-client#2797",
    ),
    nvidia(
        &["t4"],
        "Tesla T4",
        15_360,
        "nvidia-smi, modal-labs/modal-client#2797",
    ),
    nvidia(
        &["rtx5090"],
        "NVIDIA GeForce RTX 5090",
        32_607,
        "nvidia-smi in noonghunna/club-3090#1261 (driver 610.57.04)",
    ),
    nvidia(
        &["rtx4090"],
        "NVIDIA GeForce RTX 4090",
        24_564,
        "nvidia-smi in RLinf/RLinf#255 (driver 550.163.01)",
    ),
    nvidia(
        &["rtx3090"],
        "NVIDIA GeForce RTX 3090",
        24_576,
        "nvidia-smi in noonghunna/club-3090#1128 (driver 595.84)",
    ),
    KnownGpu {
        names: &["mi300x"],
        product: "AMD Instinct MI300X",
        vendor: GpuVendor::Amd,
        // rocminfo's GPU pool, 201,310,208 KiB (eight CPX partitions of 25,767,706,624 B).
        total_bytes: 201_310_208 << 10,
        source: "rocminfo in ROCm/legacy-rocm-build#4414 and #4750",
    },
];

/// The GPU `name` names (case-insensitive), if it is one of [`KNOWN_GPUS`].
pub fn known_gpu(name: &str) -> Option<&'static KnownGpu> {
    let name = name.trim().to_ascii_lowercase();
    KNOWN_GPUS.iter().find(|g| g.names.contains(&name.as_str()))
}

/// Every name `sim:NAME` takes, for messages and help.
pub fn known_gpu_names() -> impl Iterator<Item = &'static str> {
    KNOWN_GPUS.iter().flat_map(|g| g.names.iter().copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_name_is_one_gpu_and_totals_are_the_drivers() {
        let mut names: Vec<&str> = known_gpu_names().collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "a name listed twice");
        assert_eq!(known_gpu("H100").unwrap().total_bytes, 81_559 << 20);
        assert_eq!(known_gpu("rtx4090").unwrap().total_bytes, 24_564 << 20);
        assert_eq!(known_gpu("mi300x").unwrap().total_bytes, 8 * 25_767_706_624);
        assert!(known_gpu("h800").is_none());
    }
}
