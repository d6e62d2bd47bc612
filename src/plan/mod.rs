//! Choosing where a model fits: one device, tensor parallel over identical devices, a layer
//! split over unequal ones or across hosts, or partial CPU offload (`strategy/`, tried in that
//! order) — and saying why every other choice was rejected; then what the plan can serve
//! ([`capacity`]) and how to launch it ([`launch`]). How much of a device a plan may use is the
//! [`Policy`]. Pure computation over device descriptions: discovery and inventories
//! ([`read_inventory`]) feed it; only the design documents' calls ([`select_backend_for_model`],
//! [`init_backend_with_memory_check`]) discovers and opens devices itself.

mod by_design;
mod capacity;
mod demand;
pub mod engines;
mod inventory;
pub mod launch;
mod policy;
mod strategy;
mod suggest;

use serde::Serialize;

pub use by_design::{
    estimate_inference_memory, init_backend_with_memory_check, select_backend_for_model, Rejected,
    SelectError,
};
pub use capacity::capacity;
pub use demand::{select, select_for_engine, Demand};
pub use inventory::{
    candidates_from_discovery, read_inventories, read_inventory, read_inventory_with_notes,
    HeldBack, InventoryError, MAX_CSV_LINE, MAX_INVENTORY_DEVICES, MAX_NODE_DEVICES,
};
pub use policy::{Policy, Usable, UsableRule};
pub use strategy::split_layers;
pub use suggest::{
    best_dtype, longest_context, most_sequences, suggest, suggest_training,
    Request as SuggestRequest, Suggestion,
};

use crate::backend::{BackendKind, DeviceType};
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
    /// A Vulkan device's buffer limits, as its driver reports them (llama.cpp's Vulkan backend
    /// follows them).
    pub vulkan_limits: Option<crate::device::VulkanLimits>,
    /// The device's memory is the host's RAM (Apple silicon, integrated GPUs): what a plan puts
    /// on it comes out of the same RAM as what it leaves on the host.
    pub unified_memory: bool,
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
            vulkan_limits: None,
            unified_memory: false,
        }
    }

    /// A simulated `gpu` (`sim:h100`): its product name, backend and driver-reported total.
    pub fn sim_gpu(index: usize, gpu: &crate::backend::KnownGpu) -> Self {
        Candidate {
            backend: match gpu.vendor {
                crate::backend::GpuVendor::Nvidia => BackendKind::Cuda,
                crate::backend::GpuVendor::Amd => BackendKind::Rocm,
            },
            name: gpu.product.to_string(),
            ..Candidate::sim(index, gpu.total_bytes)
        }
    }

    /// Simulated system RAM of `capacity` bytes on the host of the simulated GPUs.
    pub fn sim_ram(capacity: u64) -> Self {
        Candidate {
            host: "sim".into(),
            backend: BackendKind::Cpu,
            device: 0,
            name: format!("sim RAM {}", format_bytes(capacity)),
            device_type: DeviceType::Cpu,
            total_bytes: capacity,
            free_bytes: None,
            simulated: true,
            mig_profile: None,
            vulkan_limits: None,
            unified_memory: false,
        }
    }

    pub(crate) fn is_gpu(&self) -> bool {
        self.backend.is_gpu() && self.device_type.is_hardware_gpu()
    }

    /// The GPU model engines tell apart, read from the device name.
    pub fn gpu_model(&self) -> GpuModel {
        if self.name.to_ascii_lowercase().contains("a100") {
            GpuModel::A100
        } else {
            GpuModel::Other
        }
    }
}

/// GPU models an engine's defaults depend on (vLLM keeps an A100 on its small batch defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuModel {
    /// NVIDIA A100 (40 or 80 GB).
    A100,
    /// Any other.
    Other,
}

/// GPUs grouped by host, backend, name and total: the devices that can shard a model evenly.
pub(crate) fn identical_groups<'a>(gpus: &[&'a Candidate]) -> Vec<Vec<&'a Candidate>> {
    let mut groups: Vec<Vec<&Candidate>> = Vec::new();
    for c in gpus {
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
    groups
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
    /// Query heads and the KV heads that must divide (or be divided by) a tensor-parallel
    /// group; 0 where nothing constrains it (no attention, or a latent shared by every head).
    pub heads: (u64, u64),
}

impl ModelNeeds {
    /// Whether `n` ranks can shard the attention: every engine that splits heads (vLLM,
    /// SGLang, TensorRT-LLM) asserts that the query heads divide and that the KV heads divide
    /// or are replicated evenly, so the generic rule must not offer a group they refuse.
    #[must_use]
    pub fn shards_heads(&self, n: u64) -> bool {
        let (q, kv) = self.heads;
        n > 0 && (q == 0 || q % n == 0) && (kv == 0 || kv % n == 0 || n % kv == 0)
    }
}

