//! Devices to plan over: this machine's discovery, or inventory files as fleets have them
//! (`gpumem discover --json`, `nvidia-smi` CSV, `kubectl get nodes -o json`).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use thiserror::Error;

mod discover_doc;

use super::Candidate;
use crate::backend::{BackendInfo, BackendKind, DeviceType};
use discover_doc::discover_document;

/// Why an inventory file was refused.
#[derive(Debug, Error)]
pub enum InventoryError {
    /// The path is not a readable regular file, or is too large.
    #[error(transparent)]
    Input(#[from] crate::input::InputError),
    /// Several inventories list more devices together than one may alone.
    #[error(
        "the inventories list {devices} devices together, more than the \
         {MAX_INVENTORY_DEVICES} gpumem plans over at once"
    )]
    TooManyDevices {
        /// Devices listed up to the file that went past the limit.
        devices: usize,
    },
    /// The file is not a discover document; names the field.
    #[error("{path}: {why}")]
    Invalid {
        /// The inventory file as given.
        path: PathBuf,
        /// What is wrong, with the field's path.
        why: String,
    },
}

/// Candidates from probe results: every available device but NVML's (CUDA rows cover them), each
/// GPU once, through its preferred API ([`crate::backend::same_gpus`]).
pub fn candidates_from_discovery(backends: &[BackendInfo], host: &str) -> Vec<Candidate> {
    let again = crate::backend::same_gpus(backends);
    backends
        .iter()
        .filter(|b| b.available && b.backend != BackendKind::Nvml)
        .flat_map(|b| {
            b.devices.iter().map(move |d| (b, d)).filter(|(b, d)| {
                !again
                    .iter()
                    .any(|s| s.backend == b.backend && s.device == d.index)
            })
        })
        .map(|(b, d)| Candidate {
            vulkan_limits: d.vulkan_limits,
            unified_memory: d.unified_memory,
            ..listed(
                host,
                b.backend,
                d.index,
                &d.name,
                d.device_type,
                d.engine_total_bytes(),
                d.free_bytes,
            )
        })
        .collect()
}

/// The largest inventory read: far above any real fleet's `discover` or `kubectl` document.
const MAX_INVENTORY_BYTES: u64 = 64 << 20;

/// Reads one inventory file, whatever its format: a `gpumem discover --json` document (only the
/// fields the planner uses are required), `nvidia-smi --query-gpu=… --format=csv` output (one
/// host per file, named after the file), or `kubectl get nodes -o json` (one host per node,
/// GPUs from GPU Feature Discovery labels, as many as are allocatable).
pub fn read_inventory(path: &Path) -> Result<Vec<Candidate>, InventoryError> {
    read_inventory_with_notes(path).map(|(candidates, _)| candidates)
}

/// GPUs a host has that the planner leaves out: a Kubernetes node's GPUs the scheduler cannot
/// hand out now, or GPUs an nvidia-smi CSV shows in MIG mode (its `--query-gpu` rows give the
/// whole GPU's memory, not the slices a process can use).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HeldBack {
    /// The node or host.
    pub host: String,
    /// GPUs on it (GPU Feature Discovery's `nvidia.com/gpu.count`; the CSV's rows).
    pub gpus: usize,
    /// GPUs it can schedule (`status.allocatable["nvidia.com/gpu"]`, 0 when cordoned; the CSV's
    /// rows not in MIG mode).
    pub allocatable: usize,
    /// The node is cordoned (`spec.unschedulable`).
    pub cordoned: bool,
    /// Indexes of GPUs left out because MIG mode is on (`mig.mode.current` is `Enabled`).
    pub mig_enabled: Vec<usize>,
}

/// [`read_inventory`], with the hosts whose GPUs are not all planned (unschedulable Kubernetes
/// GPUs, GPUs in MIG mode), so a report can say why a host offers fewer GPUs than it has.
pub fn read_inventory_with_notes(
    path: &Path,
) -> Result<(Vec<Candidate>, Vec<HeldBack>), InventoryError> {
    let invalid = |why: String| InventoryError::Invalid {
        path: path.to_path_buf(),
        why,
    };
    let bytes = crate::input::read_bounded(path, MAX_INVENTORY_BYTES, "an inventory")?;
    let file_host = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'{') {
        let text = std::str::from_utf8(&bytes)
            .map_err(|_| invalid("neither JSON nor nvidia-smi CSV text (not UTF-8)".into()))?;
        return nvidia_smi_csv(text, &file_host).map_err(invalid);
    }
    let value: serde_json::Value = {
        let mut de = serde_json::Deserializer::from_slice(&bytes);
        let v = serde::Deserialize::deserialize(&mut de)
            .map_err(|e| invalid(format!("not valid JSON: {e}")))?;
        // One document per file: a second document, JSON lines or trailing bytes are refused.
        de.end()
            .map_err(|e| invalid(format!("trailing data after the document: {e}")))?;
        v
    };
    if value.get("items").is_some() && value.get("backends").is_none() {
        kubectl_nodes(&value).map_err(invalid)
    } else {
        discover_document(&value, &file_host)
            .map(|c| (c, Vec::new()))
            .map_err(invalid)
    }
}

