//! `gpumem estimate`.

use anyhow::Result;

use super::options::{
    check_context, estimate_command_settings, estimate_source, load_options, probe_all,
    PROBE_TIMEOUT,
};
use crate::backend::{discover_with, host_info};
use crate::cli::EstimateArgs;
use crate::exit::Exit;
use crate::model::catalog;
use crate::output::estimate::{CatalogReport, DeviceFit, EstimateReport};
use crate::output::Output;
use crate::plan::engines::vllm::VllmConfig;
use crate::plan::engines::LlamaCppConfig;
use crate::plan::launch::ModelRef;
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
