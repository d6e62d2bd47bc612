//! Choosing where a model fits: one device, tensor parallel over identical devices, a layer
//! split over unequal ones or across hosts, or partial CPU offload — and saying why every other
//! choice was rejected; then what the plan can serve and how to launch it ([`launch`]). Pure computation over device descriptions; discovery and inventories feed it.

mod inventory;
pub mod launch;

use serde::Serialize;
use thiserror::Error;

pub use inventory::{
    candidates_from_discovery, read_inventories, read_inventory, read_inventory_with_notes,
    HeldBack, InventoryError, MAX_CSV_LINE, MAX_INVENTORY_DEVICES, MAX_NODE_DEVICES,
};

use crate::backend::{BackendKind, DeviceSpec, DeviceType};
use crate::device::DriverReserve;
use crate::units::format_bytes;

/// A device a plan may use.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    /// Host name (inventories can hold many hosts).
    pub host: String,
    /// Backend that drives it.
    pub backend: BackendKind,
    /// Index within the backend.
    pub device: usize,
    /// Device name as its driver or inventory gives it.
    pub name: String,
    /// GPU, CPU, software device…: software devices are chosen only when preferred.
    pub device_type: DeviceType,
    /// Physical memory in bytes.
    pub total_bytes: u64,
    /// Free bytes, when known.
    pub free_bytes: Option<u64>,
    /// True for `--device sim:SIZE`: planned for, not present.
    pub simulated: bool,
    /// For a MIG slice, its profile (e.g. `3g.40gb`): planned alone or with CPU offload, never
    /// in a tensor-parallel or layer split (slices of a GPU cannot communicate as a group).
    pub mig_profile: Option<String>,
}

impl Candidate {
    /// A simulated GPU of `capacity` bytes.
    pub fn sim(index: usize, capacity: u64) -> Self {
        Candidate {
            host: "sim".into(),
            backend: BackendKind::Cuda,
            device: index,
            name: format!("sim:{}", format_bytes(capacity)),
            device_type: DeviceType::Gpu,
            total_bytes: capacity,
            free_bytes: None,
            simulated: true,
            mig_profile: None,
        }
    }

    fn is_gpu(&self) -> bool {
        self.backend.is_gpu() && self.device_type.is_hardware_gpu()
    }
}

/// The usable-memory rule and backend preference.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Backend to favour (`None`: GPUs by headroom, CPU last).
    pub prefer: Option<BackendKind>,
    /// Fraction of free memory a plan may use.
    pub memory_fraction: f64,
    /// Bytes always left free.
    pub min_free: u64,
    /// Seed 001's reserve: driver overhead…
    pub driver_reserve: u64,
    /// …plus context overhead…
    pub context_reserve: u64,
    /// …plus this fraction of the total…
    pub reserve_fraction: f64,
    /// …with the whole reserve capped at this many bytes.
    pub reserve_cap: u64,
}

impl Default for Policy {
    fn default() -> Self {
        let seed = DriverReserve::default();
        Policy {
            prefer: None,
            memory_fraction: 0.9,
            min_free: 512 << 20,
            driver_reserve: seed.driver,
            context_reserve: seed.context,
            reserve_fraction: seed.fraction,
            reserve_cap: seed.cap,
        }
    }
}

impl Policy {
    /// The reserve kept back on a GPU of `total` bytes.
    pub fn reserve(&self, total: u64) -> u64 {
        DriverReserve {
            driver: self.driver_reserve,
            context: self.context_reserve,
            fraction: self.reserve_fraction,
            cap: self.reserve_cap,
        }
        .of(total)
    }

    /// Bytes a plan may use on a device: the smallest of free × fraction, free − min_free and
    /// (GPUs) total − reserve.
    pub fn usable(&self, c: &Candidate) -> u64 {
        self.usable_with_rule(c).bytes
    }

