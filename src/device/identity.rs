//! One physical GPU seen through several APIs: an NVIDIA card is a CUDA device, an NVML device,
//! an OpenCL device (NVIDIA's ICD) and a Vulkan device at once. Each API spells its identity
//! its own way (`GPU-08d873ee-…` from CUDA and NVML, the same 16 bytes without the prefix from
//! `cl_khr_device_uuid`; `00000000:00:06.0` from NVML, `0000:00:06.0` elsewhere), so both are
//! parsed to numbers before they are compared.

/// A device's identity as its API reports it: the UUID first, the PCI address where no UUID is
/// known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhysicalId {
    uuid: Option<u128>,
    pci: Option<(u32, u8, u8, u8)>,
}

impl PhysicalId {
    /// From the strings a backend reports; either may be missing or unreadable.
    pub fn new(uuid: Option<&str>, pci_bus_id: Option<&str>) -> Self {
        PhysicalId {
            uuid: uuid.and_then(parse_uuid),
            pci: pci_bus_id.and_then(parse_pci),
        }
    }

    /// True when both name the same device: equal UUIDs, or equal PCI addresses where either
    /// lacks a UUID. Two devices that share neither are different.
    pub fn same_device(&self, other: &PhysicalId) -> bool {
        match (self.uuid, other.uuid) {
            (Some(a), Some(b)) => a == b,
            _ => matches!((self.pci, other.pci), (Some(a), Some(b)) if a == b),
        }
    }
}

/// `GPU-08d873ee-b646-1882-dc8e-d265043812d2` or `08d873ee-…`: 32 hex digits, any dashes and
/// an alphabetic prefix left out. MIG instances (`MIG-…`) are their own devices and keep their
/// prefix apart by failing to parse as a GPU's.
fn parse_uuid(text: &str) -> Option<u128> {
    let body = text.strip_prefix("GPU-").unwrap_or(text);
    let hex: String = body.chars().filter(|c| *c != '-').collect();
    if hex.len() != 32 {
        return None;
    }
    u128::from_str_radix(&hex, 16).ok().filter(|&v| v != 0)
}

/// `[domain:]bus:device.function`, hexadecimal, the domain of any width.
fn parse_pci(text: &str) -> Option<(u32, u8, u8, u8)> {
    let (rest, function) = text.trim().rsplit_once('.')?;
    let mut parts = rest.rsplitn(3, ':');
    let device = parts.next()?;
    let bus = parts.next()?;
    let domain = parts.next().unwrap_or("0");
    Some((
        u32::from_str_radix(domain, 16).ok()?,
        u8::from_str_radix(bus, 16).ok()?,
        u8::from_str_radix(device, 16).ok()?,
        u8::from_str_radix(function, 16).ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_and_opencl_spellings_of_one_gpu_match() {
        // As an H200 reported them through CUDA and through NVIDIA's OpenCL ICD.
        let cuda = PhysicalId::new(
            Some("GPU-08d873ee-b646-1882-dc8e-d265043812d2"),
            Some("0000:00:06.0"),
        );
        let opencl = PhysicalId::new(Some("08d873ee-b646-1882-dc8e-d265043812d2"), None);
        let nvml = PhysicalId::new(None, Some("00000000:00:06.0"));
        assert!(cuda.same_device(&opencl));
        assert!(cuda.same_device(&nvml));
        assert!(
            !opencl.same_device(&nvml),
            "nothing shared: not known to be one device"
        );
    }

    #[test]
    fn different_or_unreadable_identities_never_match() {
        let a = PhysicalId::new(Some("GPU-00000000-0000-0000-0000-000000000001"), None);
        let b = PhysicalId::new(Some("GPU-00000000-0000-0000-0000-000000000002"), None);
        assert!(!a.same_device(&b));
        let blank = PhysicalId::new(Some("MIG-3g.40gb"), Some("bus 6"));
        assert!(!blank.same_device(&blank));
        let zero = PhysicalId::new(Some("00000000-0000-0000-0000-000000000000"), None);
        assert!(!zero.same_device(&zero), "an all-zero UUID names no device");
        // A UUID decides over a shared PCI address (two MIG-less GPUs never share one, but
        // two virtual functions may).
        let c = PhysicalId::new(
            Some("GPU-00000000-0000-0000-0000-000000000001"),
            Some("1:0.0"),
        );
        let d = PhysicalId::new(
            Some("GPU-00000000-0000-0000-0000-000000000002"),
            Some("1:0.0"),
        );
        assert!(!c.same_device(&d));
    }
}