/// [`read_inventory_with_notes`] over several files, their devices and held-back hosts
/// together, refused when they add up to more than [`MAX_INVENTORY_DEVICES`].
pub fn read_inventories(
    paths: &[PathBuf],
) -> Result<(Vec<Candidate>, Vec<HeldBack>), InventoryError> {
    let mut candidates = Vec::new();
    let mut held_back = Vec::new();
    for path in paths {
        let (found, held) = read_inventory_with_notes(path)?;
        candidates.extend(found);
        held_back.extend(held);
        if candidates.len() > MAX_INVENTORY_DEVICES {
            return Err(InventoryError::TooManyDevices {
                devices: candidates.len(),
            });
        }
    }
    Ok((candidates, held_back))
}

/// A real (not simulated) device read from an inventory.
fn listed(
    host: &str,
    backend: BackendKind,
    device: usize,
    name: &str,
    device_type: DeviceType,
    total_bytes: u64,
    free_bytes: Option<u64>,
) -> Candidate {
    Candidate {
        host: host.to_string(),
        backend,
        device,
        name: name.to_string(),
        device_type,
        total_bytes,
        free_bytes,
        simulated: false,
        mig_profile: None,
        vulkan_limits: None,
        unified_memory: false,
    }
}

/// Deserializes `value` as `T`, naming the field path of the first mismatch.
fn typed<T: serde::de::DeserializeOwned>(value: &serde_json::Value) -> Result<T, String> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let field = e.path().to_string();
        let inner = e.into_inner();
        if field.is_empty() || field == "." {
            inner.to_string()
        } else {
            format!("field '{field}': {inner}")
        }
    })
}

// nvidia-smi's CSV: columns named by the header when there is one (`memory.total [MiB]`),
// else in the order the README's command asks for them.
const SMI_DEFAULT_COLUMNS: [&str; 6] = [
    "index",
    "name",
    "memory.total",
    "memory.free",
    "pci.bus_id",
    "uuid",
];

fn nvidia_smi_csv(text: &str, host: &str) -> Result<(Vec<Candidate>, Vec<HeldBack>), String> {
    if let Some((n, _)) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.len() > MAX_CSV_LINE)
    {
        return Err(format!(
            "line {}: longer than {MAX_CSV_LINE} bytes, which no nvidia-smi row is",
            n + 1
        ));
    }
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .peekable();
    let split = |l: &str| -> Vec<String> { l.split(',').map(|f| f.trim().to_string()).collect() };
    let has_header = lines
        .peek()
        .is_some_and(|(_, l)| split(l).iter().any(|f| f.starts_with("memory.total")));
    let columns: Vec<String> = if has_header {
        let (_, header) = lines.next().unwrap_or_default();
        split(header)
            .into_iter()
            .map(|c| c.split_whitespace().next().unwrap_or("").to_string())
            .collect()
    } else {
        SMI_DEFAULT_COLUMNS.iter().map(|c| c.to_string()).collect()
    };
    let col = |name: &str| columns.iter().position(|c| c == name);
    let cols = SmiColumns {
        total: col("memory.total").ok_or(
            "nvidia-smi CSV without a memory.total column (query index,name,memory.total,\
             memory.free)",
        )?,
        index: col("index"),
        name: col("name"),
        free: col("memory.free"),
        mig: col("mig.mode.current"),
    };
    let mut out = Vec::new();
    let mut mig_enabled = Vec::new();
    let mut rows = 0;
    for (n, line) in lines {
        rows += 1;
        if rows > MAX_NODE_DEVICES {
            return Err(format!(
                "line {}: more than {MAX_NODE_DEVICES} GPU rows, and an nvidia-smi CSV is one host",
                n + 1
            ));
        }
        match smi_row(&cols, n + 1, &split(line), out.len())? {
            SmiRow::Gpu {
                index,
                name,
                total,
                free,
            } => out.push(listed(
                host,
                BackendKind::Cuda,
                index,
                &name,
                DeviceType::Gpu,
                total,
                free,
            )),
            SmiRow::MigEnabled(index) => mig_enabled.push(index),
        }
    }
    if rows == 0 {
        return Err("nvidia-smi CSV with no GPU rows".into());
    }
    let held_back = if mig_enabled.is_empty() {
        Vec::new()
    } else {
        vec![HeldBack {
            host: host.to_string(),
            gpus: rows,
            allocatable: rows - mig_enabled.len(),
            cordoned: false,
            mig_enabled,
        }]
    };
    Ok((out, held_back))
}

