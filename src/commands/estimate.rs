//! `gpumem estimate`.

use anyhow::Result;

use super::options::{
    check_context, check_vllm_vision, estimate_command_settings, estimate_engine, estimate_source,
    load_options, probe_all, sim_devices, vllm_flag_given, vllm_request, PROBE_TIMEOUT,
};
use crate::backend::{discover_with, host_info};
use crate::cli::{EstimateArgs, InferenceEngine};
use crate::error::CliError;
use crate::exit::Exit;
use crate::model::catalog;
use crate::model::{ModelSource, SourceKind};
use crate::output::estimate::{
    CatalogReport, ChosenBy, DeviceFit, EngineChoice, EstimateReport, LlamaCppNeed,
};
use crate::output::estimate_compare::{CompareReport, EngineRow};
use crate::output::estimate_ollama::OllamaEstimateReport;
use crate::output::estimate_sglang::SglangEstimateReport;
use crate::output::estimate_vllm::VllmEstimateReport;
use crate::output::Output;
use crate::plan::engines::vllm::VllmConfig;
use crate::plan::engines::LlamaCppConfig;
use crate::plan::engines::Settings;
use crate::plan::launch::Engine;
use crate::plan::launch::ModelRef;
use crate::plan::EngineAccount;
use crate::plan::{
    candidates_from_discovery, select_for_engine, Accounting, Demand, Policy, VerdictReason,
};

/// Runs `gpumem estimate` and returns its exit status.
pub fn run(args: &EstimateArgs, out: &Output) -> Result<Exit> {
    if args.list_models {
        out.emit(&CatalogReport::new(&catalog()))?;
        return Ok(Exit::Success);
    }
    let spec = estimate_source(args)?;
    let mut settings = estimate_command_settings(args)?;
    let model = super::load_model(&spec, &load_options(&args.settings), out)?;
    check_context(&model.name, &model.arch, &settings, &args.settings)?;
    settings.generate_assistant = load_assistant(args, out)?;
    let engine = estimate_engine(args);
    match engine {
        InferenceEngine::Vllm => return vllm_need(args, model, settings, out),
        InferenceEngine::Sglang => return sglang_need(args, model, settings, out),
        InferenceEngine::Ollama => return ollama_need(args, model, settings, out),
        InferenceEngine::All => return side_by_side(args, &model, &settings, out),
        _ => {}
    }
    let infer = settings.mode == crate::plan::engines::Mode::Infer;
    let llamacpp = infer && engine == InferenceEngine::LlamaCpp;
    if llamacpp {
        // llama-server's outputs: the last token's logits of each sequence (an encoder's every
        // token), as `select --engine llama.cpp` plans.
        settings.llamacpp.outputs = model.arch.encoder.is_none().then_some(settings.batch);
    }
    let breakdown = model.estimate(&settings)?;
    let planned = if llamacpp && !args.device.is_empty() {
        Some(llamacpp_need(args, &model, &settings)?)
    } else {
        None
    };
    // `--fits` judges this machine's devices as `select` would, by the serving engine's rule.
    let fits = if args.fits {
        Some(fits_here(&spec, &model, &settings, llamacpp)?)
    } else {
        None
    };
    let none_fit = fits.as_ref().is_some_and(|f| !f.iter().any(|d| d.fits));
    let mut report = EstimateReport::new(&model, &settings, breakdown, fits);
    if infer {
        report.engine = Some(EngineChoice {
            name: if engine == InferenceEngine::Transformers {
                "transformers"
            } else {
                "llama.cpp"
            },
            chosen_by: if args.engine.is_some() {
                ChosenBy::Flag
            } else if model.kind == SourceKind::Gguf {
                ChosenBy::Format
            } else {
                ChosenBy::Default
            },
        });
    }
    report.llamacpp = planned;
    let does_not_start = report.llamacpp.as_ref().is_some_and(|n| !n.fits);
    out.emit(&report)?;
    Ok(if none_fit || does_not_start {
        Exit::DoesNotFit
    } else {
        Exit::Success
    })
}

