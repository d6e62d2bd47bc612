//! Planning for llama.cpp on one host's GPUs and its system RAM: `-ngl` and `-ts` as
//! llama.cpp's own fit chooses them (every layer when each GPU keeps its margin, else the most
//! that do, filled from the last GPU, the rest in system RAM), each device's model, KV-cache and
//! compute bytes as llama.cpp places them. A model with routed experts is fitted as
//! llama.cpp fits one ([`super::fit`]): experts to system RAM first, `-ot` overrides.
//! Where that leaves more in RAM than the GPUs of several hosts together would, one server
//! reaches the other hosts' GPUs as RPC devices ([`super::LlamaCppRun::rpc`]).

use serde::Serialize;

use super::ctx::fit_context;
use super::device::{LlamaDevice, RulesBasis, UnmeasuredRule};
use super::draft::{add_uses, DraftAccount, LlamaCppDraft};
use super::fit::{fit_moe_from, TensorOverride};
use super::placement::{device_uses, fit_devices_from, layer_devices, DeviceUse, Offload};
use super::projector::{projector_compute_under, projector_use, ProjectorAccount};
use super::replay::BufferRules;
use super::run::LlamaCppRun;
use verdicts::{none, ram_too_small, verdicts};

mod verdicts;
use crate::backend::BackendKind;
use crate::device::VulkanLimits;
use crate::model::{LayerWeights, ModelArch, ModelSource, DEFAULT_WEIGHT_PRECISION};
use crate::plan::engines::{EnginePlanner, EstimateOverflow, Planned, Settings};
use crate::plan::{
    Accounting, Candidate, Capacity, EngineAccount, Placement, Plan, PlanKind, Selection,
};

/// llama.cpp's own margin per device (`--fit-target`, 1024 MiB).
pub const FIT_MARGIN: u64 = 1 << 30;

/// How `llama-server` is started, beyond the model's settings.
#[derive(Debug, Clone, Default)]
pub struct LlamaCppConfig {
    /// Started without `-c`: llama.cpp's fit chooses the context, from the model's trained one
    /// down to this minimum (`--fit-ctx`). `None`: the context is the one asked for.
    pub fit_ctx_min: Option<u64>,
    /// The ggml backend the GPUs run (`None`: from the GPUs, [`LlamaDevice::Cuda`] for CUDA,
    /// ROCm and simulated ones).
    pub device: Option<LlamaDevice>,
    /// `-fa off`: the attention scores computed whole (llama.cpp's `auto` turns flash
    /// attention on for every backend modelled here).
    pub flash_attention_off: bool,
    /// `--no-op-offload`: the GPUs take no operator from host-resident weights.
    pub no_op_offload: bool,
    /// `-sm none`: llama.cpp keeps to a host's first GPU (`-mg 0`), the rest in system RAM.
    pub one_gpu: bool,
    /// `-md`: a draft model for speculative decoding, fitted beside the model.
    pub draft: Option<LlamaCppDraft>,
    /// `--mmproj`: a multimodal projector, which llama-server loads through mtmd on the first
    /// GPU and keeps free beside its fit's margin there.
    pub projector: Option<crate::model::Projector>,
    /// `--lora`: LoRA adapters applied to the model, each factor loaded on the device of the
    /// matrix it adapts.
    pub lora: Vec<crate::model::LoraAdapter>,
    /// `--fit-target` (`LLAMA_ARG_FIT_TARGET`): the margin llama.cpp's fit keeps free on each
    /// GPU, in bytes (`None`: its default, [`FIT_MARGIN`]).
    pub fit_margin: Option<u64>,
}

/// llama.cpp's default minimum for the context its fit chooses (`--fit-ctx`).
pub const FIT_CTX_MIN: u64 = 4096;