/// What a model needs on devices, from its estimate: the total for one device and the
/// per-layer structure for splits and offload. The fragmentation reserve (a percentage) grows
/// weights, KV cache and activations in proportion; the runtime overhead is per device and not
/// grown.
#[expect(
    clippy::cast_possible_truncation,
    reason = "a float cast saturates; a scaled u64"
)]
pub fn model_requirement(
    arch: &crate::model::ModelArch,
    b: &crate::plan::engines::Breakdown,
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
            heads: (
                arch.num_heads,
                match arch.attention {
                    crate::model::Attention::Standard { .. } => arch.num_kv_heads,
                    _ => 0,
                },
            ),
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
    /// N GPUs of one host each hold one FSDP2 rank: a shard of the model, its gradients and
    /// optimizer state, and its own micro-batch's activations.
    Sharded,
    /// The GPUs of one host that hold a DDP rank each hold one: the whole model, its
    /// gradients, DDP's buckets and optimizer state, and its own micro-batch's activations.
    DataParallel,
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
    /// The engine's own accounting, when an engine's memory model planned it (JSON: under the
    /// key its variant names).
    #[serde(flatten)]
    pub account: Option<EngineAccount>,
    /// Whose rule judged the plan.
    pub accounting: Accounting,
}

/// An engine's own accounting of a plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum EngineAccount {
    /// vLLM's on one rank of the plan, or of the closest layout when none serves (JSON:
    /// `engine`).
    #[serde(rename = "engine")]
    Vllm(engines::vllm::VllmFit),
    /// llama.cpp's of the GPUs and the host (JSON: `llamacpp`).
    #[serde(rename = "llamacpp")]
    LlamaCpp(engines::LlamaCppAccount),
    /// SGLang's on one rank of the plan, or of the closest layout (JSON: `sglang`).
    #[serde(rename = "sglang")]
    Sglang(engines::sglang::SglangFit),
    /// Ollama's: its choices and llama-server's placement (JSON: `ollama`).
    #[serde(rename = "ollama")]
    Ollama(Box<engines::ollama::OllamaAccount>),
}

impl Plan {
    /// vLLM's accounting, when vLLM planned.
    pub fn vllm(&self) -> Option<&engines::vllm::VllmFit> {
        match &self.account {
            Some(EngineAccount::Vllm(f)) => Some(f),
            _ => None,
        }
    }

    /// SGLang's accounting, when SGLang planned.
    pub fn sglang(&self) -> Option<&engines::sglang::SglangFit> {
        match &self.account {
            Some(EngineAccount::Sglang(f)) => Some(f),
            _ => None,
        }
    }

    /// Ollama's accounting, when Ollama planned.
    pub fn ollama(&self) -> Option<&engines::ollama::OllamaAccount> {
        match &self.account {
            Some(EngineAccount::Ollama(a)) => Some(a),
            _ => None,
        }
    }

    /// llama.cpp's accounting, when llama.cpp planned.
    pub fn llamacpp(&self) -> Option<&engines::LlamaCppAccount> {
        match &self.account {
            Some(EngineAccount::LlamaCpp(a)) => Some(a),
            _ => None,
        }
    }

    /// No plan: what the closest one lacks and the longest context that would fit, by
    /// `accounting`'s rule.
    pub fn none(
        max_context: Option<u64>,
        shortfall_bytes: Option<u64>,
        accounting: Accounting,
    ) -> Self {
        Plan {
            kind: PlanKind::None,
            placements: Vec::new(),
            gpu_layers: None,
            max_context,
            shortfall_bytes,
            capacity: None,
            account: None,
            accounting,
        }
    }
}

impl Verdict {
    /// `c`'s verdict: `needed` bytes against `usable`, headroom their difference.
    pub fn of(
        c: &Candidate,
        usable: Usable,
        needed_bytes: u64,
        fits: bool,
        reason: VerdictReason,
        rank: Option<Rank>,
    ) -> Self {
        Verdict {
            host: c.host.clone(),
            backend: c.backend,
            device: c.device,
            name: c.name.clone(),
            usable_bytes: usable.bytes,
            needed_bytes,
            headroom_bytes: i128::from(usable.bytes) - i128::from(needed_bytes),
            fits,
            reason,
            usable,
            mig_profile: c.mig_profile.clone(),
            rank,
        }
    }
}

/// Whose rule judged a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Accounting {
    /// gpumem's generic usable-memory rule ([`Policy`]): byte counts, llama.cpp plans, and
    /// the layouts an engine's own model does not cover yet.
    Generic,
    /// vLLM 0.33's own accounting ([`engines::vllm`]).
    Vllm,
    /// llama.cpp's own placement and fit ([`engines::llamacpp`]).
    LlamaCpp,
    /// vLLM's tensor-parallel layouts did not serve; the pipeline or offload plan comes from
    /// the generic rule, which vLLM's own accounting does not model yet.
    GenericAfterVllm,
    /// A PyTorch training step on one GPU ([`engines::select_training`]).
    PytorchTraining,
    /// SGLang 0.5.23's own accounting ([`engines::sglang`]).
    Sglang,
    /// Ollama 0.33: its defaults and llama-server's fit ([`engines::ollama`]).
    Ollama,
}