    /// The usable bytes on a device and the rule that set them (the smallest limit wins; on a
    /// tie the fraction is named first, then the headroom, then the reserve).
    pub fn usable_with_rule(&self, c: &Candidate) -> Usable {
        let base = c.free_bytes.unwrap_or(c.total_bytes);
        let mut best = Usable {
            bytes: ((base as f64) * self.memory_fraction) as u64,
            base_bytes: base,
            base_is_free: c.free_bytes.is_some(),
            rule: UsableRule::MemoryFraction {
                fraction: self.memory_fraction,
            },
        };
        let headroom = base.saturating_sub(self.min_free);
        if headroom < best.bytes {
            best.bytes = headroom;
            best.rule = UsableRule::MinFree {
                min_free_bytes: self.min_free,
            };
        }
        if c.backend != BackendKind::Cpu {
            let reserve = self.reserve(c.total_bytes);
            let after_reserve = c.total_bytes.saturating_sub(reserve);
            if after_reserve < best.bytes {
                best.bytes = after_reserve;
                best.rule = UsableRule::Reserve {
                    reserve_bytes: reserve,
                };
            }
        }
        best
    }
}

/// Which limit of the [`Policy`] set a device's usable memory.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum UsableRule {
    /// `fraction` of the free (else total) memory (`--memory-fraction`).
    MemoryFraction {
        /// The fraction applied, in (0, 1].
        fraction: f64,
    },
    /// Free (else total) memory less the headroom always kept free (`--min-free`).
    MinFree {
        /// Bytes always left free.
        min_free_bytes: u64,
    },
    /// Total memory less seed 001's driver and context reserve (GPUs only).
    Reserve {
        /// The reserve taken off the total.
        reserve_bytes: u64,
    },
}

/// A device's usable memory and where the figure came from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Usable {
    /// Bytes a plan may use.
    pub bytes: u64,
    /// The free (or, when unknown, total) bytes the rule started from.
    pub base_bytes: u64,
    /// Whether `base_bytes` is free memory (else the total: the device reports no free figure).
    pub base_is_free: bool,
    /// The rule that set `bytes`.
    pub rule: UsableRule,
}

/// What a model needs, split the way planners need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ModelNeeds {
    /// Decoder layers: the unit layer splits and offload move.
    pub layers: u64,
    /// Weights and KV cache per layer.
    pub per_layer: u64,
    /// Weights outside the layers (embeddings, output head).
    pub non_layer: u64,
    /// Activation scratch (needed on every device that runs layers).
    pub activations: u64,
    /// Runtime overhead per device.
    pub overhead: u64,
}

/// What a model needs on devices, from its estimate: the total for one device and the
/// per-layer structure for splits and offload. The fragmentation reserve (a percentage) grows
/// weights, KV cache and activations in proportion; the runtime overhead is per device and not
/// grown.
pub fn model_requirement(
    arch: &crate::model::ModelArch,
    b: &crate::model::Breakdown,
    fragmentation_reserve: f64,
) -> Requirement {
    let scale = 1.0 + fragmentation_reserve / 100.0;
    let grow = |v: u64| (v as f64 * scale).ceil() as u64;
    Requirement {
        total: b.total_bytes,
        model: (arch.num_layers > 0).then(|| ModelNeeds {
            layers: arch.num_layers,
            per_layer: grow(b.per_layer_bytes),
            non_layer: grow(b.non_layer_bytes),
            activations: grow(b.activation_bytes),
            overhead: b.overhead_bytes,
        }),
    }
}

/// What must fit: the total, and the structure splits need.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Requirement {
    /// Everything, on one device.
    pub total: u64,
    /// The structure, for splits and offload (`None` for a plain `--bytes`).
    pub model: Option<ModelNeeds>,
}

/// Kinds of plan, in the order they are considered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanKind {
    /// One device holds everything.
    Single,
    /// N identical devices on one host split weights and KV cache N ways.
    TensorParallel,
    /// Layers spread over unequal devices of one host in proportion to their memory.
    LayerSplit,
    /// Layers spread over the GPUs of several hosts (pipeline parallel).
    CrossHost,
    /// Some layers on the GPU, the rest in system RAM.
    CpuOffload,
    /// Nothing fits, even split or offloaded.
    None,
}