/// What llama.cpp would hold on the GPU and the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LlamaCppAccount {
    /// `-ngl`: layers on the GPUs, the output layer counted as one (`layers + 1`: all).
    pub n_gpu_layers: u64,
    /// `-ts`: each GPU's layers, when the fit set them (else llama.cpp splits by free memory).
    pub tensor_split: Option<Vec<u64>>,
    /// `-ot`: feed-forward weights the fit moves off their layer's GPU (experts to system
    /// RAM first), in llama.cpp's order.
    pub overrides: Vec<TensorOverride>,
    /// The model's repeating layers (the output layer's index in `overrides`).
    pub repeating_layers: u64,
    /// The margin the fit keeps free on each GPU.
    pub margin_bytes: u64,
    /// `-c`: the context planned, all sequences' together (llama.cpp's own choice when it fits
    /// the context).
    pub context: u64,
    /// Whether llama.cpp's fit chose `context` (`llama-server` started without `-c`).
    pub context_fitted: bool,
    /// Each GPU's share, in order.
    pub devices: Vec<DeviceUse>,
    /// The host's share (the token embeddings are always there).
    pub host: DeviceUse,
    /// llama.cpp's `-fa auto`: on, as on every GPU backend that has it.
    pub flash_attention: bool,
    /// Whether the GPUs take operators from host-resident weights (off with
    /// `--no-op-offload`, and on backends without `offload_op`).
    pub op_offload: bool,
    /// The ggml backend whose buffer rules the GPUs' compute buffers follow.
    pub device_rules: LlamaDevice,
    /// A Vulkan device's limits those rules follow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vulkan_limits: Option<crate::device::VulkanLimits>,
    /// Whether those rules were measured against llama.cpp or read from the backend's source.
    pub device_rules_basis: RulesBasis,
    /// Rules these figures follow that were read from the backend's source, not measured.
    pub unmeasured_rules: Vec<UnmeasuredRule>,
    /// The `-np` sequences share one KV cache (`--kv-unified`); else each keeps a stream of
    /// `context / -np` cells, llama-server's default.
    pub kv_unified: bool,
    /// `-sm none`: the host's first GPU only.
    pub one_gpu: bool,
    /// How many of `devices`, first in llama.cpp's order, are other hosts' GPUs it reaches as
    /// RPC devices (`--rpc`).
    pub rpc_devices: u64,
    /// The ggml backend behind each of those RPC devices, whose buffer rules it follows
    /// (without their reordering, fused kernels or operator offload).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rpc_device_rules: Vec<LlamaDevice>,
    /// The draft model beside it (`-md`), whose bytes `devices` and `host` include.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub draft: Option<DraftAccount>,
    /// The multimodal projector beside it (`--mmproj`), whose bytes the first GPU's share
    /// (the host's without one) includes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub projector: Option<Box<super::projector::ProjectorAccount>>,
    /// The LoRA adapters applied (`--lora`), whose bytes `devices` and `host` include.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lora: Option<Box<super::lora::LoraAccount>>,
}

/// The ggml backend llama.cpp runs `candidates`' GPUs with: ggml-cuda's buffers where any is a
/// CUDA or ROCm GPU (simulated GPUs are CUDA's), else ggml-metal's on an Apple GPU, else
/// ggml-vulkan's on a Vulkan GPU (its driver's limits), else the CPU backend's. `asked` is `--llamacpp-device`'s choice; a Vulkan
/// one takes the limits of a Vulkan device among `candidates` where there is one.
fn device_of<'c>(
    asked: Option<LlamaDevice>,
    candidates: impl Iterator<Item = &'c Candidate> + Clone,
) -> LlamaDevice {
    let vulkan = |gpu_only: bool| {
        candidates
            .clone()
            .find(|c| c.backend == BackendKind::Vulkan && (c.is_gpu() || !gpu_only))
    };
    // A Vulkan device whose limits are not known (an older inventory) is planned with the
    // widest a driver reports.
    let limits = |c: &Candidate| c.vulkan_limits.unwrap_or(VulkanLimits::UNSEEN);
    match asked {
        Some(LlamaDevice::Vulkan(unseen)) => LlamaDevice::Vulkan(
            vulkan(false)
                .and_then(|c| c.vulkan_limits)
                .unwrap_or(unseen),
        ),
        Some(d) => d,
        None if candidates
            .clone()
            .any(|c| matches!(c.backend, BackendKind::Cuda | BackendKind::Rocm)) =>
        {
            LlamaDevice::Cuda
        }
        None if candidates.clone().any(|c| c.backend == BackendKind::Metal) => LlamaDevice::Metal,
        None => vulkan(true).map_or(LlamaDevice::CpuRules, |c| LlamaDevice::Vulkan(limits(c))),
    }
}