/// `--fits`: this machine's devices judged as `select` judges them, llama.cpp's figures by its
/// own fit, training and generate by the engine the model's format implies.
fn fits_here(
    spec: &crate::model::SourceSpec,
    model: &ModelSource,
    settings: &Settings,
    llamacpp: bool,
) -> Result<Vec<DeviceFit>> {
    let found = discover_with(&probe_all(PROBE_TIMEOUT));
    let host = host_info().hostname.unwrap_or_else(|| "localhost".into());
    let candidates = candidates_from_discovery(&found, &host);
    let engine = if llamacpp {
        Some(Engine::LlamaCpp)
    } else {
        ModelRef::for_source(spec, model).engines().first().copied()
    };
    let demand = Demand::Model {
        source: Box::new(model.clone()),
        settings: Box::new(settings.clone()),
    };
    let selection = select_for_engine(
        engine,
        &demand,
        &candidates,
        &Policy::default(),
        (
            &VllmConfig::for_settings(settings),
            &llamacpp_config(settings),
        ),
    )?;
    Ok(selection
        .candidates
        .iter()
        .map(|v| DeviceFit {
            backend: v.backend,
            device: v.device,
            name: v.name.clone(),
            available_bytes: v.usable_bytes,
            needed_bytes: v.needed_bytes,
            engine_skips: matches!(
                v.reason,
                VerdictReason::SoftwareDeviceSkipped | VerdictReason::NotForEngine
            ),
            fits: v.fits,
        })
        .collect())
}

/// `estimate --device …` under llama.cpp: its fit on those devices, as `select --engine
/// llama.cpp` plans it there.
fn llamacpp_need(
    args: &EstimateArgs,
    model: &ModelSource,
    settings: &Settings,
) -> Result<LlamaCppNeed> {
    let candidates = sim_devices(&args.device)?;
    let selection = plan_with(Engine::LlamaCpp, model, settings, &candidates)?;
    let fits = selection.plan.kind != crate::plan::PlanKind::None;
    let account = match selection.plan.account {
        Some(EngineAccount::LlamaCpp(a)) => Some(a),
        _ => None,
    };
    Ok(LlamaCppNeed {
        devices: candidates.iter().map(|c| c.name.clone()).collect(),
        needed_bytes: selection.required_bytes,
        fits,
        account,
    })
}

/// `model` under `settings` planned by `engine` over `candidates`, as `select --engine` plans
/// it there.
fn plan_with(
    engine: Engine,
    model: &ModelSource,
    settings: &Settings,
    candidates: &[crate::plan::Candidate],
) -> Result<crate::plan::Selection> {
    plan_vllm_with(
        engine,
        model,
        settings,
        candidates,
        &VllmConfig::for_settings(settings),
    )
}

/// [`plan_with`] under vLLM's settings `vllm` (its flags, as `select` takes them).
fn plan_vllm_with(
    engine: Engine,
    model: &ModelSource,
    settings: &Settings,
    candidates: &[crate::plan::Candidate],
    vllm: &VllmConfig,
) -> Result<crate::plan::Selection> {
    let demand = Demand::Model {
        source: Box::new(model.clone()),
        settings: Box::new(settings.clone()),
    };
    Ok(select_for_engine(
        Some(engine),
        &demand,
        candidates,
        &Policy::default(),
        (vllm, &llamacpp_config(settings)),
    )?)
}

/// Exit 3 where the engine does not serve on the devices.
fn exit_for(serves: bool) -> Exit {
    if serves {
        Exit::Success
    } else {
        Exit::DoesNotFit
    }
}

/// `--assistant-model`, read like `--model` (a config.json by its path).
fn load_assistant(
    args: &EstimateArgs,
    out: &Output,
) -> Result<Option<std::sync::Arc<crate::plan::engines::pytorch::GenerateAssistant>>> {
    let Some(name) = &args.assistant_model else {
        return Ok(None);
    };
    let path = std::path::Path::new(name);
    // A name ending in .json is a file, even one that is missing (its error names the path).
    let json = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    let spec = if json || path.is_file() {
        crate::model::SourceSpec::Config(path.to_path_buf())
    } else {
        crate::model::SourceSpec::Catalog(name.clone())
    };
    let draft = super::load_model(&spec, &load_options(&args.settings), out)?;
    Ok(Some(std::sync::Arc::new(
        crate::plan::engines::pytorch::GenerateAssistant {
            name: draft.name,
            arch: draft.arch,
            tokens: u64::from(args.num_assistant_tokens),
        },
    )))
}

