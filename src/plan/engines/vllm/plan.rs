//! Planning for vLLM: the layouts vLLM accepts — tensor parallel over identical GPUs of one
//! host, pipeline stages of those inside a host or one stage a host across hosts — each judged
//! by vLLM's own accounting ([`super::fit::fit`]). A model one GPU serves (one request of
//! `max_model_len`) runs on one; one that needs several runs tensor parallel over every GPU of
//! a host vLLM accepts, as people serve it, with the layout on the fewest GPUs named beside it
//! (tensor parallel before pipeline stages). When none serves, the closest says how far it is.

use super::config::{VllmConfig, VllmDtype, VllmGpu, VllmModel};
use super::encoder::VllmVision;
use super::fit::{accepts_tp, fit, FewestGpus, Layout, Unmodelled, VllmFit, VllmOutcome};
use crate::model::{HfVision, ModelArch, ModelSource, Precision, SourceKind};
use crate::plan::engines::{EnginePlanner, EstimateOverflow, Planned, Settings, TermKind};
use crate::plan::{
    identical_groups, Accounting, Candidate, Capacity, EngineAccount, Placement, Plan, PlanKind,
    Rank, Selection, Usable, UsableRule, Verdict, VerdictReason,
};

/// A layout judged: its devices, stage by stage, and vLLM's accounting.
struct Tried<'a> {
    devices: Vec<&'a Candidate>,
    fit: VllmFit,
    cross_host: bool,
}

/// A layout and the devices it would run on (stage by stage, `tp` a stage).
struct LayoutOn<'a> {
    layout: Layout,
    devices: Vec<&'a Candidate>,
    cross_host: bool,
}

/// Every layout vLLM accepts over `gpus`: inside each group of identical GPUs of a host, and
/// across hosts with the same GPUs (one stage a host).
fn layouts<'a>(arch: &ModelArch, gpus: &[&'a Candidate]) -> Vec<LayoutOn<'a>> {
    let accepted = |tp: u64| accepts_tp(arch, tp).is_ok();
    let groups = identical_groups(gpus);
    let mut out = Vec::new();
    for group in &groups {
        let n = group.len() as u64;
        for tp in (1..=n).filter(|&tp| accepted(tp)) {
            for pp in (1..=n / tp).take_while(|&pp| pp <= arch.num_layers.max(1)) {
                out.push(LayoutOn {
                    layout: Layout {
                        tensor_parallel: tp,
                        pipeline_parallel: pp,
                    },
                    devices: group[..usize::try_from(tp * pp).unwrap_or(0)].to_vec(),
                    cross_host: false,
                });
            }
        }
    }
    for (i, first) in groups.iter().enumerate() {
        // Hosts with the same GPUs as `first`'s, `first`'s host leading; each once.
        let same: Vec<&Vec<&Candidate>> = groups[i..]
            .iter()
            .filter(|g| {
                g[0].backend == first[0].backend
                    && g[0].name == first[0].name
                    && g[0].total_bytes == first[0].total_bytes
            })
            .collect();
        let seen = groups[..i].iter().any(|g| {
            g[0].backend == first[0].backend
                && g[0].name == first[0].name
                && g[0].total_bytes == first[0].total_bytes
        });
        if same.len() < 2 || seen {
            continue;
        }
        let smallest = same.iter().map(|g| g.len()).min().unwrap_or(0) as u64;
        for tp in (1..=smallest).filter(|&tp| accepted(tp)) {
            for hosts in 2..=same.len() {
                let take = usize::try_from(tp).unwrap_or(0);
                out.push(LayoutOn {
                    layout: Layout {
                        tensor_parallel: tp,
                        pipeline_parallel: hosts as u64,
                    },
                    devices: same[..hosts]
                        .iter()
                        .flat_map(|g| g[..take].iter().copied())
                        .collect(),
                    cross_host: true,
                });
            }
        }
    }
    out
}