/// llama.cpp's planner: `llama-server` started as the configuration says.
#[derive(Debug, Clone, Copy)]
pub struct LlamaCpp<'a>(pub &'a LlamaCppConfig);

impl EnginePlanner for LlamaCpp<'_> {
    fn plan(
        &self,
        source: &ModelSource,
        settings: &Settings,
        candidates: &[Candidate],
    ) -> Result<Planned, EstimateOverflow> {
        Ok(select_llamacpp(source, settings, candidates, self.0)
            .map_or(Planned::Unmodelled, |s| Planned::Own(Box::new(s))))
    }
}

/// Plans `source` for llama.cpp over `candidates`; `None` when llama.cpp's graph for the
/// architecture is not replayed (the generic rule then plans it).
pub fn select_llamacpp(
    source: &ModelSource,
    settings: &Settings,
    candidates: &[Candidate],
    cfg: &LlamaCppConfig,
) -> Option<Selection> {
    let arch = &source.arch;
    // Without a GGUF, a llama-quantize file type (`--dtype q4_k_m`) is the file it would write,
    // tensor by tensor; other precisions are counted at their rate.
    let weights = source.layer_weights.clone().unwrap_or_else(|| {
        LayerWeights::from_arch(arch, settings.dtype.unwrap_or(DEFAULT_WEIGHT_PRECISION))
    });
    // The adapters' factors are fitted with the matrices they adapt.
    let weights = super::lora::adapted(weights, &cfg.lora);
    let batch = settings.batch.max(1);
    let s = server_settings(settings, candidates, cfg, arch);
    let all = arch.num_layers + 1;
    let (best, ram_short) = best_host(&weights, arch, &s, candidates, cfg)?;
    // Without a plan, the RAM-short fit's shares are still what each device is judged by.
    let shown = match (&best, &ram_short) {
        (Some(b), _) => Some((b, true)),
        (None, Some(r)) => Some((r, false)),
        (None, None) => None,
    };
    let draft = cfg.draft.as_ref();
    let verdicts = verdicts((&weights, draft), arch, &s, candidates, shown)?;
    let Some(f) = best else {
        return Some(match ram_short {
            Some(short) => ram_too_small(verdicts, &short),
            None => none(verdicts, (&weights, draft), arch, &s, settings),
        });
    };
    let s = Settings {
        context: f.context,
        llamacpp: LlamaCppRun {
            device: f.rules.0,
            rpc: f.rules.1.clone(),
            ..s.llamacpp
        },
        ..s
    };
    // Repeating layers only: -ngl counts the output layer first, so -ngl 26 of 32 leaves 7
    // repeating layers on the CPU.
    let on_gpus: u64 = f.layers.iter().sum();
    let mut placements: Vec<Placement> = f
        .gpus
        .iter()
        .zip(&f.uses)
        .zip(&f.layers)
        .map(|((g, u), &n)| placement(g, u.total(), n))
        .collect();
    // Across hosts the server's own GPUs come first (the launch runs it there), the other hosts'
    // after as its RPC devices; the fit's split keeps llama.cpp's order.
    let server = f.gpus.last().map(|g| g.host.as_str());
    let across = f.rpc_devices() > 0;
    placements.sort_by_key(|p| Some(p.host.as_str()) != server);
    let offloaded = f.ngl < all || !f.overrides.is_empty();
    if offloaded {
        placements.extend(
            f.ram
                .map(|h| placement(h, f.host.total(), arch.num_layers - on_gpus)),
        );
    }
    Some(Selection {
        required_bytes: f.required(),
        plan: Plan {
            kind: match (offloaded, f.gpus.len()) {
                _ if across => PlanKind::CrossHost,
                // Without a GPU the host's RAM holds it all.
                (_, 0) => PlanKind::Single,
                (true, _) => PlanKind::CpuOffload,
                (false, 1) => PlanKind::Single,
                (false, _) => PlanKind::LayerSplit,
            },
            placements,
            gpu_layers: Some(f.ngl),
            max_context: None,
            shortfall_bytes: None,
            capacity: capacity(arch, settings, s.context.saturating_mul(s.batch)),
            account: Some(EngineAccount::LlamaCpp(account(
                &f,
                (arch, &weights),
                &s,
                cfg,
                batch,
            ))),
            accounting: Accounting::LlamaCpp,
        },
        candidates: verdicts,
    })
}