/// Where each field of an nvidia-smi row is (`memory.total` always; the rest if asked for).
struct SmiColumns {
    total: usize,
    index: Option<usize>,
    name: Option<usize>,
    free: Option<usize>,
    mig: Option<usize>,
}

/// One row of nvidia-smi's CSV.
enum SmiRow {
    Gpu {
        index: usize,
        name: String,
        total: u64,
        free: Option<u64>,
    },
    /// A GPU in MIG mode serves processes only through its slices, whose memory the
    /// `--query-gpu` row does not give; planning the whole GPU would promise memory no process
    /// can have.
    MigEnabled(usize),
}

/// Row `line` (1-based) of the CSV, its fields split; `listed` GPUs come before it (a row
/// without an index takes that place).
fn smi_row(
    cols: &SmiColumns,
    line: usize,
    fields: &[String],
    listed: usize,
) -> Result<SmiRow, String> {
    let at = |c: usize, what: &str| {
        fields
            .get(c)
            .map(String::as_str)
            .ok_or_else(|| format!("line {line}: no {what} field"))
    };
    let total = smi_mib(at(cols.total, "memory.total")?)
        .ok_or_else(|| format!("line {line}: memory.total is not a size in MiB"))?
        .ok_or_else(|| format!("line {line}: memory.total is not reported"))?;
    let free = match cols.free {
        Some(c) => smi_mib(at(c, "memory.free")?)
            .ok_or_else(|| format!("line {line}: memory.free is not a size in MiB"))?,
        None => None,
    };
    let index = match cols.index {
        Some(c) => at(c, "index")?
            .parse()
            .map_err(|_| format!("line {line}: index is not a number"))?,
        None => listed,
    };
    let name = match cols.name {
        Some(c) => at(c, "name")?.to_string(),
        None => format!("GPU {index}"),
    };
    if let Some(c) = cols.mig {
        match at(c, "mig.mode.current")? {
            "Enabled" => return Ok(SmiRow::MigEnabled(index)),
            "Disabled" | "[N/A]" | "[Not Supported]" => {}
            other => {
                return Err(format!(
                    "line {line}: mig.mode.current is '{other}', not Enabled, Disabled or [N/A]"
                ))
            }
        }
    }
    Ok(SmiRow::Gpu {
        index,
        name,
        total,
        free,
    })
}

/// A size as nvidia-smi prints it (`81920 MiB`, or `81920` with `nounits`): `Some(None)` for
/// `[N/A]` / `[Not Supported]`, `None` when it is not a size.
fn smi_mib(field: &str) -> Option<Option<u64>> {
    if field.starts_with('[') {
        return Some(None);
    }
    let number = field.strip_suffix("MiB").unwrap_or(field).trim();
    number.parse::<u64>().ok()?.checked_mul(1 << 20).map(Some)
}

// `kubectl get nodes -o json`: the fields read, all optional but the node's name.
#[derive(Debug, Deserialize)]
struct NodeList {
    items: Vec<Node>,
}

#[derive(Debug, Deserialize)]
struct Node {
    metadata: NodeMeta,
    #[serde(default)]
    spec: NodeSpec,
    #[serde(default)]
    status: NodeStatus,
}

#[derive(Debug, Deserialize)]
struct NodeMeta {
    name: String,
    #[serde(default)]
    labels: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
struct NodeSpec {
    #[serde(default)]
    unschedulable: bool,
}

#[derive(Debug, Default, Deserialize)]
struct NodeStatus {
    #[serde(default)]
    allocatable: std::collections::BTreeMap<String, String>,
}

fn kubectl_nodes(value: &serde_json::Value) -> Result<(Vec<Candidate>, Vec<HeldBack>), String> {
    let list: NodeList = typed(value)?;
    let mut out = Vec::new();
    let mut held_back = Vec::new();
    for (i, node) in list.items.iter().enumerate() {
        let n = NodeView { i, node };
        let schedulable = n.schedulable_gpus(&mut held_back)?;
        if schedulable > 0 {
            n.whole_gpus(schedulable, &mut out)?;
        }
        if !node.spec.unschedulable {
            n.mig_slices(&mut out)?;
        }
        if let Some(memory) = n.allocatable("memory") {
            let bytes = kube_quantity(memory).ok_or_else(|| {
                format!(
                    "{}: '{memory}' is not a Kubernetes quantity",
                    n.field("status.allocatable.memory")
                )
            })?;
            room(&out, 1)?;
            out.push(listed(
                &node.metadata.name,
                BackendKind::Cpu,
                0,
                n.label("kubernetes.io/arch").unwrap_or("node"),
                DeviceType::Cpu,
                bytes,
                None,
            ));
        }
    }
    if out.is_empty() {
        return Err("the node list has no node with allocatable GPUs or memory".into());
    }
    Ok((out, held_back))
}

/// One node of a `kubectl get nodes` list, `i` its place in it (for error paths).
struct NodeView<'a> {
    i: usize,
    node: &'a Node,
}

