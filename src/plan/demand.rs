//! What must fit: a plain byte count, or a model whose needs are re-estimated as the batch and
//! context grow (activations and KV cache both do), so that serving capacity and the largest
//! context are searched on the model's own figures.

use super::engines::vllm::{VllmConfig, VllmOutcome};
use super::engines::{
    EnginePlanner, LlamaCpp, LlamaCppConfig, Ollama, Planned, Pytorch, Sglang, Vllm,
};
use super::launch::Engine;
use super::{
    capacity, model_requirement, plan, Accounting, Candidate, Capacity, Plan, PlanKind, Policy,
    Requirement, Selection,
};
use crate::model::ModelSource;
use crate::plan::engines::{EstimateOverflow, Mode, Settings};

/// What `select` places.
#[derive(Debug, Clone)]
pub enum Demand {
    /// `--bytes`: one block of memory, no structure.
    Bytes(u64),
    /// A model, estimated under `settings` (their batch and context are the requested ones).
    Model {
        /// The model read from its source.
        source: Box<ModelSource>,
        /// How it is estimated.
        settings: Box<Settings>,
    },
}

impl Demand {
    /// What must fit at the requested batch and context.
    pub fn requirement(&self) -> Result<Requirement, EstimateOverflow> {
        match self {
            Demand::Bytes(bytes) => Ok(Requirement {
                total: *bytes,
                model: None,
            }),
            Demand::Model { source, settings } => {
                let b = source.estimate(settings)?;
                Ok(model_requirement(
                    &source.arch,
                    &b,
                    settings.fragmentation_reserve,
                ))
            }
        }
    }

    /// What must fit for `batch` sequences of `context` tokens (a model only; `None` for bytes,
    /// or where the estimate passes 2^64 bytes, which fits nowhere).
    pub fn at(&self, batch: u64, context: u64) -> Option<Requirement> {
        let Demand::Model { source, settings } = self else {
            return None;
        };
        let settings = Settings {
            batch: batch.max(1),
            context: context.max(1),
            ..(**settings).clone()
        };
        let b = source.estimate(&settings).ok()?;
        Some(model_requirement(
            &source.arch,
            &b,
            settings.fragmentation_reserve,
        ))
    }
}

/// Plans `demand` by the rule of the engine that serves it, through the engines' one
/// contract ([`EnginePlanner`]): PyTorch for a training step, vLLM's or llama.cpp's own
/// accounting for them, and the generic rule under `policy` for a byte count, for no engine, or
/// where the engine's accounting does not cover the model. `select` and `estimate --fits` both
/// judge devices through here, so they cannot disagree.
pub fn select_for_engine(
    engine: Option<Engine>,
    demand: &Demand,
    candidates: &[Candidate],
    policy: &Policy,
    (vllm, llamacpp): (&VllmConfig, &LlamaCppConfig),
) -> Result<Selection, EstimateOverflow> {
    let Demand::Model { source, settings } = demand else {
        return select(demand, candidates, policy);
    };
    let planner: Box<dyn EnginePlanner + '_> = match engine {
        _ if settings.mode == Mode::Train => Box::new(Pytorch),
        Some(Engine::Vllm) => Box::new(Vllm(vllm)),
        Some(Engine::LlamaCpp) => Box::new(LlamaCpp(llamacpp)),
        Some(Engine::Sglang) => Box::new(Sglang),
        Some(Engine::Ollama) => Box::new(Ollama(llamacpp)),
        _ => return select(demand, candidates, policy),
    };
    match planner.plan(source, settings, candidates)? {
        Planned::Own(own) if own.plan.accounting == Accounting::Vllm => {
            after_vllm(*own, demand, candidates, policy)
        }
        Planned::Own(own) => Ok(*own),
        Planned::Unmodelled => select(demand, candidates, policy),
    }
}

/// vLLM's own plan over the tensor-parallel layouts it accepts, unless none serves for lack of
/// memory: then the generic rule's pipeline or offload plan (which vLLM's accounting does not
/// model yet), marked as such; when that finds nothing either, vLLM's closest layout and what
/// it lacks.
fn after_vllm(
    own: Selection,
    demand: &Demand,
    candidates: &[Candidate],
    policy: &Policy,
) -> Result<Selection, EstimateOverflow> {
    // With no GPU at all vLLM's accounting has nothing to judge; a context past the model's
    // own is refused whatever the memory.
    let memory_bound = own
        .plan
        .vllm()
        .is_none_or(|f| !matches!(f.outcome, VllmOutcome::LongerThanTrained { .. }));
    if own.plan.kind != PlanKind::None || !memory_bound {
        return Ok(own);
    }
    // Without a GPU vLLM's accounting judged nothing: its figures would all be 0 B.
    let judged = own.plan.vllm().is_some();
    let generic = select(demand, candidates, policy)?;
    let on_cpu = |p: &Plan| p.placements.iter().all(|x| !x.backend.is_gpu());
    Ok(match generic.plan.kind {
        PlanKind::None if !judged => Selection {
            plan: Plan {
                accounting: Accounting::GenericAfterVllm,
                ..generic.plan
            },
            ..generic
        },
        PlanKind::LayerSplit | PlanKind::CrossHost | PlanKind::CpuOffload => Selection {
            plan: Plan {
                accounting: Accounting::GenericAfterVllm,
                ..generic.plan
            },
            ..generic
        },
        PlanKind::Single if on_cpu(&generic.plan) => Selection {
            plan: Plan {
                accounting: Accounting::GenericAfterVllm,
                ..generic.plan
            },
            ..generic
        },
        _ => own,
    })
}

/// Plans `demand` over `candidates`: the plan (with the largest context that would fit when
/// none does) and, for a model, what the plan can serve.
pub fn select(
    demand: &Demand,
    candidates: &[Candidate],
    policy: &Policy,
) -> Result<Selection, EstimateOverflow> {
    let requirement = demand.requirement()?;
    let Demand::Model { source, settings } = demand else {
        return Ok(plan(&requirement, candidates, policy, None));
    };
    let (batch, context) = (settings.batch, settings.context);
    let total_at = |c: u64| demand.at(batch, c).map_or(u64::MAX, |r| r.total);
    let mut selection = plan(&requirement, candidates, policy, Some((&total_at, context)));
    // An encoder keeps no KV cache: its input is one micro-batch, so there is no serving
    // capacity in tokens of cache to search for.
    if source.arch.encoder.is_some() {
        return Ok(selection);
    }
    let needs_at = |b: u64, c: u64| demand.at(b, c);
    selection.plan.capacity = capacity(&selection, candidates, policy, context, batch, &needs_at)
        .map(|c| Capacity {
            trained_context: source.arch.max_position_embeddings,
            ..c
        });
    Ok(selection)
}
