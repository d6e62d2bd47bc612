//! `gpumem estimate`.

use anyhow::Result;

use super::options::{
    check_context, estimate_command_settings, estimate_source, load_options, probe_all,
    sim_devices, PROBE_TIMEOUT,
};
use crate::backend::{discover_with, host_info};
use crate::cli::{EstimateArgs, InferenceEngine};
use crate::error::CliError;
use crate::exit::Exit;
use crate::model::catalog;
use crate::model::ModelSource;
use crate::output::estimate::{CatalogReport, DeviceFit, EstimateReport};
use crate::output::estimate_vllm::VllmEstimateReport;
use crate::output::Output;
use crate::plan::engines::vllm::VllmConfig;
use crate::plan::engines::LlamaCppConfig;
use crate::plan::engines::Settings;
use crate::plan::launch::Engine;
use crate::plan::launch::ModelRef;
use crate::plan::EngineAccount;
use crate::plan::{candidates_from_discovery, select_for_engine, Demand, Policy};

/// Runs `gpumem estimate` and returns its exit status.
pub fn run(args: &EstimateArgs, out: &Output) -> Result<Exit> {
    if args.list_models {
        out.emit(&CatalogReport::new(&catalog()))?;
        return Ok(Exit::Success);
    }
    let spec = estimate_source(args)?;
    let settings = estimate_command_settings(args)?;
    let model = super::load_model(&spec, &load_options(&args.settings), out)?;
    check_context(&model.name, &model.arch, &settings, &args.settings)?;
    if args.engine == InferenceEngine::Vllm {
        return vllm_need(args, model, settings, out);
    }
    let breakdown = model.estimate(&settings)?;
    // `--fits` judges this machine's devices as `select` would, by the serving engine's rule.
    let fits = if args.fits {
        let found = discover_with(&probe_all(PROBE_TIMEOUT));
        let host = host_info().hostname.unwrap_or_else(|| "localhost".into());
        let candidates = candidates_from_discovery(&found, &host);
        let engine = ModelRef::for_source(&spec, &model)
            .engines()
            .first()
            .copied();
        let vllm = VllmConfig::for_settings(&settings);
        let demand = Demand::Model {
            source: Box::new(model.clone()),
            settings: Box::new(settings.clone()),
        };
        let selection = select_for_engine(
            engine,
            &demand,
            &candidates,
            &Policy::default(),
            (&vllm, &LlamaCppConfig::default()),
        )?;
        Some(
            selection
                .candidates
                .iter()
                .map(|v| DeviceFit {
                    backend: v.backend,
                    device: v.device,
                    name: v.name.clone(),
                    available_bytes: v.usable_bytes,
                    needed_bytes: v.needed_bytes,
                    fits: v.fits,
                })
                .collect::<Vec<_>>(),
        )
    } else {
        None
    };
    let none_fit = fits.as_ref().is_some_and(|f| !f.iter().any(|d| d.fits));
    out.emit(&EstimateReport::new(&model, &settings, breakdown, fits))?;
    Ok(if none_fit {
        Exit::DoesNotFit
    } else {
        Exit::Success
    })
}

/// `estimate --engine vllm`: vLLM's need on each GPU, planned as `select --engine vllm` plans
/// it on `--device` (else this machine's GPUs); exit 3 when it does not start there.
fn vllm_need(
    args: &EstimateArgs,
    model: ModelSource,
    settings: Settings,
    out: &Output,
) -> Result<Exit> {
    let mut candidates = sim_devices(&args.device)?;
    if candidates.is_empty() {
        let found = discover_with(&probe_all(PROBE_TIMEOUT));
        let host = host_info().hostname.unwrap_or_else(|| "localhost".into());
        candidates = candidates_from_discovery(&found, &host);
    }
    let Some(gpu) = candidates
        .iter()
        .find(|c| c.is_gpu())
        .map(|c| c.name.clone())
    else {
        return Err(CliError::Usage(
            "vLLM's need depends on the GPU and this machine has none: give --device sim:h100 \
             (or another GPU, or sim:SIZE)"
                .into(),
        )
        .into());
    };
    let vllm = VllmConfig::for_settings(&settings);
    let name = model.name.clone();
    let demand = Demand::Model {
        source: Box::new(model),
        settings: Box::new(settings),
    };
    let selection = select_for_engine(
        Some(Engine::Vllm),
        &demand,
        &candidates,
        &Policy::default(),
        (&vllm, &LlamaCppConfig::default()),
    )?;
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
        max_model_len: vllm.max_model_len,
        serves,
        account: fit,
    })?;
    Ok(if serves {
        Exit::Success
    } else {
        Exit::DoesNotFit
    })
}