/// One device's share of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Placement {
    /// Host of the device (from the inventory, or this machine).
    pub host: String,
    /// Backend of the device.
    pub backend: BackendKind,
    /// Device index within its backend.
    pub device: usize,
    /// Bytes this device must hold under the plan.
    pub bytes: u64,
    /// Layers placed there (`None` when not split by layers).
    pub layers: Option<u64>,
}

/// The plan `select` chose: its kind and each device's share.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    /// Single device, tensor parallel, layer split, CPU offload or none.
    pub kind: PlanKind,
    /// Each device's share; empty when nothing fits.
    pub placements: Vec<Placement>,
    /// Layers on GPUs (offload), when split by layers.
    pub gpu_layers: Option<u64>,
    /// The largest context that fits on the best device, when the requested one does not.
    pub max_context: Option<u64>,
    /// For `none`: how many bytes the closest candidate lacks.
    pub shortfall_bytes: Option<u64>,
    /// What the plan can serve (models only; set by [`capacity`]).
    pub capacity: Option<Capacity>,
}

/// What a plan can serve on its devices, as batch and context grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Capacity {
    /// The context per sequence the figures are for (`--context`).
    pub context: u64,
    /// The batch the figures are for (`--batch`).
    pub batch: u64,
    /// The longest single sequence that fits: the KV cache's capacity in tokens.
    pub kv_tokens: u64,
    /// Sequences of the requested context that fit at once (vLLM's "maximum concurrency").
    pub max_concurrent_sequences: u64,
    /// The longest context that fits for the requested batch of sequences at once.
    pub max_context_at_batch: u64,
    /// The longest context the model was trained for, when known: engines refuse a longer
    /// one (vLLM's `--max-model-len`) whatever memory allows.
    pub trained_context: Option<u64>,
}

/// The serving capacity of `selection`'s plan (`None` without a plan): on the devices the plan
/// uses, the longest context for `batch` sequences and the most sequences of `context` tokens
/// that the planner still places, `needs_at(batch, context)` re-estimating the model each time
/// (activations and KV cache both grow with them). Searched, not extrapolated, so a figure it
/// gives is one `select` itself accepts.
pub fn capacity(
    selection: &Selection,
    candidates: &[Candidate],
    policy: &Policy,
    context: u64,
    batch: u64,
    needs_at: &dyn Fn(u64, u64) -> Option<Requirement>,
) -> Option<Capacity> {
    let placements = &selection.plan.placements;
    if selection.plan.kind == PlanKind::None || placements.is_empty() {
        return None;
    }
    let devices: Vec<Candidate> = candidates
        .iter()
        .filter(|c| {
            placements
                .iter()
                .any(|p| c.host == p.host && c.backend == p.backend && c.device == p.device)
        })
        .cloned()
        .collect();
    let fits = |batch: u64, context: u64| {
        needs_at(batch, context)
            .is_some_and(|r| plan(&r, &devices, policy, None).plan.kind != PlanKind::None)
    };
    // The largest n in [0, 2^32] with fits(n): the CLI's batch and context are 32-bit.
    let largest = |fits_n: &dyn Fn(u64) -> bool| {
        let (mut lo, mut hi) = (0u64, u64::from(u32::MAX));
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if fits_n(mid) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        lo
    };
    Some(Capacity {
        context,
        batch,
        kv_tokens: largest(&|c| c > 0 && fits(1, c)),
        max_concurrent_sequences: largest(&|b| b > 0 && fits(b, context)),
        max_context_at_batch: largest(&|c| c > 0 && fits(batch, c)),
        trained_context: None,
    })
}

