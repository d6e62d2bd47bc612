//! `gpumem select`.

use anyhow::Result;

use super::options::{
    check_context, check_suggest_dtype, load_options, ollama_kv_type, probe_all, select_draft,
    select_engines, select_llamacpp_config, select_lora, select_policy, select_sim_devices,
    select_what, sglang_tp, vllm_config, vllm_request, DraftRequest, SelectWhat,
};
use crate::backend::{discover_with, host_info, same_gpus};
use crate::cli::SelectArgs;
use crate::error::CliError;
use crate::exit::Exit;
use crate::output::select::SelectReport;
use crate::output::Output;
use crate::plan::engines::llamacpp::{DraftRef, LlamaCppDraft};
use crate::plan::engines::vllm::VllmConfig;
use crate::plan::engines::LlamaCppConfig;
use crate::plan::launch::{
    launch, torchrun, Engine, Launch, LaunchSettings, ModelRef, NoLaunch, VllmFlags,
};
use crate::plan::{
    best_dtype, candidates_from_discovery, longest_context, most_sequences, read_inventories,
    select_for_engine, suggest, suggest_training, Accounting, Demand, PlanKind, SuggestRequest,
};

/// The longest context `--max-context` searches when the model names no trained length.
const MAX_CONTEXT_SEARCHED: u64 = 1 << 20;
/// The most sequences `--max-concurrency` searches (llama-server's slots).
const MAX_SEQUENCES_SEARCHED: u64 = 4096;

/// Runs `gpumem select` and returns its exit status.
pub fn run(args: &SelectArgs, out: &Output) -> Result<Exit> {
    let what = select_what(args)?;
    let sims = select_sim_devices(args)?;
    let policy = select_policy(args);
    let (mut demand, spec) = match what {
        SelectWhat::Bytes(bytes) => (Demand::Bytes(bytes), None),
        SelectWhat::Model(spec, settings) => {
            let source = super::load_model(&spec, &load_options(&args.settings), out)?;
            check_context(&source.name, &source.arch, &settings, &args.settings)?;
            check_suggest_dtype(args, &source)?;
            (
                Demand::Model {
                    source: Box::new(source),
                    settings,
                },
                Some(spec),
            )
        }
    };
    // Where it could go: inventories and sim devices, else this machine.
    let (mut candidates, held_back) = read_inventories(&args.inventory)?;
    candidates.extend(sims);
    let mut same_gpu = Vec::new();
    if candidates.is_empty() && args.inventory.is_empty() {
        let found = discover_with(&probe_all(args.timeout));
        let host = host_info().hostname.unwrap_or_else(|| "localhost".into());
        candidates = candidates_from_discovery(&found, &host);
        same_gpu = same_gpus(&found);
    }
    let engine = match (&spec, &demand) {
        (Some(s), Demand::Model { source, .. }) => {
            select_engines(args, &ModelRef::for_source(s, source))
                .first()
                .copied()
        }
        _ => None,
    };
    let mut vllm = engine_settings(args, &mut demand, &candidates, engine)?;
    let llamacpp = llamacpp_config(args, engine, &demand, out)?;
    let mut inverse = inverse_questions(
        args,
        &mut demand,
        engine,
        (&candidates, &policy),
        &mut vllm,
        &llamacpp,
    );
    let selection = select_for_engine(engine, &demand, &candidates, &policy, (&vllm, &llamacpp))?;
    // vLLM's concurrency is its KV cache's, which it prints.
    if let (true, Some(crate::plan::EngineAccount::Vllm(fit))) =
        (args.max_concurrency, &selection.plan.account)
    {
        inverse.most_sequences = Some(Some(fit.max_concurrency_centi / 100).filter(|&n| n > 0));
    }
    let launches = launches(
        args,
        spec.as_ref(),
        &demand,
        &selection.plan,
        engine,
        &vllm,
        &policy,
    );
    let none = selection.plan.kind == PlanKind::None;
    let suggestions = if none {
        what_would_fit(
            &demand,
            engine,
            (&candidates, &policy),
            (&vllm, &llamacpp),
            &selection.plan,
        )
    } else {
        Vec::new()
    };
    let model = match &demand {
        Demand::Model { source, .. } => Some(source.name.clone()),
        Demand::Bytes(_) => None,
    };
    out.emit(&SelectReport {
        model,
        selection,
        launches,
        held_back,
        same_gpu,
        suggestions,
        longest_context: inverse.longest_context,
        most_sequences: inverse.most_sequences,
        suggested_dtype: inverse.dtype.map(|d| d.map(|p| p.name)),
    })?;
    Ok(if none {
        Exit::DoesNotFit
    } else {
        Exit::Success
    })
}

