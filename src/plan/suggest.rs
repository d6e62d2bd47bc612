//! What would make a model fit when nothing does: each change is planned with before it is
//! offered, by the same rule as the plan it replaces, so every suggestion is one `select`
//! itself accepts.

use serde::Serialize;

use super::engines::vllm::VllmConfig;
use super::engines::LlamaCppConfig;
use super::launch::Engine;
use super::{select_for_engine, Candidate, Demand, PlanKind, Policy};
use crate::model::{kv_precision, weight_precision};
use crate::plan::engines::pytorch::PytorchRun;
use crate::plan::engines::Settings;

/// A change that makes the plan fit.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum Suggestion {
    /// A shorter context (`--context`): the longest that fits.
    Context {
        /// Tokens.
        context: u64,
    },
    /// A smaller KV-cache precision (`--kv-dtype`).
    KvDtype {
        /// The precision's name.
        dtype: &'static str,
    },
    /// Lower-precision weights (`--dtype`; vLLM quantizes a 16-bit checkpoint to fp8 itself).
    Dtype {
        /// The precision's name.
        dtype: &'static str,
    },
    /// A larger share of each GPU for vLLM (`--gpu-memory-utilization`).
    GpuMemoryUtilization {
        /// The fraction.
        fraction: f64,
    },
    /// System RAM beside simulated GPUs that have none (`--ram`), for CPU offload.
    Ram {
        /// Bytes of RAM, the smallest power of two from 16 GiB that holds the rest.
        bytes: u64,
    },
    /// More GPUs like the largest one here (`--device sim:SIZE`, repeated).
    MoreGpus {
        /// GPUs in all.
        count: u64,
        /// Each GPU's memory.
        each_bytes: u64,
    },
    /// A training step sharded with FSDP2 over this many of the GPUs here (`--fsdp N`).
    Fsdp {
        /// Ranks, one a GPU.
        ranks: u64,
        /// In place of the DDP asked for (`--ddp`, which `--fsdp` cannot go beside).
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        instead_of_ddp: bool,
    },
    /// Gradient checkpointing (`--checkpointing`): only each layer's input is kept.
    Checkpointing,
    /// A smaller micro-batch, gradients accumulated over more of them so each step sees the
    /// same batch (`--batch B --grad-accum N`).
    MicroBatch {
        /// Sequences a micro-batch.
        batch: u64,
        /// Micro-batches a step.
        grad_accum: u64,
    },
    /// Adapters on the frozen model instead of full fine-tuning (`--recipe lora|qlora`), at
    /// the rank and targets asked (PEFT's r=16 on every linear layer by default).
    Recipe {
        /// `lora` or `qlora`.
        recipe: &'static str,
    },
    /// ZeRO-Offload on one GPU (`--deepspeed-zero2 1 --offload-optimizer`): the f32 master
    /// weights, gradients and optimizer state in host RAM, the step there.
    ZeroOffload,
    /// A DeepSpeed step that does not fit: a higher ZeRO stage or more ranks
    /// (`--deepspeed-zeroS N`).
    #[serde(rename = "deepspeed")]
    DeepSpeed {
        /// The ZeRO stage.
        stage: u8,
        /// Ranks, one a GPU.
        ranks: u64,
    },
}

/// The most GPUs a suggestion adds up to (a node's usual eight).
const MAX_GPUS: usize = 8;

/// What the request needs (the context `max_context` gives when nothing fits).
pub struct Request<'a> {
    /// The engine that serves it (`None`: the generic rule).
    pub engine: Option<Engine>,
    /// The model and how it is estimated.
    pub demand: &'a Demand,
    /// Where it may go.
    pub candidates: &'a [Candidate],
    /// The generic rule.
    pub policy: &'a Policy,
    /// vLLM's settings.
    pub vllm: &'a VllmConfig,
    /// How llama-server is started.
    pub llamacpp: &'a LlamaCppConfig,
    /// The longest context that fits, when the plan found one.
    pub max_context: Option<u64>,
}