impl Accounting {
    /// The engine release whose rules judged the plan (`None`: the generic rule's).
    pub fn release(self) -> Option<engines::EngineVersion> {
        match self {
            Accounting::Generic => None,
            Accounting::Vllm | Accounting::GenericAfterVllm => Some(engines::vllm::VERSION),
            Accounting::LlamaCpp => Some(engines::llamacpp::VERSION),
            Accounting::PytorchTraining => Some(engines::pytorch::VERSION),
            Accounting::Sglang => Some(engines::sglang::VERSION),
            Accounting::Ollama => Some(engines::ollama::VERSION),
        }
    }
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
    /// The engine's own concurrency figure in hundredths (vLLM's "Maximum concurrency for L
    /// tokens per request: X×"), when an engine's memory model planned it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_concurrency_centi: Option<u64>,
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
    /// The device's place in the chosen plan, when it has one (a tensor-parallel rank).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<Rank>,
}

/// A device's place in an engine's parallel plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Rank {
    /// Its tensor-parallel rank within its stage, from 0.
    pub rank: u64,
    /// The tensor-parallel size.
    pub of: u64,
    /// Its pipeline stage, from 0.
    pub stage: u64,
    /// Pipeline stages.
    pub stages: u64,
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
    /// A GPU API implemented in software that the engine does not run on even when preferred:
    /// llama.cpp's Vulkan backend skips CPU-type devices (lavapipe) unless
    /// `GGML_VK_VISIBLE_DEVICES` names them, and it has no OpenCL backend for PoCL.
    SoftwareDeviceSkipped,
    /// Not a device the engine serves from (vLLM runs on GPUs).
    NotForEngine,
    /// System RAM: llama.cpp keeps the token embeddings and the layers it does not offload
    /// there.
    SystemRam,
    /// System RAM that is also the planned GPU's memory (Apple silicon, an integrated GPU):
    /// `needed_bytes` holds the GPU's share beside what llama.cpp keeps on the host.
    SharedRam,
    /// System RAM that DeepSpeed's ZeRO-Offload keeps every rank's optimizer in (its master
    /// weights, their gradients and Adam's moments): `needed_bytes` for all the host's ranks.
    OffloadedOptimizer,
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

/// Plans where `req` fits among `candidates`. `total_at_context(c)` re-estimates the total for a
/// context of `c` tokens (models only), for the largest-context answer.
pub fn plan(
    req: &Requirement,
    candidates: &[Candidate],
    policy: &Policy,
    total_at_context: Option<(&dyn Fn(u64) -> u64, u64)>,
) -> Selection {
    let verdicts = verdicts(req, candidates, policy);
    let devices = strategy::Devices::new(req, candidates, policy);
    match strategy::first_fit(&devices) {
        Some(found) => Selection {
            required_bytes: req.total,
            plan: Plan {
                kind: found.kind,
                placements: found.placements,
                gpu_layers: found.gpu_layers,
                max_context: None,
                shortfall_bytes: None,
                capacity: None,
                account: None,
                accounting: Accounting::Generic,
            },
            candidates: verdicts,
        },
        None => nothing_fits(&devices, total_at_context, verdicts),
    }
}

/// Every candidate's single-device verdict.
fn verdicts(req: &Requirement, candidates: &[Candidate], policy: &Policy) -> Vec<Verdict> {
    candidates
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
            Verdict::of(c, usable, req.total, fits && !software, reason, None)
        })
        .collect()
}

/// No plan: the largest context that would fit on the best device, and the shortfall of the
/// closest candidate.
fn nothing_fits(
    d: &strategy::Devices<'_>,
    total_at_context: Option<(&dyn Fn(u64) -> u64, u64)>,
    mut verdicts: Vec<Verdict>,
) -> Selection {
    let best = d
        .singles
        .iter()
        .max_by_key(|c| d.policy.usable(c))
        .or(d.whole_gpus.first())
        .copied();
    let max_context = match (best, total_at_context) {
        (Some(c), Some((total_at, requested))) => {
            let usable = d.policy.usable(c);
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
        .filter(|v| {
            !matches!(
                v.reason,
                VerdictReason::SoftwareDevice | VerdictReason::SoftwareDeviceSkipped
            )
        })
        .map(|v| d.req.total.saturating_sub(v.usable_bytes))
        .min();
    for v in &mut verdicts {
        v.fits = false;
    }
    Selection {
        required_bytes: d.req.total,
        plan: Plan::none(max_context, shortfall, Accounting::Generic),
        candidates: verdicts,
    }
}