/// llama.cpp's settings, with what it loads beside the model: the model's projector, the
/// draft `--model-draft` names and the `--lora` adapters (each checked against the model).
fn llamacpp_config(
    args: &SelectArgs,
    engine: Option<crate::plan::launch::Engine>,
    demand: &Demand,
    out: &Output,
) -> Result<LlamaCppConfig> {
    let mut llamacpp = select_llamacpp_config(args, engine)?;
    if let Demand::Model { source, .. } = demand {
        llamacpp.projector = source.projector.clone();
    }
    if let Some(req) = select_draft(args, engine)? {
        let draft = load_draft(&req, &args.settings, out)?;
        if let Demand::Model { source, .. } = demand {
            if let Some(why) = draft.refusal(&source.arch) {
                return Err(CliError::Usage(why).into());
            }
        }
        llamacpp.draft = Some(draft);
    }
    for path in select_lora(args, engine)? {
        let adapter = crate::model::read_lora(&path)?;
        if let Demand::Model { source, .. } = demand {
            adapter.check_against(source.layer_weights.as_ref())?;
        }
        llamacpp.lora.push(adapter);
    }
    Ok(llamacpp)
}

/// The draft `--model-draft` names, read like any model; llama.cpp loads it from a GGUF.
fn load_draft(
    req: &DraftRequest,
    settings: &crate::cli::WorkloadSettings,
    out: &Output,
) -> Result<LlamaCppDraft> {
    let options = crate::model::LoadOptions {
        projector: None,
        ..load_options(settings)
    };
    let source = super::load_model(&req.spec, &options, out)?;
    let load = match ModelRef::for_source(&req.spec, &source) {
        ModelRef::Gguf(path) => DraftRef::File(path),
        ModelRef::HubGguf(id) => DraftRef::Hub(id),
        _ => return Err(CliError::Usage(not_a_gguf_draft(&source.name)).into()),
    };
    Ok(LlamaCppDraft {
        source: Box::new(source),
        load,
        n_max: req.n_max,
        n_gpu_layers: req.n_gpu_layers,
    })
}

/// Why a draft that is not a GGUF cannot be llama.cpp's.
fn not_a_gguf_draft(name: &str) -> String {
    format!(
        "llama.cpp loads a draft from a GGUF: {name} is not one (give --model-draft FILE.gguf \
         or ORG/NAME:QUANT)"
    )
}

/// The engines' own settings checked and put in the demand (SGLang's ranks, Ollama's cache
/// type), and vLLM's configuration for it.
fn engine_settings(
    args: &SelectArgs,
    demand: &mut Demand,
    candidates: &[crate::plan::Candidate],
    engine: Option<Engine>,
) -> Result<VllmConfig> {
    if engine == Some(Engine::Sglang) && !candidates.iter().any(|c| c.is_gpu()) {
        return Err(CliError::Usage(
            "SGLang serves from GPUs and none is here: give --device sim:h100 (or another GPU, \
             or sim:SIZE)"
                .into(),
        )
        .into());
    }
    Ok(match demand {
        Demand::Model { settings, source } => {
            settings.sglang.tp_size = sglang_tp(args, &source.arch, candidates, engine)?;
            if engine == Some(Engine::Ollama) {
                ollama_kv_type(&args.settings, settings)?;
            }
            vllm_request(&args.vllm, source, settings, candidates, engine)?
        }
        Demand::Bytes(_) => VllmConfig::defaults(1),
    })
}

/// What `--max-context` and `--max-concurrency` found (`Some(None)`: not even one).
#[derive(Default)]
struct Inverse {
    longest_context: Option<Option<u64>>,
    most_sequences: Option<Option<u64>>,
    dtype: Option<Option<crate::model::Precision>>,
}

/// When nothing fits, the changes that would make it fit, each planned with: a serving plan's by
/// the serving engine's rules, a training step's by its own changes.
fn what_would_fit(
    demand: &Demand,
    engine: Option<Engine>,
    (candidates, policy): (&[crate::plan::Candidate], &crate::plan::Policy),
    (vllm, llamacpp): (&VllmConfig, &LlamaCppConfig),
    plan: &crate::plan::Plan,
) -> Vec<crate::plan::Suggestion> {
    let request = SuggestRequest {
        engine,
        demand,
        candidates,
        policy,
        vllm,
        llamacpp,
        max_context: plan.max_context,
    };
    if plan.accounting == Accounting::PytorchTraining {
        suggest_training(&request)
    } else {
        suggest(&request)
    }
}