/// What `llama-server` runs the model as: llama-server's -np sequences each keep a KV stream of
/// -c / -np cells (its default); when its fit chooses the context (-c 0) the plan keeps them in
/// one cache (-kvu), the total being what the fit chooses. -fa auto (on) unless turned off, and
/// logits for the last token of each sequence (llama-server's n_outputs_max), and for the
/// drafted ones with a draft beside it.
fn server_settings(
    settings: &Settings,
    candidates: &[Candidate],
    cfg: &LlamaCppConfig,
    arch: &ModelArch,
) -> Settings {
    let batch = settings.batch.max(1);
    let streams = if cfg.fit_ctx_min.is_none() { batch } else { 1 };
    Settings {
        context: settings.context.saturating_mul(batch / streams),
        batch: streams,
        flash_attention: !cfg.flash_attention_off,
        llamacpp: LlamaCppRun {
            device: device_of(cfg.device, candidates.iter()),
            no_op_offload: cfg.no_op_offload,
            // (With --embedding it keeps every token's: an encoder's outputs stay all of them.)
            outputs: arch.encoder.is_none().then_some(
                cfg.draft
                    .as_ref()
                    .map_or(batch, |d| d.target_outputs(batch)),
            ),
            parallel: batch,
            fit_margin: cfg.fit_margin.unwrap_or(FIT_MARGIN),
            ..settings.llamacpp.clone()
        },
        ..settings.clone()
    }
}

/// llama.cpp's own account of the fit `f` of `weights` of `arch` under `s`, for `batch`
/// sequences asked for: what it chose, each device's share, and the rules they follow.
fn account(
    f: &Fitted<'_>,
    (arch, weights): (&crate::model::ModelArch, &LayerWeights),
    s: &Settings,
    cfg: &LlamaCppConfig,
    batch: u64,
) -> LlamaCppAccount {
    let mut unmeasured = s.llamacpp.device.unmeasured_rules(weights, arch, s);
    for remote in &s.llamacpp.rpc {
        for rule in remote.unmeasured_rules(weights, arch, s) {
            if !unmeasured.contains(&rule) {
                unmeasured.push(rule);
            }
        }
    }
    LlamaCppAccount {
        n_gpu_layers: f.ngl,
        tensor_split: f.split.clone(),
        overrides: f.overrides.clone(),
        repeating_layers: arch.num_layers,
        margin_bytes: s.llamacpp.fit_margin,
        context: s.context.saturating_mul(s.batch),
        kv_unified: batch > 1 && s.batch == 1,
        context_fitted: cfg.fit_ctx_min.is_some(),
        devices: f.uses.clone(),
        host: f.host,
        flash_attention: s.flash_attention,
        device_rules: s.llamacpp.device,
        vulkan_limits: s.llamacpp.device.vulkan_limits(),
        device_rules_basis: s.llamacpp.device.basis(),
        unmeasured_rules: unmeasured,
        op_offload: s.llamacpp.device.offloads_ops() && !s.llamacpp.no_op_offload,
        one_gpu: cfg.one_gpu,
        rpc_devices: f.rpc_devices(),
        rpc_device_rules: s.llamacpp.rpc.clone(),
        projector: cfg.projector.as_ref().zip(f.projector).map(|(p, share)| {
            let on_gpu = !f.gpus.is_empty();
            let rules = if on_gpu {
                s.llamacpp.device.rules()
            } else {
                BufferRules::CPU
            };
            let warmup = projector_compute_under(p, s.flash_attention, rules);
            Box::new(ProjectorAccount::new(p, share, warmup, on_gpu))
        }),
        lora: f
            .lora
            .as_ref()
            .map(|share| Box::new(super::lora::LoraAccount::new(&cfg.lora, share))),
        draft: cfg.draft.as_ref().zip(f.draft.as_ref()).map(|(d, uses)| {
            let (host, devices) = uses
                .split_last()
                .map_or((DeviceUse::default(), &[][..]), |(h, g)| (*h, g));
            DraftAccount {
                model: d.source.name.clone(),
                load: d.load.clone(),
                n_max: d.n_max,
                spec_type: d.spec_type(),
                n_gpu_layers: if devices.is_empty() {
                    0
                } else {
                    d.gpu_layers()
                },
                devices: devices.to_vec(),
                host,
            }
        }),
    }
}