/// vLLM's accounting for every layout over `gpus` the settings allow:
/// `VLLM_PP_LAYER_PARTITION` fixes the number of stages, `--tensor-parallel-size` the ranks a
/// stage.
fn try_layouts<'a>(
    model: &VllmModel<'_>,
    gpus: &[&'a Candidate],
    cfg: &VllmConfig,
) -> Result<Vec<Tried<'a>>, Unmodelled> {
    let stages = cfg.pp_layer_partition.as_ref().map(|p| p.len() as u64);
    layouts(model.arch, gpus)
        .into_iter()
        .filter(|l| stages.is_none_or(|n| l.layout.pipeline_parallel == n))
        .filter(|l| {
            cfg.tensor_parallel
                .is_none_or(|n| l.layout.tensor_parallel == n)
        })
        .map(|l| {
            Ok(Tried {
                fit: fit(model, gpu_of(l.devices[0]), l.layout, cfg)?,
                devices: l.devices,
                cross_host: l.cross_host,
            })
        })
        .collect()
}

/// vLLM's planner: `vllm serve` started as the configuration says.
#[derive(Debug, Clone, Copy)]
pub struct Vllm<'a>(pub &'a VllmConfig);

impl EnginePlanner for Vllm<'_> {
    fn plan(
        &self,
        source: &ModelSource,
        settings: &Settings,
        candidates: &[Candidate],
    ) -> Result<Planned, EstimateOverflow> {
        let b = source.estimate(settings)?;
        let activation_bytes = self.0.dtype.activation_bytes();
        let model = VllmModel {
            arch: &source.arch,
            weights_bytes: loaded_weights(&source.arch, b.weights_bytes, settings.dtype),
            activation_bytes,
            vision: vision_of(source, activation_bytes),
        };
        Ok(select_vllm(&model, candidates, self.0, settings.batch)
            .map_or(Planned::Unmodelled, |s| Planned::Own(Box::new(s))))
    }
}

/// The vision tower vLLM loads beside the language model: its weights at the model's dtype
/// (quantized checkpoints keep their towers in 16 bits), unless the checkpoint's own tensors,
/// which hold it, were counted. A tower gpumem does not model is refused before planning
/// (`check_vllm_vision`).
fn vision_of(source: &ModelSource, activation_bytes: u64) -> Option<VllmVision> {
    match source.hf_vision.as_ref()? {
        HfVision::Modelled { kind, shape } => {
            let bytes = shape.parameters(*kind).saturating_mul(activation_bytes);
            let counted = source.kind == SourceKind::Safetensors;
            Some(VllmVision {
                kind: *kind,
                shape: *shape,
                weights_bytes: if counted { 0 } else { bytes },
                counted_bytes: if counted { bytes } else { 0 },
            })
        }
        // Built only without limits of 0, which `check_vllm_vision` refuses before planning.
        HfVision::Unprofiled { .. } | HfVision::Unmodelled { .. } => None,
    }
}

/// The weights vLLM holds for a checkpoint estimated at `bytes` with every tensor at `asked`:
/// quantized weights, whether by `--quantization fp8` on load or stored so (compressed-tensors,
/// GPTQ, AWQ), leave the token embeddings and the output head in 16 bits.
fn loaded_weights(arch: &ModelArch, bytes: u64, asked: Option<Precision>) -> u64 {
    let Some(p) =
        asked.filter(|_| matches!(VllmDtype::of(asked), VllmDtype::Fp8 | VllmDtype::Stored))
    else {
        return bytes;
    };
    let matrices = if arch.tie_word_embeddings { 1 } else { 2 };
    let elements = u128::from(matrices * arch.vocab_size * arch.hidden_size);
    let quantized = u64::try_from(p.bytes_for(elements)).unwrap_or(u64::MAX);
    let whole = u64::try_from(elements * 2).unwrap_or(u64::MAX);
    bytes.saturating_sub(quantized).saturating_add(whole)
}