/// llama.cpp's settings as `estimate` counts them: -fa as asked, the rest llama-server's.
fn llamacpp_config(settings: &Settings) -> LlamaCppConfig {
    LlamaCppConfig {
        flash_attention_off: !settings.flash_attention,
        ..LlamaCppConfig::default()
    }
}

/// `--device`'s GPUs, else this machine's, and the first GPU's name; a usage error without one
/// (`engine`'s need depends on the GPU).
fn gpu_candidates(
    args: &EstimateArgs,
    engine: &str,
) -> Result<(Vec<crate::plan::Candidate>, String)> {
    let candidates = devices_or_here(args)?;
    let Some(gpu) = candidates
        .iter()
        .find(|c| c.is_gpu())
        .map(|c| c.name.clone())
    else {
        return Err(CliError::Usage(format!(
            "{engine}'s need depends on the GPU and this machine has none: give --device \
             sim:h100 (or another GPU, or sim:SIZE)"
        ))
        .into());
    };
    Ok((candidates, gpu))
}

/// `--device`'s devices, else this machine's.
fn devices_or_here(args: &EstimateArgs) -> Result<Vec<crate::plan::Candidate>> {
    let candidates = sim_devices(&args.device)?;
    if !candidates.is_empty() {
        return Ok(candidates);
    }
    let found = discover_with(&probe_all(PROBE_TIMEOUT));
    let host = host_info().hostname.unwrap_or_else(|| "localhost".into());
    Ok(candidates_from_discovery(&found, &host))
}

/// `estimate --engine all`: the model planned by llama.cpp, Ollama, vLLM and SGLang on the same
/// devices, each as `select --engine E` plans it; an engine that does not take the model says
/// why. Exit 3 when none serves.
fn side_by_side(
    args: &EstimateArgs,
    model: &ModelSource,
    settings: &Settings,
    out: &Output,
) -> Result<Exit> {
    let candidates = devices_or_here(args)?;
    let gguf = model.kind == SourceKind::Gguf;
    let no_gpu = !candidates.iter().any(|c| c.is_gpu());
    // vLLM's flags, where given, are checked and planned with as `--engine vllm` does.
    let vllm = match vllm_flag_given(&args.vllm) {
        Some(_) => vllm_request(&args.vllm, model, settings, &candidates, Some(Engine::Vllm))?,
        None => VllmConfig::for_settings(settings),
    };
    // Without vLLM's flags (which `vllm_request` has checked), the tower rule `--engine vllm`
    // refuses by, applied to its row.
    let towers_unplanned = vllm_flag_given(&args.vllm).is_none()
        && check_vllm_vision(&args.vllm, model, Some(Engine::Vllm)).is_err();
    let mut rows = Vec::new();
    for engine in [
        Engine::LlamaCpp,
        Engine::Ollama,
        Engine::Vllm,
        Engine::Sglang,
    ] {
        let checkpoint_only = matches!(engine, Engine::Vllm | Engine::Sglang);
        let selection = plan_vllm_with(engine, model, settings, &candidates, &vllm)?;
        let not_for = match (checkpoint_only, gguf, no_gpu) {
            (true, true, _) => Some("loads Hugging Face checkpoints, not a GGUF"),
            (true, _, true) => Some("serves from GPUs; none here (--device sim:h100)"),
            // As `--engine vllm` refuses it: vLLM would build and profile the towers.
            _ if engine == Engine::Vllm && towers_unplanned => {
                Some("loads and profiles towers gpumem does not model (--engine vllm says more)")
            }
            _ => None,
        };
        rows.push(engine_row(engine, &selection, (not_for, settings.context)));
    }
    let any = rows.iter().any(|r| r.serves);
    out.emit(&CompareReport {
        model: model.name.clone(),
        devices: candidates.iter().map(|c| c.name.clone()).collect(),
        engines: rows,
    })?;
    Ok(if any { Exit::Success } else { Exit::DoesNotFit })
}

