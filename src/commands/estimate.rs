//! `gpumem estimate`.

use anyhow::Result;

use super::options::{estimate_settings, estimate_source, load_options, probe_all, PROBE_TIMEOUT};
use crate::backend::{discover_with, BackendKind};
use crate::cli::EstimateArgs;
use crate::exit::Exit;
use crate::model::catalog;
use crate::output::estimate::{CatalogReport, DeviceFit, EstimateReport};
use crate::output::Output;

/// Runs `gpumem estimate` and returns its exit status.
pub fn run(args: &EstimateArgs, out: &Output) -> Result<Exit> {
    if args.list_models {
        out.emit(&CatalogReport::new(&catalog()))?;
        return Ok(Exit::Success);
    }
    let spec = estimate_source(args)?;
    let settings = estimate_settings(&args.settings)?;
    let model = super::load_model(&spec, &load_options(&args.settings), out)?;
    let breakdown = model.estimate(&settings)?;
    let fits = args.fits.then(|| {
        let backends = discover_with(&probe_all(PROBE_TIMEOUT));
        backends
            .iter()
            .filter(|b| b.available && b.backend != BackendKind::Nvml)
            .flat_map(|b| {
                b.devices.iter().map(move |d| DeviceFit {
                    backend: b.backend,
                    device: d.index,
                    name: d.name.clone(),
                    available_bytes: d.free_or_total(),
                    fits: breakdown.total_bytes <= d.free_or_total(),
                })
            })
            .collect::<Vec<_>>()
    });
    let none_fit = fits.as_ref().is_some_and(|f| !f.iter().any(|d| d.fits));
    out.emit(&EstimateReport::new(&model, &settings, breakdown, fits))?;
    Ok(if none_fit {
        Exit::DoesNotFit
    } else {
        Exit::Success
    })
}