impl NodeView<'_> {
    fn field(&self, name: &str) -> String {
        format!("field 'items[{}].{name}'", self.i)
    }

    fn label(&self, key: &str) -> Option<&str> {
        self.node.metadata.labels.get(key).map(String::as_str)
    }

    fn allocatable(&self, key: &str) -> Option<&str> {
        self.node.status.allocatable.get(key).map(String::as_str)
    }

    /// A size label in MiB, in bytes.
    fn mib_label(&self, key: &str, missing: &str) -> Result<u64, String> {
        let field = self.field(&format!("metadata.labels.{key}"));
        let value = self
            .label(key)
            .ok_or_else(|| format!("{field}: missing; {missing}"))?;
        let mib: u64 = value
            .parse()
            .map_err(|_| format!("{field}: '{value}' is not a size in MiB"))?;
        mib.checked_mul(1 << 20)
            .ok_or_else(|| format!("{field}: too large"))
    }

    /// What the scheduler can hand out: allocatable GPUs, none on a cordoned node; a node whose
    /// GPUs are not all schedulable is noted in `held_back`.
    fn schedulable_gpus(&self, held_back: &mut Vec<HeldBack>) -> Result<usize, String> {
        let node = self.node;
        let allocatable = match self.allocatable("nvidia.com/gpu") {
            Some(v) => device_count(v, "GPU", self.field("status.allocatable.nvidia.com/gpu"))?,
            None => 0,
        };
        let schedulable = if node.spec.unschedulable {
            0
        } else {
            allocatable
        };
        let on_node = self
            .label("nvidia.com/gpu.count")
            .and_then(|c| c.parse::<usize>().ok())
            .unwrap_or(allocatable);
        if on_node > 0 && schedulable < on_node {
            held_back.push(HeldBack {
                host: node.metadata.name.clone(),
                gpus: on_node,
                allocatable: schedulable,
                cordoned: node.spec.unschedulable,
                mig_enabled: Vec::new(),
            });
        }
        Ok(schedulable)
    }

    /// The node's whole GPUs, at most `schedulable`, from GPU Feature Discovery's labels.
    fn whole_gpus(&self, schedulable: usize, out: &mut Vec<Candidate>) -> Result<(), String> {
        let total = self.mib_label(
            "nvidia.com/gpu.memory",
            "GPU Feature Discovery labels are needed to know GPU memory",
        )?;
        let count = match self.label("nvidia.com/gpu.count") {
            Some(c) => device_count(c, "GPU", self.field("metadata.labels.nvidia.com/gpu.count"))?,
            None => schedulable,
        };
        let product = self.label("nvidia.com/gpu.product").unwrap_or("NVIDIA GPU");
        room(out, count.min(schedulable))?;
        for device in 0..count.min(schedulable) {
            out.push(listed(
                &self.node.metadata.name,
                BackendKind::Cuda,
                device,
                product,
                DeviceType::Gpu,
                total,
                None,
            ));
        }
        Ok(())
    }

    /// MIG slices under the mixed strategy: `nvidia.com/mig-<profile>` resources, each slice's
    /// memory in GPU Feature Discovery's `nvidia.com/mig-<profile>.memory` label (MiB).
    fn mig_slices(&self, out: &mut Vec<Candidate>) -> Result<(), String> {
        let host = &self.node.metadata.name;
        let mut next = out.iter().filter(|c| &c.host == host).count();
        for (key, count) in &self.node.status.allocatable {
            let Some(profile) = key.strip_prefix("nvidia.com/mig-") else {
                continue;
            };
            let slices = device_count(
                count,
                "MIG slice",
                self.field(&format!("status.allocatable.{key}")),
            )?;
            if next + slices > MAX_NODE_DEVICES {
                return Err(format!(
                    "{}: more than {MAX_NODE_DEVICES} devices on one node",
                    self.field("status.allocatable")
                ));
            }
            room(out, slices)?;
            let total = self.mib_label(
                &format!("nvidia.com/mig-{profile}.memory"),
                "GPU Feature Discovery labels are needed to know MIG slice memory",
            )?;
            let product = self
                .label(&format!("nvidia.com/mig-{profile}.product"))
                .map(str::to_string)
                .unwrap_or_else(|| {
                    format!(
                        "{} MIG {profile}",
                        self.label("nvidia.com/gpu.product").unwrap_or("NVIDIA GPU")
                    )
                });
            for _ in 0..slices {
                let mut slice = listed(
                    host,
                    BackendKind::Cuda,
                    next,
                    &product,
                    DeviceType::Gpu,
                    total,
                    None,
                );
                slice.mig_profile = Some(profile.to_string());
                out.push(slice);
                next += 1;
            }
        }
        Ok(())
    }
}