/// A candidate's verdict for the single-device plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// Host of the device (from the inventory, or this machine).
    pub host: String,
    /// Backend of the device.
    pub backend: BackendKind,
    /// Device index within its backend.
    pub device: usize,
    /// Device name as its driver or inventory gives it.
    pub name: String,
    /// Usable bytes under the policy.
    pub usable_bytes: u64,
    /// Bytes needed on it alone.
    pub needed_bytes: u64,
    /// usable − needed (negative: short). JSON holds it exactly when it fits a 64-bit
    /// integer, else `null` (`usable_bytes` and `needed_bytes` are exact either way).
    #[serde(serialize_with = "exact_i64")]
    pub headroom_bytes: i128,
    /// Whether it holds everything alone.
    pub fits: bool,
    /// Why it was or was not chosen (rendered in words by the output layer).
    #[serde(skip)]
    pub reason: VerdictReason,
    /// The usable-memory figure and the rule that set it.
    pub usable: Usable,
    /// The device's MIG profile when it is a MIG slice.
    pub mig_profile: Option<String>,
}

/// Why a candidate fits alone or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictReason {
    /// It holds everything on its own.
    Fits,
    /// Its usable memory is below what is needed.
    TooSmall,
    /// A GPU API implemented in software on the CPU (PoCL, lavapipe): the same RAM as the cpu
    /// backend behind an extra layer, so it is chosen only when preferred.
    SoftwareDevice,
}

/// A plan and every candidate's verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Selection {
    /// Bytes the whole model needs on one device.
    pub required_bytes: u64,
    /// The plan chosen.
    pub plan: Plan,
    /// Every candidate's single-device verdict, in ranking order.
    pub candidates: Vec<Verdict>,
}

// JSON readers take 64-bit integers; a hostile --bytes near u64::MAX must neither fail the
// report nor print a figure that is not the difference (a clamped one would be).
fn exact_i64<S: serde::Serializer>(v: &i128, s: S) -> Result<S::Ok, S::Error> {
    match i64::try_from(*v) {
        Ok(v) => s.serialize_i64(v),
        Err(_) => s.serialize_none(),
    }
}

fn rank(c: &Candidate, prefer: Option<BackendKind>) -> u8 {
    match (prefer, c.backend) {
        (Some(p), b) if p == b => 0,
        _ if c.is_gpu() => 1,
        _ if c.backend == BackendKind::Cpu => 3,
        _ => 2,
    }
}

