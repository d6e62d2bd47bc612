//! Planning for SGLang: tensor parallel over identical GPUs of one host (TP must divide the
//! attention heads), each layout judged by SGLang's own pool ([`super::fit::fit`]). A model one
//! GPU serves runs on one; one that needs several runs over every GPU of the host that takes
//! it, as people serve it, with the fewest-GPU layout named beside it.

use super::fit::{fit, SglangFit, SglangGpu, SglangOutcome};
use crate::model::{Attention, ModelArch, ModelSource};
use crate::plan::engines::{EnginePlanner, EstimateOverflow, Planned, Settings};
use crate::plan::{
    identical_groups, Accounting, Candidate, Capacity, EngineAccount, Placement, Plan, PlanKind,
    Rank, Selection, Usable, UsableRule, Verdict, VerdictReason,
};

const GIB: u64 = 1 << 30;

/// SGLang's planner: `launch_server` started as the settings say.
#[derive(Debug, Clone, Copy)]
pub struct Sglang;

impl EnginePlanner for Sglang {
    fn plan(
        &self,
        source: &ModelSource,
        settings: &Settings,
        candidates: &[Candidate],
    ) -> Result<Planned, EstimateOverflow> {
        let b = source.estimate(settings)?;
        let (element, dtype) = kv_element(settings, b.weights_dtype.name());
        let model = Model {
            arch: &source.arch,
            weights_bytes: b.weights_bytes,
            element,
            dtype,
        };
        Ok(select_sglang(&model, candidates, settings)
            .map_or(Planned::Unmodelled, |s| Planned::Own(Box::new(s))))
    }
}

/// The pool's element: `--kv-cache-dtype auto` is the model's dtype (bf16 unless its weights
/// are f16), fp8 one byte (`fp8_e4m3`).
fn kv_element(settings: &Settings, weights: &str) -> (u64, &'static str) {
    if !settings.kv_dtype_auto && settings.kv_dtype.block_bytes == settings.kv_dtype.block_elems {
        return (1, "torch.float8_e4m3fn");
    }
    if weights == "f16" {
        (2, "torch.float16")
    } else {
        (2, "torch.bfloat16")
    }
}

/// The model as SGLang loads it.
struct Model<'a> {
    arch: &'a ModelArch,
    weights_bytes: u64,
    element: u64,
    dtype: &'static str,
}

/// Whether SGLang shards `arch` over `tp` ranks: the attention heads divide, and the KV heads
/// divide or are divided by it (`models/llama.py`'s asserts).
fn accepts_tp(arch: &ModelArch, tp: u64) -> bool {
    let kv = arch.num_kv_heads;
    tp > 0
        && arch.num_heads % tp == 0
        && (matches!(arch.attention, Attention::Mla { .. })
            || kv == 0
            || kv % tp == 0
            || tp % kv == 0)
}

fn gpu_of(c: &Candidate) -> SglangGpu {
    SglangGpu {
        total_bytes: c.total_bytes,
        nvswitch: c.total_bytes >= 70 * GIB && c.gpu_model() != crate::plan::GpuModel::A100,
    }
}

fn fit_on(m: &Model<'_>, c: &Candidate, tp: u64, s: &Settings) -> Option<SglangFit> {
    fit(
        m.arch,
        (m.weights_bytes, m.element, m.dtype),
        gpu_of(c),
        tp,
        (s.context, &s.sglang),
    )
}

