//! Backend names and device specifications as typed on the command line.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::units::{parse_bytes, ParseUnitError};

/// A memory API gpumem can probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum BackendKind {
    /// System RAM, via sysinfo.
    Cpu,
    /// NVIDIA CUDA driver API (libcuda), loaded at run time.
    Cuda,
    /// NVIDIA Management Library (libnvidia-ml), loaded at run time.
    Nvml,
    /// AMD ROCm: amdgpu sysfs and HIP (libamdhip64), loaded at run time.
    Rocm,
    /// Apple Metal (macOS only).
    Metal,
    /// OpenCL through the ICD loader (libOpenCL), loaded at run time.
    Opencl,
    /// Vulkan through the loader (libvulkan), loaded at run time.
    Vulkan,
}

impl BackendKind {
    /// Every backend, in the order they are listed.
    pub const ALL: [BackendKind; 7] = [
        BackendKind::Cpu,
        BackendKind::Cuda,
        BackendKind::Nvml,
        BackendKind::Rocm,
        BackendKind::Metal,
        BackendKind::Opencl,
        BackendKind::Vulkan,
    ];

    /// The lowercase name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::Cuda => "cuda",
            BackendKind::Nvml => "nvml",
            BackendKind::Rocm => "rocm",
            BackendKind::Metal => "metal",
            BackendKind::Opencl => "opencl",
            BackendKind::Vulkan => "vulkan",
        }
    }

    /// Whether probing it loads a vendor driver into the process (which may crash or hang, so
    /// the binary probes it in a child process).
    pub fn loads_a_driver(self) -> bool {
        match self {
            BackendKind::Cpu => false,
            BackendKind::Metal => cfg!(target_os = "macos"),
            BackendKind::Cuda
            | BackendKind::Nvml
            | BackendKind::Rocm
            | BackendKind::Opencl
            | BackendKind::Vulkan => true,
        }
    }

    /// Whether this backend is a GPU (or accelerator) API rather than system memory.
    pub fn is_gpu(self) -> bool {
        self != BackendKind::Cpu
    }

    /// Which API to plan a GPU on when several reach it, lowest first: the vendor's own
    /// (engines run on CUDA, ROCm or Metal), then Vulkan, then OpenCL; NVML only monitors.
    pub fn driver_preference(self) -> u8 {
        match self {
            BackendKind::Cuda | BackendKind::Rocm | BackendKind::Metal => 0,
            BackendKind::Vulkan => 1,
            BackendKind::Opencl => 2,
            BackendKind::Nvml | BackendKind::Cpu => 3,
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for BackendKind {
    type Err = ParseDeviceSpecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.trim().to_ascii_lowercase();
        BackendKind::ALL
            .into_iter()
            .find(|kind| kind.name() == lower)
            .ok_or_else(|| ParseDeviceSpecError::UnknownBackend(s.to_string()))
    }
}

/// Where a command should run: a real device of a backend, host memory, or a simulated card.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum DeviceSpec {
    /// Real memory from the operating system, optionally capped at `capacity` bytes.
    Host {
        /// Cap on what the pool may reserve; `None` means system RAM.
        capacity: Option<u64>,
    },
    /// A capacity-only address space that reserves nothing (results are simulated).
    Sim {
        /// Simulated device capacity in bytes.
        capacity: u64,
        /// The GPU it stands for when named (`sim:h100`), by its first name in
        /// [`super::KNOWN_GPUS`]; its capacity is then that GPU's.
        #[serde(skip_serializing_if = "Option::is_none")]
        gpu: Option<&'static str>,
    },
    /// Device `index` of a GPU backend, e.g. `opencl:0`.
    Device {
        /// The backend.
        backend: BackendKind,
        /// Device index within that backend.
        index: usize,
    },
}

impl DeviceSpec {
    /// `(backend, index)` as reports name the device: `host`/`sim` with index 0, else the
    /// backend's name and the device's index.
    pub fn identity(&self) -> (&'static str, usize) {
        match self {
            DeviceSpec::Host { .. } => ("host", 0),
            DeviceSpec::Sim { .. } => ("sim", 0),
            DeviceSpec::Device { backend, index } => (backend.name(), *index),
        }
    }

    /// Whether the spec states its own capacity (`host:SIZE`, `sim:SIZE`): then that capacity
    /// is the whole budget, and no fraction or headroom is taken off it.
    pub fn has_stated_capacity(&self) -> bool {
        matches!(
            self,
            DeviceSpec::Host { capacity: Some(_) } | DeviceSpec::Sim { .. }
        )
    }
}