/// Plans where `req` fits among `candidates`. `total_at_context(c)` re-estimates the total for a
/// context of `c` tokens (models only), for the largest-context answer.
pub fn plan(
    req: &Requirement,
    candidates: &[Candidate],
    policy: &Policy,
    total_at_context: Option<(&dyn Fn(u64) -> u64, u64)>,
) -> Selection {
    let gpus: Vec<&Candidate> = candidates
        .iter()
        .filter(|c| c.is_gpu() || policy.prefer == Some(c.backend) && c.backend != BackendKind::Cpu)
        .collect();
    let cpu = candidates.iter().find(|c| c.backend == BackendKind::Cpu);
    let mut verdicts: Vec<Verdict> = candidates
        .iter()
        .map(|c| {
            let usable = policy.usable_with_rule(c);
            let fits = usable.bytes >= req.total;
            let software =
                c.backend != BackendKind::Cpu && !c.is_gpu() && policy.prefer != Some(c.backend);
            let reason = if software {
                VerdictReason::SoftwareDevice
            } else if fits {
                VerdictReason::Fits
            } else {
                VerdictReason::TooSmall
            };
            Verdict {
                host: c.host.clone(),
                backend: c.backend,
                device: c.device,
                name: c.name.clone(),
                usable_bytes: usable.bytes,
                needed_bytes: req.total,
                headroom_bytes: usable.bytes as i128 - req.total as i128,
                fits: fits && !software,
                reason,
                usable,
                mig_profile: c.mig_profile.clone(),
            }
        })
        .collect();

    // 1. A single device: the preferred backend first, then GPUs by headroom; the CPU only when
    //    asked for or when there is no GPU at all.
    let mut singles: Vec<&Candidate> = gpus.clone();
    if policy.prefer == Some(BackendKind::Cpu) || gpus.is_empty() {
        singles.extend(cpu);
    }
    singles.sort_by_key(|c| (rank(c, policy.prefer), std::cmp::Reverse(policy.usable(c))));
    let best_rank = singles
        .iter()
        .filter(|c| policy.usable(c) >= req.total)
        .map(|c| rank(c, policy.prefer))
        .min();
    if let Some(r) = best_rank {
        if let Some(c) = singles
            .iter()
            .find(|c| rank(c, policy.prefer) == r && policy.usable(c) >= req.total)
        {
            let layers = req.model.map(|m| m.layers);
            return fitting(
                req,
                PlanKind::Single,
                vec![Placement {
                    host: c.host.clone(),
                    backend: c.backend,
                    device: c.device,
                    bytes: req.total,
                    layers,
                }],
                if c.backend == BackendKind::Cpu {
                    Some(0)
                } else {
                    layers
                },
                verdicts,
            );
        }
    }

    // Splits group whole GPUs only: MIG slices cannot form a tensor- or pipeline-parallel group.
    let all_gpus = gpus.clone();
    let gpus: Vec<&Candidate> = gpus
        .iter()
        .copied()
        .filter(|c| c.mig_profile.is_none())
        .collect();

    // 2. Tensor parallel over identical devices on one host: the smallest N that fits.
    let mut groups: Vec<Vec<&Candidate>> = Vec::new();
    for c in &gpus {
        match groups.iter_mut().find(|g| {
            g[0].host == c.host
                && g[0].backend == c.backend
                && g[0].name == c.name
                && g[0].total_bytes == c.total_bytes
        }) {
            Some(g) => g.push(c),
            None => groups.push(vec![c]),
        }
    }
    let mut tp_best: Option<(u64, Vec<&Candidate>, u64)> = None;
    for group in &groups {
        let mut sorted = group.clone();
        sorted.sort_by_key(|c| std::cmp::Reverse(policy.usable(c)));
        for n in 2..=sorted.len() as u64 {
            let per_device = match req.model {
                Some(m) => (req.total - m.overhead).div_ceil(n) + m.overhead,
                None => req.total.div_ceil(n),
            };
            let chosen = &sorted[..n as usize];
            if chosen.iter().all(|c| policy.usable(c) >= per_device) {
                if tp_best.as_ref().is_none_or(|(bn, _, _)| n < *bn) {
                    tp_best = Some((n, chosen.to_vec(), per_device));
                }
                break;
            }
        }
    }
    if let Some((_, chosen, per_device)) = tp_best {
        let layers = req.model.map(|m| m.layers);
        return fitting(
            req,
            PlanKind::TensorParallel,
            chosen
                .iter()
                .map(|c| Placement {
                    host: c.host.clone(),
                    backend: c.backend,
                    device: c.device,
                    bytes: per_device,
                    layers,
                })
                .collect(),
            layers,
            verdicts,
        );
    }

    // 3. Layer split over the GPUs of one host, in proportion to usable memory.
    if let Some(m) = req.model {
        let mut hosts: Vec<&str> = gpus.iter().map(|c| c.host.as_str()).collect();
        hosts.dedup();
        for host in hosts {
            let mut devs: Vec<&Candidate> =
                gpus.iter().copied().filter(|c| c.host == host).collect();
            if devs.len() < 2 {
                continue;
            }
            devs.sort_by_key(|c| std::cmp::Reverse(policy.usable(c)));
            if let Some(layers) = split_layers(
                &m,
                &devs.iter().map(|c| policy.usable(c)).collect::<Vec<_>>(),
            ) {
                return fitting(
                    req,
                    PlanKind::LayerSplit,
                    layer_placements(&devs, &layers, &m),
                    Some(m.layers),
                    verdicts,
                );
            }
        }
    }

    // 3b. Layers across hosts (pipeline parallel: vLLM's --pipeline-parallel-size, llama.cpp's
    //     RPC backend), every GPU of every host in proportion to usable memory.
    if let Some(m) = req.model {
        // The fewest hosts that hold it, largest first; each host's GPUs kept together so the
        // pipeline crosses the network once per host.
        let mut hosts: Vec<(&str, u64)> = Vec::new();
        for c in &gpus {
            match hosts.iter_mut().find(|(h, _)| *h == c.host) {
                Some((_, sum)) => *sum += policy.usable(c),
                None => hosts.push((&c.host, policy.usable(c))),
            }
        }
        hosts.sort_by_key(|&(h, sum)| (std::cmp::Reverse(sum), h));
        let mut found = None;
        for k in 2..=hosts.len() {
            let mut devs: Vec<&Candidate> = Vec::new();
            for (h, _) in &hosts[..k] {
                let mut on_host: Vec<&Candidate> =
                    gpus.iter().copied().filter(|c| c.host == *h).collect();
                on_host.sort_by_key(|c| std::cmp::Reverse(policy.usable(c)));
                devs.extend(on_host);
            }
            let usable: Vec<u64> = devs.iter().map(|c| policy.usable(c)).collect();
            if let Some(layers) = split_layers(&m, &usable) {
                found = Some((devs, layers));
                break;
            }
        }
        if let Some((devs, layers)) = found {
            return fitting(
                req,
                PlanKind::CrossHost,
                layer_placements(&devs, &layers, &m),
                Some(m.layers),
                verdicts,
            );
        }
    }

    // 4. Partial CPU offload: as many layers as fit on the best GPU, the rest in the system RAM
    //    of the same host.
    let best_gpu = all_gpus
        .iter()
        .filter(|g| {
            candidates
                .iter()
                .any(|c| c.backend == BackendKind::Cpu && c.host == g.host)
        })
        .max_by_key(|c| policy.usable(c));
    let host_cpu = best_gpu.and_then(|g| {
        candidates
            .iter()
            .find(|c| c.backend == BackendKind::Cpu && c.host == g.host)
    });
    if let (Some(gpu), Some(cpu)) = (best_gpu, host_cpu) {
        let gpu_usable = policy.usable(gpu);
        let cpu_usable = policy.usable(cpu);
        let offload = match req.model {
            Some(m) => {
                let room = gpu_usable.saturating_sub(m.overhead + m.activations + m.non_layer);
                let on_gpu = (room / m.per_layer.max(1)).min(m.layers);
                let on_cpu = m.layers - on_gpu;
                let cpu_bytes = on_cpu * m.per_layer + m.activations;
                (on_gpu > 0 && cpu_bytes <= cpu_usable).then(|| {
                    (
                        m.overhead + m.activations + m.non_layer + on_gpu * m.per_layer,
                        Some(on_gpu),
                        cpu_bytes,
                        Some(on_cpu),
                    )
                })
            }
            None => {
                let rest = req.total.saturating_sub(gpu_usable);
                (gpu_usable > 0 && rest <= cpu_usable).then_some((gpu_usable, None, rest, None))
            }
        };
        if let Some((gpu_bytes, gpu_layers, cpu_bytes, cpu_layers)) = offload {
            return fitting(
                req,
                PlanKind::CpuOffload,
                vec![
                    Placement {
                        host: gpu.host.clone(),
                        backend: gpu.backend,
                        device: gpu.device,
                        bytes: gpu_bytes,
                        layers: gpu_layers,
                    },
                    Placement {
                        host: cpu.host.clone(),
                        backend: cpu.backend,
                        device: cpu.device,
                        bytes: cpu_bytes,
                        layers: cpu_layers,
                    },
                ],
                gpu_layers,
                verdicts,
            );
        }
    }

    // 5. Nothing fits: the largest context that would fit on the best device, and the shortfall
    //    of the closest candidate.
    let best = singles
        .iter()
        .max_by_key(|c| policy.usable(c))
        .or(gpus.first())
        .copied();
    let max_context = match (best, total_at_context) {
        (Some(c), Some((total_at, requested))) => {
            let usable = policy.usable(c);
            let (mut lo, mut hi) = (0u64, requested.saturating_sub(1));
            while lo < hi {
                let mid = lo + (hi - lo).div_ceil(2);
                if total_at(mid) <= usable {
                    lo = mid;
                } else {
                    hi = mid - 1;
                }
            }
            (lo > 0 && total_at(lo) <= usable).then_some(lo)
        }
        _ => None,
    };
    let shortfall = verdicts
        .iter()
        .filter(|v| v.reason != VerdictReason::SoftwareDevice)
        .map(|v| req.total.saturating_sub(v.usable_bytes))
        .min();
    for v in &mut verdicts {
        v.fits = false;
    }
    Selection {
        required_bytes: req.total,
        plan: Plan {
            kind: PlanKind::None,
            placements: Vec::new(),
            gpu_layers: None,
            max_context,
            shortfall_bytes: shortfall,
            capacity: None,
        },
        candidates: verdicts,
    }
}

