//! Planning for vLLM: the tensor-parallel layouts vLLM accepts over identical GPUs of one host,
//! each judged by vLLM's own accounting ([`super::vllm::fit`]); the smallest that starts and
//! serves one request of `max_model_len` wins, and when none does, the closest says how far
//! it is.

use super::vllm::{
    accepts_tp, fit, Unmodelled, VllmConfig, VllmFit, VllmGpu, VllmModel, VllmOutcome,
};
use super::TermKind;
use crate::plan::{
    identical_groups, Accounting, Candidate, Capacity, Placement, Plan, PlanKind, Rank, Selection,
    Usable, UsableRule, Verdict, VerdictReason,
};

/// One GPU group's best layout.
struct Tried<'a> {
    devices: Vec<&'a Candidate>,
    fit: VllmFit,
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
    let mut tried: Vec<Tried<'_>> = Vec::new();
    for group in identical_groups(&gpus) {
        for tp in (1..=group.len() as u64).filter(|&tp| accepts_tp(model.arch, tp).is_ok()) {
            let f = fit(model, gpu_of(group[0]), tp, cfg)?;
            tried.push(Tried {
                devices: group[..usize::try_from(tp).unwrap_or(usize::MAX)].to_vec(),
                fit: f,
            });
        }
    }
    let chosen = tried
        .iter()
        .filter(|t| t.fit.outcome == VllmOutcome::Serves)
        .min_by_key(|t| (t.fit.tensor_parallel, std::cmp::Reverse(t.fit.kv_tokens)));
    let closest = chosen.or_else(|| {
        tried
            .iter()
            .min_by_key(|t| short_of(&t.fit).unwrap_or(u64::MAX))
    });
    let verdicts = verdicts(model, candidates, cfg, chosen)?;
    let required = closest.map_or(0, |t| needed_per_rank(&t.fit, cfg));
    let plan = match (chosen, closest) {
        (Some(t), _) => Plan {
            kind: if t.fit.tensor_parallel > 1 {
                PlanKind::TensorParallel
            } else {
                PlanKind::Single
            },
            placements: t
                .devices
                .iter()
                .map(|c| Placement {
                    host: c.host.clone(),
                    backend: c.backend,
                    device: c.device,
                    bytes: t.fit.term(TermKind::Budget),
                    layers: Some(model.arch.num_layers),
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
            accounting: Accounting::Vllm,
            engine: Some(t.fit.clone()),
        },
        (None, closest) => Plan {
            kind: PlanKind::None,
            placements: Vec::new(),
            gpu_layers: None,
            max_context: closest.and_then(|t| match t.fit.outcome {
                VllmOutcome::ModelLenTooLong {
                    estimated_max_model_len,
                    ..
                } if estimated_max_model_len > 0 => Some(estimated_max_model_len),
                VllmOutcome::LongerThanTrained { trained } => Some(trained),
                _ => None,
            }),
            shortfall_bytes: closest.and_then(|t| short_of(&t.fit)),
            capacity: None,
            engine: closest.map(|t| t.fit.clone()),
            accounting: Accounting::Vllm,
        },
    };
    Ok(Selection {
        required_bytes: required,
        plan,
        candidates: verdicts,
    })
}

fn gpu_of(c: &Candidate) -> VllmGpu {
    VllmGpu {
        total_bytes: c.total_bytes,
        is_a100: c.gpu_model() == crate::plan::GpuModel::A100,
    }
}

/// Bytes one rank needs to serve one request of `max_model_len`: everything but the KV cache,
/// and that request's blocks (with the block vLLM holds back).
fn needed_per_rank(f: &VllmFit, cfg: &VllmConfig) -> u64 {
    let spent = f.term(TermKind::Weights)
        + f.term(TermKind::ProfilePeak)
        + f.term(TermKind::NonTorch)
        + f.term(TermKind::CudaGraphs);
    let _ = cfg;
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
            Some(fit(model, gpu_of(c), 1, cfg)?)
        } else {
            None
        };
        let rank = chosen.and_then(|t| {
            t.devices
                .iter()
                .position(|d| d.host == c.host && d.backend == c.backend && d.device == c.device)
                .map(|i| Rank {
                    rank: i as u64,
                    of: t.devices.len() as u64,
                })
        });
        // A device the plan uses is judged by its rank's share; the others by serving alone.
        let judged = match (rank, chosen) {
            (Some(_), Some(t)) => Some(&t.fit),
            _ => alone.as_ref(),
        };
        let usable = judged.map_or(0, |f| f.term(TermKind::Budget));
        let needed = judged.map_or(0, |f| needed_per_rank(f, cfg));
        let fits = alone
            .as_ref()
            .is_some_and(|f| f.outcome == VllmOutcome::Serves);
        out.push(Verdict {
            host: c.host.clone(),
            backend: c.backend,
            device: c.device,
            name: c.name.clone(),
            usable_bytes: usable,
            needed_bytes: needed,
            headroom_bytes: i128::from(usable) - i128::from(needed),
            fits,
            reason: if !gpu {
                VerdictReason::NotForEngine
            } else if fits {
                VerdictReason::Fits
            } else {
                VerdictReason::TooSmall
            },
            usable: Usable {
                bytes: usable,
                base_bytes: c.total_bytes,
                base_is_free: false,
                rule: UsableRule::GpuMemoryUtilization {
                    fraction: cfg.gpu_memory_utilization,
                },
            },
            mig_profile: c.mig_profile.clone(),
            rank,
        });
    }
    Ok(out)
}