/// Each host's GPUs fitted as llama.cpp would (it takes every GPU it sees): the fit with the
/// most layers on GPUs whose host's RAM holds the rest, and apart the best one whose RAM does
/// not.
type HostFits<'a> = (Option<Fitted<'a>>, Option<Fitted<'a>>);

fn best_host<'a>(
    weights: &LayerWeights,
    arch: &crate::model::ModelArch,
    s: &Settings,
    candidates: &'a [Candidate],
    cfg: &LlamaCppConfig,
) -> Option<HostFits<'a>> {
    let all = arch.num_layers + 1;
    let gpus: Vec<&Candidate> = candidates
        .iter()
        .filter(|c| c.is_gpu() && c.mig_profile.is_none())
        .collect();
    let (mut best, mut ram_short): HostFits<'a> = (None, None);
    if gpus.is_empty() {
        // No GPU anywhere: llama.cpp runs on a host's CPU, the one with the most RAM free.
        let ram = candidates
            .iter()
            .filter(|c| c.backend == BackendKind::Cpu)
            .max_by_key(|c| c.free_bytes.unwrap_or(c.total_bytes))?;
        let f = cpu_only(weights, arch, s, (ram, cfg))?;
        let fits = ram.free_bytes.unwrap_or(ram.total_bytes) >= f.host.total();
        return Some(if fits {
            (Some(f), None)
        } else {
            (None, Some(f))
        });
    }
    let mut hosts: Vec<&str> = gpus.iter().map(|g| g.host.as_str()).collect();
    hosts.dedup();
    for host in hosts {
        let on_host = gpus.iter().copied().filter(|g| g.host == host);
        let group: Vec<&Candidate> = on_host
            .take(if cfg.one_gpu { 1 } else { usize::MAX })
            .collect();
        let ram = candidates
            .iter()
            .find(|c| c.backend == BackendKind::Cpu && c.host == host);
        let f = fitted(weights, arch, s, (group, ram), cfg)?;
        let ram_ok = !f.uses_ram(all)
            || ram.is_some_and(|h| h.free_bytes.unwrap_or(h.total_bytes) >= f.ram_needed());
        if ram_ok && best.as_ref().is_none_or(|b| f.ngl > b.ngl) {
            best = Some(f);
        } else if !ram_ok && ram.is_some() && ram_short.as_ref().is_none_or(|b| f.ngl > b.ngl) {
            ram_short = Some(f);
        }
    }
    // Across hosts where that puts more of the model on GPUs: more layers, or as many with
    // fewer experts left in RAM.
    let on_gpus = |f: &Fitted<'_>| (f.ngl, std::cmp::Reverse(f.overrides.len()));
    let whole = |f: &Fitted<'_>| f.ngl == all && f.overrides.is_empty();
    if !best.as_ref().is_some_and(whole) && !cfg.one_gpu {
        if let Some(f) = across_hosts(weights, arch, s, (candidates, &gpus), cfg) {
            if best.as_ref().is_none_or(|b| on_gpus(&f) > on_gpus(b)) {
                best = Some(f);
            }
        }
    }
    Some((best, ram_short))
}