/// Whether `r`'s model plans with `settings` (vLLM's `--max-model-len` the context).
fn plans_with(r: &Request<'_>, source: &crate::model::ModelSource, settings: &Settings) -> bool {
    let own = VllmConfig::for_settings(settings);
    let vllm = VllmConfig {
        max_model_len: settings.context,
        dtype: own.dtype,
        kv_element_bytes: own.kv_element_bytes,
        ..r.vllm.clone()
    };
    let demand = Demand::Model {
        source: Box::new(source.clone()),
        settings: Box::new(settings.clone()),
    };
    select_for_engine(
        r.engine,
        &demand,
        r.candidates,
        r.policy,
        (&vllm, r.llamacpp),
    )
    .is_ok_and(|s| s.plan.kind != PlanKind::None)
}

/// The longest context a sequence (at the request's batch) that plans, up to `upper`, by the
/// engine's own rules: a search over whole plans, as planning is monotone in the context.
/// `None` when not even one token does.
pub fn longest_context(r: &Request<'_>, upper: u64) -> Option<u64> {
    largest_that_plans(r, upper, &|s, context| s.context = context)
}

/// The most sequences of the request's context at once (`--batch`, llama-server's `-np`) that
/// plan, up to `upper`; `None` when not even one does.
pub fn most_sequences(r: &Request<'_>, upper: u64) -> Option<u64> {
    largest_that_plans(r, upper, &|s, batch| s.batch = batch)
}

/// The weight precision of least loss that plans, from the engine's ladder: llama.cpp's GGUF
/// types from f16 down to q2_k, vLLM's bf16 then fp8 (quantized on load), the generic rule's
/// 16, 8 and 4 bits; none above the model's own weights' bits. `None` when none plans.
pub fn best_dtype(r: &Request<'_>) -> Option<crate::model::Precision> {
    let Demand::Model { source, settings } = r.demand else {
        return None;
    };
    let ladder: &[&str] = match r.engine {
        Some(Engine::LlamaCpp) => &["f16", "q8_0", "q6_k", "q5_k_m", "q4_k_m", "q3_k_m", "q2_k"],
        Some(Engine::Vllm) => &["bf16", "fp8"],
        _ => &["bf16", "int8", "int4_g128"],
    };
    let own_bits = source
        .estimate(settings)
        .ok()
        .map(|b| b.weights_bytes as f64 * 8.0 / b.parameters.max(1) as f64);
    ladder
        .iter()
        .filter_map(|name| weight_precision(name))
        .filter(|p| own_bits.is_none_or(|bits| p.bits_per_element() <= bits + 0.01))
        .find(|&p| {
            plans_with(
                r,
                source,
                &Settings {
                    dtype: Some(p),
                    ..(**settings).clone()
                },
            )
        })
}