/// `--max-context`, `--max-concurrency` and `--suggest-dtype` answered over the candidates,
/// and put in the demand's settings (and vLLM's configuration) the plan is made with.
fn inverse_questions(
    args: &SelectArgs,
    demand: &mut Demand,
    engine: Option<Engine>,
    (candidates, policy): (&[crate::plan::Candidate], &crate::plan::Policy),
    vllm: &mut VllmConfig,
    llamacpp: &LlamaCppConfig,
) -> Inverse {
    let Demand::Model { source, settings } = demand else {
        return Inverse::default();
    };
    let probe = Demand::Model {
        source: source.clone(),
        settings: settings.clone(),
    };
    let request = SuggestRequest {
        engine,
        demand: &probe,
        candidates,
        policy,
        vllm,
        llamacpp,
        max_context: None,
    };
    let inverse = answer_inverse(args, &request, source.arch.max_position_embeddings);
    settings.context = inverse
        .longest_context
        .flatten()
        .unwrap_or(settings.context);
    settings.batch = inverse.most_sequences.flatten().unwrap_or(settings.batch);
    if let Some(Some(p)) = inverse.dtype {
        settings.dtype = Some(p);
    }
    *vllm = vllm_config(&args.vllm, settings);
    inverse
}

/// `--max-context`: the longest context that plans (up to the trained length); `--max-concurrency`
/// under llama.cpp and the generic rule: the most sequences that plan (vLLM's is read from its
/// plan).
fn answer_inverse(args: &SelectArgs, r: &SuggestRequest<'_>, trained: Option<u64>) -> Inverse {
    Inverse {
        longest_context: args.max_context.then(|| {
            longest_context(
                r,
                trained
                    .unwrap_or(MAX_CONTEXT_SEARCHED)
                    .min(MAX_CONTEXT_SEARCHED),
            )
        }),
        most_sequences: (args.max_concurrency && r.engine != Some(Engine::Vllm))
            .then(|| most_sequences(r, MAX_SEQUENCES_SEARCHED)),
        dtype: args.suggest_dtype.then(|| best_dtype(r)),
    }
}

/// Launch commands for a model (not for `--bytes`): each engine's for a serving plan, `torchrun`
/// for an FSDP2 training plan.
fn launches(
    args: &SelectArgs,
    spec: Option<&crate::model::SourceSpec>,
    demand: &Demand,
    plan: &crate::plan::Plan,
    engine: Option<Engine>,
    vllm: &VllmConfig,
    policy: &crate::plan::Policy,
) -> Vec<(Engine, Result<Launch, NoLaunch>)> {
    let training = plan.accounting == Accounting::PytorchTraining;
    match (spec, demand, plan.kind) {
        (Some(spec), Demand::Model { source, settings }, _)
            if source.arch.num_layers > 0 && !training =>
        {
            let model = ModelRef::for_source(spec, source);
            let settings = LaunchSettings {
                context: settings.context,
                batch: settings.batch,
                layers: source.arch.num_layers,
                memory_fraction: match engine {
                    Some(Engine::Vllm) => vllm.gpu_memory_utilization,
                    _ => policy.memory_fraction,
                },
                cpu_offload_gb: args.vllm.cpu_offload_gb,
                pooling: source.arch.encoder.map(|e| e.pooling),
                vllm: VllmFlags::of(vllm),
                llamacpp_cache_type: (settings.kv_dtype != crate::model::KV_F16)
                    .then_some(settings.kv_dtype.name),
            };
            select_engines(args, &model)
                .into_iter()
                .map(|e| (e, launch(e, &model, plan, &settings)))
                .collect()
        }
        (_, Demand::Model { source, settings }, PlanKind::Sharded | PlanKind::DataParallel) => {
            // The recipe the estimate resolved: the checkpoint's precision where none is asked.
            let recipe = source
                .estimate(settings)
                .ok()
                .and_then(|b| b.training_step)
                .map(|t| t.recipe);
            torchrun(plan, settings, recipe)
                .map(|l| vec![(Engine::Torchrun, Ok(l))])
                .unwrap_or_default()
        }
        _ => Vec::new(),
    }
}