/// llama.cpp on one host with the other hosts' GPUs as RPC devices (`rpc-server` on each,
/// `--rpc` to them): its fit over every GPU, the RPC devices first as llama.cpp orders them,
/// served from the host whose own GPUs have the most free memory, whose RAM holds what the fit
/// leaves there. The RPC devices follow their own GPUs' buffer rules, but run every op,
/// reorder nothing and take no op on a host weight: layers left in RAM have their products
/// offloaded to the server's first GPU.
fn across_hosts<'a>(
    weights: &LayerWeights,
    arch: &crate::model::ModelArch,
    s: &Settings,
    (candidates, gpus): (&'a [Candidate], &[&'a Candidate]),
    cfg: &LlamaCppConfig,
) -> Option<Fitted<'a>> {
    let free = |c: &Candidate| c.free_bytes.unwrap_or(c.total_bytes);
    let mut hosts: Vec<&str> = gpus.iter().map(|g| g.host.as_str()).collect();
    hosts.dedup();
    if hosts.len() < 2 {
        return None;
    }
    let head = *hosts.iter().max_by_key(|h| {
        gpus.iter()
            .filter(|g| g.host == **h)
            .map(|g| free(g))
            .sum::<u64>()
    })?;
    let (local, remote): (Vec<&Candidate>, Vec<&Candidate>) =
        gpus.iter().copied().partition(|g| g.host == head);
    let s = Settings {
        llamacpp: LlamaCppRun {
            device: device_of(cfg.device, local.iter().copied()),
            // Each other host's GPU by its own backend.
            rpc: remote
                .iter()
                .map(|&c| device_of(None, std::iter::once(c)))
                .collect(),
            ..s.llamacpp.clone()
        },
        ..s.clone()
    };
    let group: Vec<&Candidate> = remote.into_iter().chain(local).collect();
    let ram = candidates
        .iter()
        .find(|c| c.backend == BackendKind::Cpu && c.host == head);
    let f = fitted(weights, arch, &s, (group, ram), cfg)?;
    let ram_ok = ram.is_some_and(|h| free(h) >= f.ram_needed());
    // An RPC device whose memory is its host's RAM (a Mac's GPU) takes its share there.
    let remote_ok = hosts.iter().filter(|h| **h != head).all(|h| {
        let share = f.shared_on(h);
        share == 0
            || candidates
                .iter()
                .find(|c| c.backend == BackendKind::Cpu && c.host == *h)
                .is_some_and(|r| free(r) >= share)
    });
    (ram_ok && remote_ok).then_some(f)
}

/// What the plan serves: `kv_tokens` of cache for the batch's sequences; none for an encoder,
/// which keeps no KV cache.
fn capacity(
    arch: &crate::model::ModelArch,
    settings: &Settings,
    kv_tokens: u64,
) -> Option<Capacity> {
    let per_sequence = kv_tokens / settings.batch.max(1);
    arch.encoder.is_none().then_some(Capacity {
        context: per_sequence,
        batch: settings.batch,
        kv_tokens,
        max_concurrent_sequences: settings.batch,
        max_context_at_batch: per_sequence,
        trained_context: arch.max_position_embeddings,
        max_concurrency_centi: None,
    })
}

/// One host's GPUs as llama.cpp's fit would use them.
struct Fitted<'a> {
    gpus: Vec<&'a Candidate>,
    ram: Option<&'a Candidate>,
    /// `-ngl` (layers + 1: all).
    ngl: u64,
    /// `-ts`, when the fit set one.
    split: Option<Vec<u64>>,
    /// `-ot`, for a model with routed experts.
    overrides: Vec<TensorOverride>,
    /// Each GPU's repeating layers.
    layers: Vec<u64>,
    uses: Vec<DeviceUse>,
    host: DeviceUse,
    /// `-c`, all sequences' together.
    context: u64,
    /// The rules the local GPUs' buffers follow, and the RPC devices before them.
    rules: (LlamaDevice, Vec<LlamaDevice>),
    /// The draft's share of `uses` and `host` (each GPU's, then the host's), with one.
    draft: Option<Vec<DeviceUse>>,
    /// The projector's share of the first GPU's (the host's without one), with one.
    projector: Option<DeviceUse>,
    /// The LoRA adapters' bytes on each GPU, then the host, with any.
    lora: Option<Vec<u64>>,
}