/// A plan that fits: its kind, each device's share and the layers on GPUs.
fn fitting(
    req: &Requirement,
    kind: PlanKind,
    placements: Vec<Placement>,
    gpu_layers: Option<u64>,
    candidates: Vec<Verdict>,
) -> Selection {
    Selection {
        required_bytes: req.total,
        plan: Plan {
            kind,
            placements,
            gpu_layers,
            max_context: None,
            shortfall_bytes: None,
            capacity: None,
        },
        candidates,
    }
}

/// Each device's share of a layer split: its layers, overhead and activations, and on the first
/// device the weights outside the layers. Devices given no layer are left out.
fn layer_placements(devs: &[&Candidate], layers: &[u64], m: &ModelNeeds) -> Vec<Placement> {
    devs.iter()
        .zip(layers)
        .enumerate()
        .filter(|(_, (_, l))| **l > 0)
        .map(|(i, (c, l))| Placement {
            host: c.host.clone(),
            backend: c.backend,
            device: c.device,
            bytes: m.overhead
                + m.activations
                + l * m.per_layer
                + if i == 0 { m.non_layer } else { 0 },
            layers: Some(*l),
        })
        .collect()
}

/// Layers per device in proportion to usable memory (largest remainder), moved to devices with
/// room when a share does not fit; `None` when the layers cannot all be placed. Device 0 also
/// holds the non-layer weights; every device holds overhead and activations.
pub fn split_layers(m: &ModelNeeds, usable: &[u64]) -> Option<Vec<u64>> {
    let capacity: Vec<u64> = usable
        .iter()
        .enumerate()
        .map(|(i, &u)| {
            let fixed = m.overhead + m.activations + if i == 0 { m.non_layer } else { 0 };
            u.saturating_sub(fixed) / m.per_layer.max(1)
        })
        .collect();
    if capacity.iter().sum::<u64>() < m.layers {
        return None;
    }
    let total: u128 = usable.iter().map(|&u| u128::from(u)).sum();
    let mut layers: Vec<u64> = usable
        .iter()
        .map(|&u| (u128::from(m.layers) * u128::from(u) / total.max(1)) as u64)
        .collect();
    let mut left = m.layers - layers.iter().sum::<u64>();
    let mut i = 0;
    let n = layers.len();
    while left > 0 {
        layers[i % n] += 1;
        left -= 1;
        i += 1;
    }
    // Move layers from over-full devices to devices with room.
    for d in 0..layers.len() {
        while layers[d] > capacity[d] {
            let to = (0..layers.len()).find(|&j| layers[j] < capacity[j])?;
            layers[d] -= 1;
            layers[to] += 1;
        }
    }
    Some(layers)
}

