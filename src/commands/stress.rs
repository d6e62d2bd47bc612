//! `gpumem stress`.

use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};

use super::exports::Renderers;
use super::options::{
    check_export_paths, check_stress_device, probe_all_until, stress_options, stress_pool_config,
};
use crate::alloc::{FaultInjector, Pool};
use crate::backend::default_device_spec;
use crate::cli::StressArgs;
use crate::device::DeviceMemory;
use crate::error::CliError;
use crate::exit::Exit;
use crate::output::export::{stress_junit, stress_markdown};
use crate::output::prometheus::stress_prometheus;
use crate::output::stress::StressReport;
use crate::output::{Output, Progress};
use crate::workload::stress::{run_stress, DeviceBaseline, StressPhase};

/// Runs `gpumem stress` and returns its exit status.
pub fn run(args: &StressArgs, out: &Output) -> Result<Exit> {
    let interrupt = super::signals::install();
    let probe = probe_all_until(args.timeout, &interrupt);
    let spec = args
        .device
        .clone()
        .unwrap_or_else(|| default_device_spec(&probe));
    check_stress_device(&spec)?;
    check_export_paths(&args.exports, &[])?;
    let base = super::signals::open_until_signal(&spec, args.device.is_some(), &probe)?;
    let (baseline, total) =
        DeviceBaseline::read(base.as_ref()).with_context(|| format!("querying {spec}"))?;
    let injector = args
        .inject_failures
        .map(|rate| Arc::new(FaultInjector::new(base.clone(), rate, args.seed)));
    let device: Arc<dyn DeviceMemory> = match &injector {
        Some(i) => i.clone(),
        None => base.clone(),
    };
    let config = stress_pool_config(args, &spec)?;
    let pool = Pool::new(device, config).with_context(|| format!("creating a pool on {spec}"))?;
    let options = stress_options(args, interrupt.clone());
    // One bar, for the phase running: drawn when it starts, cleared when the next one does,
    // its length the phase's own, fixed when it starts (each phase reports a fixed total).
    let bar: Mutex<Option<(StressPhase, Progress)>> = Mutex::new(None);
    let progress = |phase: StressPhase, done: u64, total: u64| {
        let mut current = bar
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if current.as_ref().map(|(p, _)| *p) != Some(phase) {
            if let Some((_, old)) = current.take() {
                old.finish();
            }
            *current = Some((
                phase,
                out.progress(total, &format!("{phase:?}").to_lowercase()),
            ));
        }
        if let Some((_, b)) = current.as_ref() {
            b.set(done.min(total));
        }
    };
    let injected = || injector.as_ref().map_or(0, |i| i.injected());
    let outcome = run_stress(
        &pool,
        base.as_ref(),
        baseline,
        &options,
        &injected,
        &progress,
    );
    if let Some((_, last)) = bar
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take()
    {
        last.finish();
    }
    drop(pool);
    let (backend, index) = spec.identity();
    let report = StressReport::new(backend.into(), index, base.device_name(), total, outcome);
    out.emit(&report)?;
    super::exports::write(
        &args.exports,
        &[],
        Renderers {
            markdown: || stress_markdown(&report),
            junit: || stress_junit(&report),
            prometheus: || stress_prometheus(&report),
        },
    )
    .map_err(super::exports::after_report)?;
    if report.outcome.interrupted {
        out.note("interrupted: the current phase was cut short; everything was freed");
        return Ok(super::signals::interrupted_exit());
    }
    if !report.outcome.passed {
        return Err(CliError::AfterReport(
            Exit::Failure,
            format!("stress failed: {}", report.failure_lines().join("; ")),
        )
        .into());
    }
    Ok(Exit::Success)
}