impl Fitted<'_> {
    /// The GPUs of other hosts than the server's (its own come last in the fit's order).
    fn rpc_devices(&self) -> u64 {
        let server = self.gpus.last().map(|g| g.host.as_str());
        self.gpus
            .iter()
            .filter(|g| Some(g.host.as_str()) != server)
            .count() as u64
    }

    /// What the GPUs of `host` whose memory is its RAM (Apple silicon, integrated GPUs) take
    /// of it.
    fn shared_on(&self, host: &str) -> u64 {
        self.gpus
            .iter()
            .zip(&self.uses)
            .filter(|(g, _)| g.unified_memory && g.host == host)
            .map(|(_, u)| u.total())
            .sum()
    }

    /// [`Self::shared_on`] the server's host (its own GPUs come last in the fit's order).
    fn shared(&self) -> u64 {
        self.gpus.last().map_or(0, |g| self.shared_on(&g.host))
    }

    /// What the plan takes of the host's RAM: its own part, and the share of a GPU that is
    /// that RAM.
    fn ram_needed(&self) -> u64 {
        self.host.total().saturating_add(self.shared())
    }

    /// Whether the plan is judged by the host's RAM (of `all` layers, the output's included):
    /// layers or experts left there, or a GPU that is that RAM.
    fn uses_ram(&self, all: u64) -> bool {
        self.ngl < all || !self.overrides.is_empty() || self.shared() > 0
    }

    /// What the model needs of one device: the largest GPU share, or without GPUs the RAM's.
    fn required(&self) -> u64 {
        self.uses
            .iter()
            .map(DeviceUse::total)
            .max()
            .unwrap_or(self.host.total())
    }
}

/// mtmd's weights and image buffer on the first GPU, added to the fit's margin there before
/// the context or the layers are fitted, as llama-server adds them; the projector's share.
fn projector_margin(cfg: &LlamaCppConfig, s: &Settings, margins: &mut [u64]) -> Option<DeviceUse> {
    let projector = cfg
        .projector
        .as_ref()
        .map(|p| projector_use(p, s.flash_attention, s.llamacpp.device.rules()));
    if let (Some(p), Some(m)) = (&projector, margins.first_mut()) {
        *m += p.total();
    }
    projector
}

/// Each of `gpus` GPUs' repeating layers under `offload` (the output layer not counted).
fn layers_per_gpu(arch: &crate::model::ModelArch, offload: &Offload, gpus: usize) -> Vec<u64> {
    let placed = layer_devices(arch.num_layers, offload);
    let repeating = &placed[..placed.len().saturating_sub(1)];
    (0..gpus)
        .map(|d| repeating.iter().filter(|&&x| x == Some(d)).count() as u64)
        .collect()
}