/// Plans `model` for vLLM over `candidates` (GPUs only: vLLM does not serve from system RAM
/// here). `batch` is the number of sequences the capacity figures are for.
pub fn select_vllm(
    model: &VllmModel<'_>,
    candidates: &[Candidate],
    cfg: &VllmConfig,
    batch: u64,
) -> Result<Selection, Unmodelled> {
    let gpus: Vec<&Candidate> = candidates
        .iter()
        .filter(|c| c.is_gpu() && c.mig_profile.is_none())
        .collect();
    let tried = try_layouts(model, &gpus, cfg)?;
    let (chosen, alternative) = choose(&tried, cfg);
    let closest = chosen.or_else(|| {
        tried
            .iter()
            .min_by_key(|t| short_of(&t.fit).unwrap_or(u64::MAX))
    });
    let verdicts = verdicts(model, candidates, cfg, chosen)?;
    let required = closest.map_or(0, |t| needed_per_rank(&t.fit));
    let plan = match (chosen, closest) {
        (Some(t), _) => Plan {
            kind: match (t.fit.tensor_parallel, t.fit.pipeline_parallel, t.cross_host) {
                (_, _, true) => PlanKind::CrossHost,
                (_, pp, false) if pp > 1 => PlanKind::LayerSplit,
                (tp, _, _) if tp > 1 => PlanKind::TensorParallel,
                _ => PlanKind::Single,
            },
            placements: t
                .devices
                .iter()
                .enumerate()
                .map(|(i, c)| Placement {
                    host: c.host.clone(),
                    backend: c.backend,
                    device: c.device,
                    bytes: t.fit.term(TermKind::Budget),
                    layers: stage_of(&t.fit, i)
                        .and_then(|s| t.fit.stage_layers.get(s))
                        .copied(),
                })
                .collect(),
            gpu_layers: Some(model.arch.num_layers),
            max_context: None,
            shortfall_bytes: None,
            capacity: Some(capacity(
                &t.fit,
                cfg.max_model_len,
                batch,
                model.arch.max_position_embeddings,
            )),
            account: Some(EngineAccount::Vllm(VllmFit {
                fewest_gpus: alternative,
                ..t.fit.clone()
            })),
            accounting: Accounting::Vllm,
        },
        (None, closest) => {
            let max_context = closest.and_then(|t| match t.fit.outcome {
                VllmOutcome::ModelLenTooLong {
                    estimated_max_model_len,
                    ..
                } if estimated_max_model_len > 0 => Some(estimated_max_model_len),
                VllmOutcome::LongerThanTrained { trained } => Some(trained),
                _ => None,
            });
            let shortfall = closest.and_then(|t| short_of(&t.fit));
            Plan {
                account: closest.map(|t| EngineAccount::Vllm(t.fit.clone())),
                ..Plan::none(max_context, shortfall, Accounting::Vllm)
            }
        }
    };
    Ok(Selection {
        required_bytes: required,
        plan,
        candidates: verdicts,
    })
}

/// The layout to serve on, and the one on the fewest GPUs when that is another. A model one
/// GPU holds runs on one; one that needs several is served as people serve it, tensor parallel
/// over every GPU of the host vLLM accepts, with the fewest-GPU layout shown beside it. A fixed
/// layout (--tensor-parallel-size, VLLM_PP_LAYER_PARTITION) is taken as given.
fn choose<'t, 'a>(
    tried: &'t [Tried<'a>],
    cfg: &VllmConfig,
) -> (Option<&'t Tried<'a>>, Option<FewestGpus>) {
    let serving = || {
        tried
            .iter()
            .filter(|t| t.fit.outcome == VllmOutcome::Serves)
    };
    let fewest = serving().min_by_key(|t| {
        (
            t.devices.len(),
            t.fit.pipeline_parallel,
            std::cmp::Reverse(t.fit.kv_tokens),
        )
    });
    let fixed = cfg.tensor_parallel.is_some() || cfg.pp_layer_partition.is_some();
    let whole_host = serving()
        .filter(|t| t.fit.pipeline_parallel == 1 && !t.cross_host)
        .max_by_key(|t| (t.fit.tensor_parallel, t.fit.kv_tokens));
    let chosen = match (fewest, whole_host) {
        (Some(f), Some(w))
            if f.devices.len() > 1 && !fixed && w.devices.len() > f.devices.len() =>
        {
            Some(w)
        }
        (f, _) => f,
    };
    let alternative = chosen
        .zip(fewest)
        .filter(|(c, f)| c.devices.len() != f.devices.len())
        .map(|(_, f)| FewestGpus {
            tensor_parallel: f.fit.tensor_parallel,
            pipeline_parallel: f.fit.pipeline_parallel,
            gpus: f.devices.len() as u64,
            kv_tokens: f.fit.kv_tokens,
        });
    (chosen, alternative)
}