/// Devices one inventory may list in all: 2,048 nodes of 8 GPUs. Planning is linear in the
/// devices, so this bounds its time and memory (about 60 MiB) whatever the file says.
pub const MAX_INVENTORY_DEVICES: usize = 16_384;

/// Refuses adding `more` devices to `out` past [`MAX_INVENTORY_DEVICES`].
fn room(out: &[Candidate], more: usize) -> Result<(), String> {
    if out.len().saturating_add(more) > MAX_INVENTORY_DEVICES {
        return Err(format!(
            "more than {MAX_INVENTORY_DEVICES} devices in one inventory (the limit gpumem \
             plans over); split the fleet into several inventories and plan each"
        ));
    }
    Ok(())
}

/// Devices one node may list: far above any real node (8–16 GPUs, 7 MIG slices each), low
/// enough that a hostile count cannot make the planner list billions of devices.
pub const MAX_NODE_DEVICES: usize = 1024;

/// The longest line an nvidia-smi CSV may have: every `--query-gpu` field of one GPU takes
/// well under 1 KiB.
pub const MAX_CSV_LINE: usize = 4096;

/// A node's count of `what` (GPUs, MIG slices) from the string at `field`, refused when it is
/// not a whole number or implausibly large.
fn device_count(v: &str, what: &str, field: String) -> Result<usize, String> {
    match v.parse::<usize>() {
        Ok(n) if n <= MAX_NODE_DEVICES => Ok(n),
        Ok(_) => Err(format!(
            "{field}: {v} {what}s on one node is implausible (at most {MAX_NODE_DEVICES})"
        )),
        Err(_) => Err(format!("{field}: '{v}' is not a {what} count")),
    }
}

/// A Kubernetes resource quantity in bytes: `527938424Ki`, `64Gi`, `1G`, `1e9`, `123`.
pub fn kube_quantity(q: &str) -> Option<u64> {
    const SUFFIXES: [(&str, u64); 12] = [
        ("Ki", 1 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
        ("Pi", 1 << 50),
        ("Ei", 1 << 60),
        ("k", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
        ("T", 1_000_000_000_000),
        ("P", 1_000_000_000_000_000),
        ("E", 1_000_000_000_000_000_000),
    ];
    let q = q.trim();
    for (suffix, factor) in SUFFIXES {
        if let Some(n) = q.strip_suffix(suffix) {
            return n.parse::<u64>().ok()?.checked_mul(factor);
        }
    }
    if let Ok(n) = q.parse::<u64>() {
        return Some(n);
    }
    // Decimal exponent form, e.g. 1e9 or 12e6.
    let (mantissa, exp) = q.split_once(['e', 'E'])?;
    let exp: u32 = exp.parse().ok()?;
    mantissa
        .parse::<u64>()
        .ok()?
        .checked_mul(10u64.checked_pow(exp)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubernetes_quantities() {
        assert_eq!(kube_quantity("527938424Ki"), Some(527_938_424 << 10));
        assert_eq!(kube_quantity("64Gi"), Some(64 << 30));
        assert_eq!(kube_quantity("1G"), Some(1_000_000_000));
        assert_eq!(kube_quantity("12e6"), Some(12_000_000));
        assert_eq!(kube_quantity("4096"), Some(4096));
        assert_eq!(kube_quantity("16Ei"), None, "overflow refused");
        assert_eq!(kube_quantity("lots"), None);
    }

    #[test]
    fn nvidia_smi_sizes() {
        assert_eq!(smi_mib("81920 MiB"), Some(Some(81_920 << 20)));
        assert_eq!(smi_mib("81920"), Some(Some(81_920 << 20)));
        assert_eq!(smi_mib("[N/A]"), Some(None));
        assert_eq!(smi_mib("80 GB"), None);
    }
}