/// Why a device specification was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseDeviceSpecError {
    /// Not one of the backends gpumem knows.
    #[error("unknown backend '{}'{}; expected one of cpu, cuda, nvml, rocm, metal, opencl, vulkan", .0, crate::spelling::closest(.0, BackendKind::ALL.iter().map(|k| k.name())).map(|s| format!(" (did you mean '{s}'?)")).unwrap_or_default())]
    UnknownBackend(String),
    /// The text does not look like a device.
    #[error(
        "'{0}' is not a device; expected host, host:SIZE, sim:SIZE or BACKEND:INDEX \
         (e.g. host:2GiB, sim:80GiB, opencl:0)"
    )]
    Malformed(String),
    /// The size part did not parse.
    #[error("bad capacity in '{input}': {source}")]
    Capacity {
        /// The whole input.
        input: String,
        /// Why the size was rejected.
        source: ParseUnitError,
    },
    /// A capacity of zero cannot hold anything.
    #[error("capacity in '{0}' must be greater than zero")]
    ZeroCapacity(String),
    /// A bare number: bytes, which a capacity almost never means.
    #[error(
        "'{0}' has no unit; write it as {1}GiB (binary: 2^30 bytes) or {1}GB (decimal: 10^9 \
         bytes), or name a GPU (sim:h100, sim:rtx4090, ...)"
    )]
    NoUnit(String, String),
    /// A name that is not one of the GPUs `sim:NAME` knows.
    #[error("unknown GPU '{}' in '{}'{}; known: {}", .name, .input, crate::spelling::closest(.name, super::gpus::known_gpu_names()).map(|s| format!(" (did you mean 'sim:{s}'?)")).unwrap_or_default(), super::gpus::known_gpu_names().collect::<Vec<_>>().join(", "))]
    UnknownGpu {
        /// The whole input.
        input: String,
        /// The name as typed.
        name: String,
    },
}

impl FromStr for DeviceSpec {
    type Err = ParseDeviceSpecError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let text = input.trim();
        let (head, tail) = match text.split_once(':') {
            Some((h, t)) => (h.to_ascii_lowercase(), Some(t)),
            None => (text.to_ascii_lowercase(), None),
        };
        let capacity = |t: &str| -> Result<u64, ParseDeviceSpecError> {
            let t = t.trim();
            let bytes = parse_bytes(t).map_err(|source| ParseDeviceSpecError::Capacity {
                input: input.to_string(),
                source,
            })?;
            if bytes == 0 {
                return Err(ParseDeviceSpecError::ZeroCapacity(input.to_string()));
            }
            if t.chars().all(|c| c.is_ascii_digit() || c == '.') {
                return Err(ParseDeviceSpecError::NoUnit(
                    input.to_string(),
                    format!("{head}:{t}"),
                ));
            }
            Ok(bytes)
        };
        match (head.as_str(), tail) {
            ("host", None) => Ok(DeviceSpec::Host { capacity: None }),
            ("host", Some(t)) => Ok(DeviceSpec::Host {
                capacity: Some(capacity(t)?),
            }),
            ("sim", Some(t)) => match super::gpus::known_gpu(t) {
                Some(gpu) => Ok(DeviceSpec::Sim {
                    capacity: gpu.total_bytes,
                    gpu: Some(gpu.names[0]),
                }),
                None if t.trim().starts_with(|c: char| c.is_ascii_alphabetic()) => {
                    Err(ParseDeviceSpecError::UnknownGpu {
                        input: input.to_string(),
                        name: t.trim().to_string(),
                    })
                }
                None => Ok(DeviceSpec::Sim {
                    capacity: capacity(t)?,
                    gpu: None,
                }),
            },
            ("sim", None) | ("", _) => Err(ParseDeviceSpecError::Malformed(input.to_string())),
            (name, index) => {
                let backend: BackendKind = name.parse()?;
                let index = match index {
                    None => 0,
                    Some(i) => i
                        .trim()
                        .parse()
                        .map_err(|_| ParseDeviceSpecError::Malformed(input.to_string()))?,
                };
                Ok(DeviceSpec::Device { backend, index })
            }
        }
    }
}

