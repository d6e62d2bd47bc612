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
            let bytes = parse_bytes(t).map_err(|source| ParseDeviceSpecError::Capacity {
                input: input.to_string(),
                source,
            })?;
            if bytes == 0 {
                return Err(ParseDeviceSpecError::ZeroCapacity(input.to_string()));
            }
            Ok(bytes)
        };
        match (head.as_str(), tail) {
            ("host", None) => Ok(DeviceSpec::Host { capacity: None }),
            ("host", Some(t)) => Ok(DeviceSpec::Host {
                capacity: Some(capacity(t)?),
            }),
            ("sim", Some(t)) => Ok(DeviceSpec::Sim {
                capacity: capacity(t)?,
            }),
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
            DeviceSpec::Sim { capacity } => write!(f, "sim:{}", exact_size(*capacity)),
            DeviceSpec::Device { backend, index } => write!(f, "{backend}:{index}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
            Ok(DeviceSpec::Sim { capacity: 80 << 30 })
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