/// Why `select_backend_for_model` or `init_backend_with_memory_check` found nothing.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("no backend can hold {}: {}", format_bytes(*required), tried.iter().map(|(b, why)| format!("{b}: {why}")).collect::<Vec<_>>().join("; "))]
pub struct SelectError {
    /// Bytes the caller asked to fit.
    pub required: u64,
    /// Every backend (`cuda`) or device (`cuda:0`) tried, and why it was rejected.
    pub tried: Vec<(String, Rejected)>,
}

/// Why one backend or device was passed over by the seed API.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Rejected {
    /// The backend is unavailable here (its discovery reason).
    #[error("{0}")]
    Unavailable(String),
    /// The device's usable (or free) memory is below the request.
    #[error("{} usable", format_bytes(*usable))]
    TooSmall {
        /// What could be used.
        usable: u64,
    },
    /// A GPU API implemented in software on the CPU; the cpu backend is the better choice.
    #[error("a software device on the CPU")]
    SoftwareDevice,
    /// The device could not be opened or queried.
    #[error("{0}")]
    Failed(String),
}

/// Seed 000: the backend and device that can hold `required_bytes` on this machine, under the
/// default policy.
pub fn select_backend_for_model(required_bytes: u64) -> Result<(BackendKind, usize), SelectError> {
    let found = crate::backend::discover_backends();
    let candidates = candidates_from_discovery(&found, "localhost");
    let selection = plan(
        &Requirement {
            total: required_bytes,
            model: None,
        },
        &candidates,
        &Policy::default(),
        None,
    );
    match selection.plan.kind {
        PlanKind::Single => {
            let p = &selection.plan.placements[0];
            Ok((p.backend, p.device))
        }
        _ => {
            let mut tried: Vec<(String, Rejected)> = unavailable_backends(&found);
            tried.extend(selection.candidates.iter().map(|v| {
                let why = match v.reason {
                    VerdictReason::SoftwareDevice => Rejected::SoftwareDevice,
                    VerdictReason::Fits | VerdictReason::TooSmall => Rejected::TooSmall {
                        usable: v.usable_bytes,
                    },
                };
                (format!("{}:{}", v.backend, v.device), why)
            }));
            Err(SelectError {
                required: required_bytes,
                tried,
            })
        }
    }
}