/// Plans `model` for SGLang over `candidates` (GPUs only); `None` where SGLang sizes the
/// model's pool in a way gpumem does not model (recurrent state, encoders).
fn select_sglang(m: &Model<'_>, candidates: &[Candidate], s: &Settings) -> Option<Selection> {
    let gpus: Vec<&Candidate> = candidates
        .iter()
        .filter(|c| c.is_gpu() && c.mig_profile.is_none())
        .collect();
    let mut tried: Vec<(Vec<&Candidate>, SglangFit)> = Vec::new();
    for group in identical_groups(&gpus) {
        for tp in 1..=group.len() as u64 {
            if !accepts_tp(m.arch, tp) || s.sglang.tp_size.is_some_and(|n| n != tp) {
                continue;
            }
            let devices = group[..usize::try_from(tp).unwrap_or(0)].to_vec();
            tried.push((devices, fit_on(m, group[0], tp, s)?));
        }
    }
    if cell_missing(m) {
        return None;
    }
    let serves = |f: &SglangFit| f.outcome == SglangOutcome::Serves;
    let fewest = tried
        .iter()
        .filter(|t| serves(&t.1))
        .min_by_key(|t| (t.0.len(), std::cmp::Reverse(t.1.max_total_num_tokens)));
    let whole = tried
        .iter()
        .filter(|t| serves(&t.1))
        .max_by_key(|t| (t.0.len(), t.1.max_total_num_tokens));
    let chosen = match (fewest, whole) {
        (Some(f), Some(w)) if f.0.len() > 1 && s.sglang.tp_size.is_none() => Some(w),
        (f, _) => f,
    };
    let closest = chosen.or_else(|| {
        tried
            .iter()
            .min_by_key(|t| t.1.short_bytes(t.0[0].total_bytes))
    });
    let required = closest.map_or(0, |t| t.1.needed_bytes());
    let plan = match chosen {
        Some((devices, f)) => {
            let alternative = fewest
                .filter(|x| x.0.len() != devices.len())
                .map(|x| (x.1.tensor_parallel, x.1.max_total_num_tokens));
            Plan {
                kind: if devices.len() > 1 {
                    PlanKind::TensorParallel
                } else {
                    PlanKind::Single
                },
                placements: devices
                    .iter()
                    .map(|c| Placement {
                        host: c.host.clone(),
                        backend: c.backend,
                        device: c.device,
                        bytes: f.needed_bytes(),
                        layers: None,
                    })
                    .collect(),
                gpu_layers: Some(m.arch.num_layers),
                max_context: None,
                shortfall_bytes: None,
                capacity: Some(capacity(f, s.batch, m.arch.max_position_embeddings)),
                account: Some(EngineAccount::Sglang(SglangFit {
                    fewest_gpus: alternative,
                    ..f.clone()
                })),
                accounting: Accounting::Sglang,
            }
        }
        None => Plan {
            account: closest.map(|t| EngineAccount::Sglang(t.1.clone())),
            ..Plan::none(
                closest.map(|t| t.1.max_total_num_tokens).filter(|&n| n > 0),
                closest.map(|t| t.1.short_bytes(t.0[0].total_bytes)),
                Accounting::Sglang,
            )
        },
    };
    Some(Selection {
        required_bytes: required,
        candidates: verdicts(m, candidates, s, chosen),
        plan,
    })
}

/// Whether SGLang's pool for the model is one gpumem does not size (no layouts to try then).
fn cell_missing(m: &Model<'_>) -> bool {
    super::fit::cell_bytes(m.arch, 1, m.element).is_none()
}

fn capacity(f: &SglangFit, batch: u64, trained: Option<u64>) -> Capacity {
    let context = f.context_len.max(1);
    Capacity {
        context,
        batch,
        kv_tokens: f.max_total_num_tokens,
        max_concurrent_sequences: (f.max_total_num_tokens / context).min(f.max_running_requests),
        max_context_at_batch: (f.max_total_num_tokens / batch.max(1)).min(context),
        trained_context: trained,
        max_concurrency_centi: None,
    }
}

/// Every candidate's verdict: whether it serves alone (TP 1), and its rank in the plan.
fn verdicts(
    m: &Model<'_>,
    candidates: &[Candidate],
    s: &Settings,
    chosen: Option<&(Vec<&Candidate>, SglangFit)>,
) -> Vec<Verdict> {
    candidates
        .iter()
        .map(|c| {
            let alone = c.is_gpu().then(|| fit_on(m, c, 1, s)).flatten();
            let rank = chosen.and_then(|(devices, f)| {
                devices
                    .iter()
                    .position(|d| {
                        d.host == c.host && d.backend == c.backend && d.device == c.device
                    })
                    .map(|i| Rank {
                        rank: i as u64,
                        of: f.tensor_parallel,
                        stage: 0,
                        stages: 1,
                    })
            });
            let judged = match (rank, chosen) {
                (Some(_), Some((_, f))) => Some(f),
                _ => alone.as_ref(),
            };
            let fits = alone
                .as_ref()
                .is_some_and(|f| f.outcome == SglangOutcome::Serves);
            let reason = if !c.is_gpu() {
                VerdictReason::NotForEngine
            } else if fits {
                VerdictReason::Fits
            } else {
                VerdictReason::TooSmall
            };
            Verdict::of(
                c,
                Usable {
                    bytes: if c.is_gpu() { c.total_bytes } else { 0 },
                    base_bytes: c.total_bytes,
                    base_is_free: false,
                    rule: UsableRule::WholeDevice,
                },
                judged.map_or(0, SglangFit::needed_bytes),
                fits,
                reason,
                rank,
            )
        })
        .collect()
}