/// A byte count in the largest binary unit that divides it exactly, so that it parses back.
fn exact_size(bytes: u64) -> String {
    for (shift, unit) in [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes >= 1 << shift && bytes % (1 << shift) == 0 {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSpec::Host { capacity: None } => f.write_str("host"),
            DeviceSpec::Host { capacity: Some(c) } => write!(f, "host:{}", exact_size(*c)),
            DeviceSpec::Sim {
                gpu: Some(name), ..
            } => write!(f, "sim:{name}"),
            DeviceSpec::Sim { capacity, .. } => write!(f, "sim:{}", exact_size(*capacity)),
            DeviceSpec::Device { backend, index } => write!(f, "{backend}:{index}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_capacity_needs_a_unit_and_a_gpu_may_be_named() {
        let no_unit = "sim:24".parse::<DeviceSpec>().unwrap_err();
        assert_eq!(
            no_unit.to_string(),
            "'sim:24' has no unit; write it as sim:24GiB (binary: 2^30 bytes) or sim:24GB \
             (decimal: 10^9 bytes), or name a GPU (sim:h100, sim:rtx4090, ...)"
        );
        assert!(matches!(
            "host:4096".parse::<DeviceSpec>(),
            Err(ParseDeviceSpecError::NoUnit(..))
        ));
        // GB is decimal, GiB binary.
        assert_eq!(
            "sim:80GB".parse(),
            Ok(DeviceSpec::Sim {
                capacity: 80_000_000_000,
                gpu: None
            })
        );
        let h100: DeviceSpec = "sim:H100".parse().unwrap();
        assert_eq!(
            h100,
            DeviceSpec::Sim {
                capacity: 81_559 << 20,
                gpu: Some("h100")
            }
        );
        assert_eq!(h100.to_string(), "sim:h100");
        assert_eq!(h100.to_string().parse(), Ok(h100));
        let unknown = "sim:h800".parse::<DeviceSpec>().unwrap_err().to_string();
        assert!(
            unknown.starts_with(
                "unknown GPU 'h800' in 'sim:h800' (did you mean 'sim:h100'?); known: h100, "
            ),
            "{unknown}"
        );
    }

    #[test]
    fn parses_every_form() {
        assert_eq!("host".parse(), Ok(DeviceSpec::Host { capacity: None }));
        assert_eq!(
            "host:2GiB".parse(),
            Ok(DeviceSpec::Host {
                capacity: Some(2 << 30)
            })
        );
        assert_eq!(
            "sim:80GiB".parse(),
            Ok(DeviceSpec::Sim {
                capacity: 80 << 30,
                gpu: None
            })
        );
        assert_eq!(
            "opencl:0".parse(),
            Ok(DeviceSpec::Device {
                backend: BackendKind::Opencl,
                index: 0
            })
        );
        assert_eq!(
            "CUDA:3".parse(),
            Ok(DeviceSpec::Device {
                backend: BackendKind::Cuda,
                index: 3
            })
        );
        assert_eq!(
            "vulkan".parse(),
            Ok(DeviceSpec::Device {
                backend: BackendKind::Vulkan,
                index: 0
            })
        );
    }

    #[test]
    fn rejects_bad_specs() {
        assert!(matches!(
            "sim".parse::<DeviceSpec>(),
            Err(ParseDeviceSpecError::Malformed(_))
        ));
        assert!(matches!(
            "gpu:0".parse::<DeviceSpec>(),
            Err(ParseDeviceSpecError::UnknownBackend(_))
        ));
        assert!(matches!(
            "opencl:x".parse::<DeviceSpec>(),
            Err(ParseDeviceSpecError::Malformed(_))
        ));
        assert!(matches!(
            "host:0".parse::<DeviceSpec>(),
            Err(ParseDeviceSpecError::ZeroCapacity(_))
        ));
        assert!(matches!(
            "sim:lots".parse::<DeviceSpec>(),
            Err(ParseDeviceSpecError::UnknownGpu { .. })
        ));
        assert!(matches!(
            "sim:1.5.5GiB".parse::<DeviceSpec>(),
            Err(ParseDeviceSpecError::Capacity { .. })
        ));
    }

    proptest! {
        #[test]
        fn never_panics_and_round_trips(s in "\\PC{0,24}") {
            if let Ok(spec) = s.parse::<DeviceSpec>() {
                prop_assert_eq!(spec.to_string().parse::<DeviceSpec>(), Ok(spec));
            }
        }
    }
}