/// The stage the `i`-th device of a layout runs.
fn stage_of(f: &VllmFit, i: usize) -> Option<usize> {
    usize::try_from(f.tensor_parallel)
        .ok()
        .map(|tp| i / tp.max(1))
}

fn gpu_of(c: &Candidate) -> VllmGpu {
    VllmGpu {
        total_bytes: c.total_bytes,
        is_a100: c.gpu_model() == crate::plan::GpuModel::A100,
    }
}

/// Bytes one rank needs to serve one request of `max_model_len`: everything but the KV cache,
/// and that request's blocks (with the block vLLM holds back).
fn needed_per_rank(f: &VllmFit) -> u64 {
    let spent = f.term(TermKind::Weights)
        + f.term(TermKind::ProfilePeak)
        + f.term(TermKind::NonTorch)
        + f.term(TermKind::CudaGraphs);
    spent + (f.blocks_per_request + 1) * f.block_bytes
}

/// How many bytes a layout lacks per rank (0 when it serves; `None` when memory is not what
/// stops it).
fn short_of(f: &VllmFit) -> Option<u64> {
    match f.outcome {
        VllmOutcome::Serves => Some(0),
        VllmOutcome::NoKvMemory { short_bytes } => {
            Some(short_bytes + (f.blocks_per_request + 1) * f.block_bytes)
        }
        VllmOutcome::ModelLenTooLong {
            needed_bytes,
            available_bytes,
            ..
        } => Some(needed_bytes - available_bytes),
        VllmOutcome::BudgetAboveFree { short_bytes } => Some(short_bytes),
        VllmOutcome::LongerThanTrained { .. } => None,
    }
}

/// What the chosen layout serves: vLLM's KV tokens, and sequences of the requested length
/// as whole requests (`⌊tokens / context⌋`).
fn capacity(f: &VllmFit, context: u64, batch: u64, trained_context: Option<u64>) -> Capacity {
    Capacity {
        context,
        batch,
        kv_tokens: f.kv_tokens,
        max_concurrent_sequences: f.kv_tokens / context.max(1),
        max_context_at_batch: (f.kv_tokens / batch.max(1)).min(context.max(1)),
        trained_context,
        max_concurrency_centi: Some(f.max_concurrency_centi),
    }
}

/// Every candidate's verdict: whether it serves alone (TP 1), and which rank of the chosen
/// layout it is.
fn verdicts(
    model: &VllmModel<'_>,
    candidates: &[Candidate],
    cfg: &VllmConfig,
    chosen: Option<&Tried<'_>>,
) -> Result<Vec<Verdict>, Unmodelled> {
    let mut out = Vec::new();
    for c in candidates {
        let gpu = c.is_gpu();
        let alone = if gpu {
            Some(fit(model, gpu_of(c), Layout::tp(1), cfg)?)
        } else {
            None
        };
        let rank = chosen.and_then(|t| {
            t.devices
                .iter()
                .position(|d| d.host == c.host && d.backend == c.backend && d.device == c.device)
                .map(|i| Rank {
                    rank: i as u64 % t.fit.tensor_parallel,
                    of: t.fit.tensor_parallel,
                    stage: i as u64 / t.fit.tensor_parallel,
                    stages: t.fit.pipeline_parallel,
                })
        });
        // A device the plan uses is judged by its rank's share; the others by serving alone.
        let judged = match (rank, chosen) {
            (Some(_), Some(t)) => Some(&t.fit),
            _ => alone.as_ref(),
        };
        let usable = judged.map_or(0, |f| f.term(TermKind::Budget));
        let needed = judged.map_or(0, needed_per_rank);
        let fits = alone
            .as_ref()
            .is_some_and(|f| f.outcome == VllmOutcome::Serves);
        let reason = if !gpu {
            VerdictReason::NotForEngine
        } else if fits {
            VerdictReason::Fits
        } else {
            VerdictReason::TooSmall
        };
        let rule = UsableRule::GpuMemoryUtilization {
            fraction: cfg.gpu_memory_utilization,
        };
        out.push(Verdict::of(
            c,
            Usable {
                bytes: usable,
                base_bytes: c.total_bytes,
                base_is_free: false,
                rule,
            },
            needed,
            fits,
            reason,
            rank,
        ));
    }
    Ok(out)
}