/// One host's GPUs fitted as llama.cpp fits them: the context first where llama.cpp chooses
/// it, then the layers (and a model's experts) unless that fit ended there.
fn fitted<'a>(
    weights: &LayerWeights,
    arch: &crate::model::ModelArch,
    s: &Settings,
    (gpus, ram): (Vec<&'a Candidate>, Option<&'a Candidate>),
    cfg: &LlamaCppConfig,
) -> Option<Fitted<'a>> {
    let all = arch.num_layers + 1;
    let free: Vec<u64> = gpus
        .iter()
        .map(|g| g.free_bytes.unwrap_or(g.total_bytes))
        .collect();
    let mut margins = vec![s.llamacpp.fit_margin; free.len()];
    let projector = projector_margin(cfg, s, &mut margins);
    let mut done = false;
    let mut s = s.clone();
    // After its context fit llama.cpp fills the devices without checking its defaults again.
    let check_defaults = cfg.fit_ctx_min.is_none();
    // The draft beside the model at a context, as the fit measures it.
    let base = s.clone();
    let draft_at = |n_ctx: u64| {
        let at = Settings {
            context: n_ctx,
            ..base.clone()
        };
        cfg.draft.as_ref()?.uses(&at, &free)
    };
    if let Some(min) = cfg.fit_ctx_min {
        // llama.cpp starts from the trained context (the context asked for when the model
        // states none).
        let max = arch.max_position_embeddings.unwrap_or(s.context);
        let extra = cfg
            .draft
            .as_ref()
            .map(|_| &draft_at as super::ctx::Extra<'_>);
        let fit = fit_context(weights, arch, &s, (&free, &margins), (max, min), extra)?;
        s.context = fit.n_ctx;
        done = fit.done;
    }
    // With the context set, the draft's share is what the layers' fit keeps free beside the
    // margin.
    let draft = match &cfg.draft {
        Some(_) => Some(draft_at(s.context)?),
        None => None,
    };
    for (m, d) in margins.iter_mut().zip(draft.iter().flatten()) {
        *m += d.total();
    }
    let s = &s;
    let (n_gpu_layers, split, overrides, moves) = if done {
        (None, None, Vec::new(), Vec::new())
    } else if arch.moe.is_some() {
        let fit = fit_moe_from(weights, arch, s, (&free, &margins), check_defaults)?;
        let moves = fit.moves();
        (fit.n_gpu_layers, fit.tensor_split, fit.overrides, moves)
    } else {
        let fit = fit_devices_from(weights, arch, s, &free, &margins, check_defaults)?;
        (fit.n_gpu_layers, fit.tensor_split, Vec::new(), Vec::new())
    };
    #[expect(
        clippy::cast_precision_loss,
        reason = "llama.cpp splits in f32; memory and layer counts as it does"
    )]
    let offload = Offload {
        n_gpu_layers: n_gpu_layers.unwrap_or(all),
        tensor_split: match &split {
            Some(t) => t.iter().map(|&n| n as f32).collect(),
            None => free.iter().map(|&f| f as f32).collect(),
        },
        kv_offload: true,
        moves,
    };
    let mut uses = device_uses(weights, arch, s, &offload)?;
    let lora = super::lora::lora_share(weights, &cfg.lora, (arch, s), Some(&offload));
    if let Some(d) = &draft {
        add_uses(&mut uses, d);
    }
    if let Some(p) = &projector {
        add_uses(&mut uses[..1], std::slice::from_ref(p));
    }
    let host = uses.pop()?;
    let layers = layers_per_gpu(arch, &offload, gpus.len());
    Some(Fitted {
        gpus,
        ram,
        ngl: offload.n_gpu_layers,
        split,
        overrides,
        layers,
        uses,
        host,
        context: s.context,
        rules: (s.llamacpp.device, s.llamacpp.rpc.clone()),
        draft,
        projector,
        lora,
    })
}

/// llama.cpp on a host without GPUs (`-ngl 0`, and no device to take an operator): the
/// weights, the KV cache and the CPU backend's compute buffer in system RAM.
fn cpu_only<'a>(
    weights: &LayerWeights,
    arch: &crate::model::ModelArch,
    s: &Settings,
    (ram, cfg): (&'a Candidate, &LlamaCppConfig),
) -> Option<Fitted<'a>> {
    let mut host = super::placement::on_cpu(weights, arch, s)?;
    let draft = match &cfg.draft {
        Some(d) => Some(d.uses(s, &[])?),
        None => None,
    };
    if let Some(d) = &draft {
        add_uses(std::slice::from_mut(&mut host), d);
    }
    let projector = cfg
        .projector
        .as_ref()
        .map(|p| projector_use(p, s.flash_attention, BufferRules::CPU));
    if let Some(p) = &projector {
        add_uses(std::slice::from_mut(&mut host), std::slice::from_ref(p));
    }
    Some(Fitted {
        gpus: Vec::new(),
        ram: Some(ram),
        ngl: 0,
        split: None,
        overrides: Vec::new(),
        layers: Vec::new(),
        uses: Vec::new(),
        host,
        context: s.context,
        rules: (s.llamacpp.device, s.llamacpp.rpc.clone()),
        draft,
        projector,
        lora: super::lora::lora_share(weights, &cfg.lora, (arch, s), None),
    })
}

fn placement(c: &Candidate, bytes: u64, layers: u64) -> Placement {
    Placement {
        host: c.host.clone(),
        backend: c.backend,
        device: c.device,
        bytes,
        layers: Some(layers),
    }
}