/// Seed 000: opens the preferred (or best) device that has `required_bytes` free right now.
/// The error lists every backend tried and why it failed.
pub fn init_backend_with_memory_check(
    preference: Option<BackendKind>,
    required_bytes: u64,
) -> Result<std::sync::Arc<dyn crate::device::DeviceMemory>, SelectError> {
    let found = crate::backend::discover_with(&crate::backend::DiscoverOptions::default());
    let mut tried: Vec<(String, Rejected)> = Vec::new();
    let mut order: Vec<(BackendKind, usize, u64)> = found
        .iter()
        .filter(|b| {
            b.available && b.backend != BackendKind::Nvml && b.backend != BackendKind::Metal
        })
        .flat_map(|b| {
            b.devices
                .iter()
                .map(move |d| (b.backend, d.index, d.free_or_total()))
        })
        .collect();
    order.sort_by_key(|(b, _, free)| {
        (
            preference != Some(*b),
            *b == BackendKind::Cpu,
            std::cmp::Reverse(*free),
        )
    });
    tried.extend(unavailable_backends(&found));
    for (backend, index, _) in order {
        let spec = DeviceSpec::Device { backend, index };
        match crate::backend::open_device(&spec) {
            Ok(dev) => match dev.mem_info() {
                Ok((free, _)) if free >= required_bytes => return Ok(dev),
                Ok((free, _)) => {
                    tried.push((spec.to_string(), Rejected::TooSmall { usable: free }))
                }
                Err(e) => tried.push((spec.to_string(), Rejected::Failed(e.to_string()))),
            },
            Err(e) => tried.push((spec.to_string(), Rejected::Failed(e.reason))),
        }
    }
    Err(SelectError {
        required: required_bytes,
        tried,
    })
}

fn unavailable_backends(found: &[crate::backend::BackendInfo]) -> Vec<(String, Rejected)> {
    found
        .iter()
        .filter(|b| !b.available)
        .map(|b| {
            let why = b.reason.clone().unwrap_or_default();
            (b.backend.to_string(), Rejected::Unavailable(why))
        })
        .collect()
}