/// One engine's row from its plan.
fn engine_row(
    engine: Engine,
    s: &crate::plan::Selection,
    (not_for, context): (Option<&'static str>, u64),
) -> EngineRow {
    let p = &s.plan;
    let release = p.accounting.release().map_or("", |v| v.version);
    let own = matches!(
        (engine, p.accounting),
        (Engine::LlamaCpp, Accounting::LlamaCpp)
            | (Engine::Ollama, Accounting::Ollama)
            | (Engine::Vllm, Accounting::Vllm)
            | (Engine::Sglang, Accounting::Sglang)
    );
    let not_for =
        not_for.or_else(|| (!own).then_some("its accounting does not cover this architecture"));
    EngineRow {
        engine,
        release,
        serves: not_for.is_none() && p.kind != crate::plan::PlanKind::None,
        needed_bytes: s.required_bytes,
        gpus: p.placements.iter().filter(|x| x.backend.is_gpu()).count() as u64,
        context: p
            .capacity
            .map(|c| c.context)
            .or_else(|| p.ollama().map(|o| o.num_ctx))
            .unwrap_or(context),
        kv_tokens: p.capacity.map(|c| c.kv_tokens),
        not_for,
    }
}

/// `estimate --engine ollama`: what Ollama chooses and where llama-server puts the model, as
/// `select --engine ollama` plans it on `--device` (else this machine's devices); exit 3 when
/// it does not load there.
fn ollama_need(
    args: &EstimateArgs,
    model: ModelSource,
    settings: Settings,
    out: &Output,
) -> Result<Exit> {
    let candidates = devices_or_here(args)?;
    let name = model.name.clone();
    let selection = plan_with(Engine::Ollama, &model, &settings, &candidates)?;
    let Some(EngineAccount::Ollama(account)) = selection.plan.account.clone() else {
        return Err(CliError::Usage(format!(
            "Ollama's placement does not cover {name} (llama.cpp's fit has no rule for its \
             architecture)"
        ))
        .into());
    };
    let loads = selection.plan.kind != crate::plan::PlanKind::None;
    out.emit(&OllamaEstimateReport {
        model: name,
        engine: "ollama",
        devices: candidates.iter().map(|c| c.name.clone()).collect(),
        needed_bytes: selection.required_bytes,
        loads,
        account: *account,
    })?;
    Ok(exit_for(loads))
}

/// `estimate --engine sglang`: SGLang's need on each GPU, planned as `select --engine sglang`
/// plans it on `--device` (else this machine's GPUs); exit 3 when it does not serve there.
fn sglang_need(
    args: &EstimateArgs,
    model: ModelSource,
    settings: Settings,
    out: &Output,
) -> Result<Exit> {
    let (candidates, gpu) = gpu_candidates(args, "SGLang")?;
    let name = model.name.clone();
    let selection = plan_with(Engine::Sglang, &model, &settings, &candidates)?;
    let Some(EngineAccount::Sglang(fit)) = selection.plan.account.clone() else {
        return Err(CliError::Usage(format!(
            "SGLang's accounting does not cover {name} (its pool is sized otherwise: recurrent \
             state, an encoder, a sparse-attention indexer or layers of two head sizes)"
        ))
        .into());
    };
    let serves = selection.plan.kind != crate::plan::PlanKind::None;
    out.emit(&SglangEstimateReport {
        model: name,
        engine: "sglang",
        gpu,
        needed_bytes: selection.required_bytes,
        serves,
        account: fit,
    })?;
    Ok(exit_for(serves))
}

/// `estimate --engine vllm`: vLLM's need on each GPU, planned as `select --engine vllm` plans
/// it on `--device` (else this machine's GPUs), under the same vLLM flags; exit 3 when it does
/// not start there.
fn vllm_need(
    args: &EstimateArgs,
    model: ModelSource,
    settings: Settings,
    out: &Output,
) -> Result<Exit> {
    let (candidates, gpu) = gpu_candidates(args, "vLLM")?;
    let vllm = vllm_request(
        &args.vllm,
        &model,
        &settings,
        &candidates,
        Some(Engine::Vllm),
    )?;
    let max_model_len = vllm.max_model_len;
    let name = model.name.clone();
    let selection = plan_vllm_with(Engine::Vllm, &model, &settings, &candidates, &vllm)?;
    let Some(EngineAccount::Vllm(fit)) = selection.plan.account.clone() else {
        return Err(CliError::Usage(format!(
            "vLLM's accounting does not cover {name} (its architecture is not modelled for vLLM)"
        ))
        .into());
    };
    let serves = selection.plan.kind != crate::plan::PlanKind::None;
    out.emit(&VllmEstimateReport {
        model: name,
        engine: "vllm",
        gpu,
        needed_bytes: selection.required_bytes,
        max_model_len,
        serves,
        account: fit,
    })?;
    Ok(exit_for(serves))
}