/// The largest value in `1..=upper` that plans when `set` puts it in the settings, planning
/// being monotone in it.
fn largest_that_plans(
    r: &Request<'_>,
    upper: u64,
    set: &dyn Fn(&mut Settings, u64),
) -> Option<u64> {
    let Demand::Model { source, settings } = r.demand else {
        return None;
    };
    let fits = |v: u64| {
        let mut s = (**settings).clone();
        set(&mut s, v);
        plans_with(r, source, &s)
    };
    if fits(upper) {
        return Some(upper);
    }
    let (mut lo, mut hi) = (1u64, upper);
    if !fits(lo) {
        return None;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(lo)
}

/// The changes that would make `r` fit, each verified by planning with it; empty for a byte
/// count or when nothing listed helps.
pub fn suggest(r: &Request<'_>) -> Vec<Suggestion> {
    let Demand::Model { source, settings } = r.demand else {
        return Vec::new();
    };
    // Other GPUs or another vLLM setting, planned with the settings as asked.
    let fits = |settings: &Settings, candidates: &[Candidate], vllm: &VllmConfig| {
        let demand = Demand::Model {
            source: source.clone(),
            settings: Box::new(settings.clone()),
        };
        select_for_engine(r.engine, &demand, candidates, r.policy, (vllm, r.llamacpp))
            .is_ok_and(|s| s.plan.kind != PlanKind::None)
    };
    let with = |f: &dyn Fn(&mut Settings)| {
        let mut s = (**settings).clone();
        f(&mut s);
        plans_with(r, source, &s)
    };
    let mut out = Vec::new();
    if let Some(context) = r.max_context.filter(|&c| with(&|s| s.context = c)) {
        out.push(Suggestion::Context { context });
    }
    // A smaller cache of a type the engine has: llama.cpp has no fp8 cache but a q8_0 one,
    // whose V it quantizes only under flash attention.
    let smaller_cache = match r.engine {
        Some(Engine::LlamaCpp) if r.llamacpp.flash_attention_off => None,
        Some(Engine::LlamaCpp) => kv_precision("q8_0"),
        _ => kv_precision("fp8"),
    };
    if let Some(kv) =
        smaller_cache.filter(|p| p.bits_per_element() < settings.kv_dtype.bits_per_element())
    {
        if with(&|s| s.kv_dtype = kv) {
            out.push(Suggestion::KvDtype { dtype: kv.name });
        }
    }
    let weight_bits = source
        .estimate(settings)
        .ok()
        .map(|b| b.weights_bytes as f64 * 8.0 / b.parameters.max(1) as f64);
    // 8-bit weights of a type the engine loads: GGUF's q8_0 for llama.cpp, fp8 elsewhere.
    let eight_bit = if r.engine == Some(Engine::LlamaCpp) {
        "q8_0"
    } else {
        "fp8"
    };
    if let Some(w) = weight_precision(eight_bit)
        .filter(|p| weight_bits.is_some_and(|bits| bits > p.bits_per_element() + 0.5))
    {
        if with(&|s| s.dtype = Some(w)) {
            out.push(Suggestion::Dtype { dtype: w.name });
        }
    }
    if r.engine == Some(Engine::Vllm) && r.vllm.gpu_memory_utilization < 0.95 {
        let vllm = VllmConfig {
            gpu_memory_utilization: 0.95,
            ..r.vllm.clone()
        };
        if fits(settings, r.candidates, &vllm) {
            out.push(Suggestion::GpuMemoryUtilization { fraction: 0.95 });
        }
    }
    out.extend(ram(r.candidates, &|c| fits(settings, c, r.vllm)));
    out.extend(more_gpus(r.candidates, &|c| fits(settings, c, r.vllm)));
    out
}

/// Where every device is simulated and none is system RAM: the smallest RAM (16 GiB to
/// 1 TiB, powers of two) beside them that lets part of the model run on the CPU.
fn ram(candidates: &[Candidate], fits: &dyn Fn(&[Candidate]) -> bool) -> Option<Suggestion> {
    let cpu = |c: &Candidate| c.backend == crate::backend::BackendKind::Cpu;
    let all_simulated = !candidates.is_empty() && candidates.iter().all(|c| c.simulated);
    if !all_simulated {
        return None;
    }
    // More RAM than the `--ram` given, if any: the simulated RAM replaced by a larger one.
    let given = candidates
        .iter()
        .filter(|c| cpu(c))
        .map(|c| c.total_bytes)
        .max();
    let gpus: Vec<Candidate> = candidates.iter().filter(|c| !cpu(c)).cloned().collect();
    let sizes: Vec<u64> = (4..=10)
        .map(|p| (1u64 << p) << 30)
        .filter(|&bytes| given.is_none_or(|g| bytes > g))
        .collect();
    let fits_with = |bytes: u64| {
        let mut with = gpus.clone();
        with.push(Candidate::sim_ram(bytes));
        fits(&with)
    };
    // More RAM never undoes a plan: the smallest that plans is a bisection.
    smallest_that_fits(sizes.len(), &|i| fits_with(sizes[i]))
        .map(|i| Suggestion::Ram { bytes: sizes[i] })
}

/// The smallest index in `0..n` for which `fits` holds, where it holds from some index on;
/// `None` when it does not hold at the last. A bisection: about log2(n) + 1 plans.
fn smallest_that_fits(n: usize, fits: &dyn Fn(usize) -> bool) -> Option<usize> {
    if n == 0 || !fits(n - 1) {
        return None;
    }
    let (mut lo, mut hi) = (0, n - 1);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Some(lo)
}

/// The fewest GPUs like the largest one here (on its host) that hold the model, up to eight.
fn more_gpus(candidates: &[Candidate], fits: &dyn Fn(&[Candidate]) -> bool) -> Option<Suggestion> {
    let largest = candidates
        .iter()
        .filter(|c| c.is_gpu() && c.mig_profile.is_none())
        .max_by_key(|c| c.total_bytes)?;
    let mut group: Vec<Candidate> = candidates
        .iter()
        .filter(|c| {
            c.host == largest.host && c.name == largest.name && c.total_bytes == largest.total_bytes
        })
        .cloned()
        .collect();
    let others: Vec<Candidate> = candidates
        .iter()
        .filter(|c| !group.contains(c))
        .cloned()
        .collect();
    let have = group.len();
    while group.len() < MAX_GPUS {
        let next = group.iter().map(|c| c.device).max().unwrap_or(0) + 1;
        group.push(Candidate {
            device: next,
            ..largest.clone()
        });
    }
    // With `have + 1 + i` GPUs; more GPUs never undo a plan, so the fewest is a bisection.
    let with = |i: usize| {
        let all: Vec<Candidate> = others
            .iter()
            .chain(group[..have + 1 + i].iter())
            .cloned()
            .collect();
        fits(&all)
    };
    smallest_that_fits(MAX_GPUS.saturating_sub(have), &with).map(|i| Suggestion::MoreGpus {
        count: (have + 1 + i) as u64,
        each_bytes: largest.total_bytes,
    })
}

/// For a training step that fits no GPU: the fewest FSDP2 ranks over GPUs of one host here
/// that hold one rank each, planned with; for a DeepSpeed step, the fewest ranks and then the
/// lowest ZeRO stage from the one asked for that fit. Empty when already sharded with FSDP2 or
/// when none do.
pub fn suggest_training(r: &Request<'_>) -> Vec<Suggestion> {
    use crate::plan::engines::pytorch::training::{DeepSpeed, Fsdp, ZeroStage};
    let Demand::Model { source, settings } = r.demand else {
        return Vec::new();
    };
    if settings.pytorch.fsdp.is_some() {
        return Vec::new();
    }
    let mut per_host: Vec<(&str, u64)> = Vec::new();
    for c in r
        .candidates
        .iter()
        .filter(|c| c.is_gpu() && c.mig_profile.is_none())
    {
        match per_host.iter_mut().find(|(h, _)| *h == c.host) {
            Some((_, n)) => *n += 1,
            None => per_host.push((&c.host, 1)),
        }
    }
    let most = per_host.iter().map(|&(_, n)| n).max().unwrap_or(0);
    let fits = |settings: Settings| {
        let demand = Demand::Model {
            source: source.clone(),
            settings: Box::new(settings),
        };
        select_for_engine(
            r.engine,
            &demand,
            r.candidates,
            r.policy,
            (r.vllm, r.llamacpp),
        )
        .is_ok_and(|s| s.plan.kind != PlanKind::None)
    };
    if let Some(asked) = settings.pytorch.deepspeed {
        let stages = [ZeroStage::One, ZeroStage::Two, ZeroStage::Three];
        let from = asked.world.max(1);
        return (from..=most.min(MAX_GPUS as u64).max(from))
            .flat_map(|ranks| {
                stages
                    .into_iter()
                    .filter(move |&s| s >= asked.stage)
                    .map(move |stage| DeepSpeed {
                        world: ranks,
                        stage,
                        offload_optimizer: asked.offload_optimizer,
                    })
            })
            .filter(|&ds| ds != asked)
            .find(|&ds| {
                fits(Settings {
                    pytorch: PytorchRun {
                        deepspeed: Some(ds),
                        ..settings.pytorch
                    },
                    ..(**settings).clone()
                })
            })
            .map(|ds| Suggestion::DeepSpeed {
                stage: ds.stage.number(),
                ranks: ds.world,
            })
            .into_iter()
            .collect();
    }
    let mut out = one_gpu_changes(settings, &fits);
    let fsdp = (2..=most.min(MAX_GPUS as u64))
        .find(|&ranks| {
            fits(Settings {
                pytorch: PytorchRun {
                    fsdp: Some(Fsdp {
                        world: ranks,
                        reshard_after_forward: true,
                    }),
                    ddp: None,
                    ..settings.pytorch
                },
                ..(**settings).clone()
            })
        })
        .map(|ranks| Suggestion::Fsdp {
            ranks,
            instead_of_ddp: settings.pytorch.ddp.is_some(),
        });
    out.extend(fsdp);
    out
}

/// Changes to a training step on the GPUs it has, each planned with: checkpointing (when off),
/// the largest smaller micro-batch that fits with gradients accumulated over more of them,
/// LoRA then QLoRA in place of full fine-tuning, and ZeRO-Offload on one GPU.
fn one_gpu_changes(settings: &Settings, fits: &dyn Fn(Settings) -> bool) -> Vec<Suggestion> {
    use crate::plan::engines::pytorch::training::{
        DeepSpeed, Lora, LoraTargets, Recipe, ZeroStage,
    };
    let with = |pytorch: PytorchRun, batch: u64| Settings {
        pytorch,
        batch,
        ..settings.clone()
    };
    let run = settings.pytorch;
    let mut out = Vec::new();
    if !run.checkpointing
        && fits(with(
            PytorchRun {
                checkpointing: true,
                ..run
            },
            settings.batch,
        ))
    {
        out.push(Suggestion::Checkpointing);
    }
    let batch = settings.batch.max(1);
    let smaller = (1..batch).rev().filter(|b| batch % b == 0).find(|&b| {
        let accum = run.grad_accum.max(1).saturating_mul(batch / b);
        fits(with(
            PytorchRun {
                grad_accum: accum,
                ..run
            },
            b,
        ))
    });
    if let Some(b) = smaller {
        out.push(Suggestion::MicroBatch {
            batch: b,
            grad_accum: run.grad_accum.max(1).saturating_mul(batch / b),
        });
    }
    let adapters = matches!(run.recipe, Some(Recipe::Lora(_) | Recipe::Qlora(_)));
    if !adapters {
        let lora = Lora {
            rank: 16,
            targets: LoraTargets::ALL_LINEAR,
        };
        let recipe = [("lora", Recipe::Lora(lora)), ("qlora", Recipe::Qlora(lora))]
            .into_iter()
            .find(|&(_, r)| {
                fits(with(
                    PytorchRun {
                        recipe: Some(r),
                        ..run
                    },
                    settings.batch,
                ))
            });
        out.extend(recipe.map(|(name, _)| Suggestion::Recipe { recipe: name }));
    }
    let offload = DeepSpeed {
        world: 1,
        stage: ZeroStage::Two,
        offload_optimizer: true,
    };
    let sharded = run.fsdp.is_some() || run.ddp.is_some() || run.deepspeed.is_some();
    if !adapters
        && !sharded
        && fits(with(
            PytorchRun {
                deepspeed: Some(offload),
                ..run
            },
            settings.batch,
        ))
    {
        out.push(Suggestion::ZeroOffload);
    }
    out
}
