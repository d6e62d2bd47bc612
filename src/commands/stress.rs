//! `gpumem stress`.

use std::sync::Arc;

use anyhow::{Context, Result};

use super::options::{check_stress_device, probe_all_until, stress_options, stress_pool_config};
use crate::alloc::{FaultInjector, Pool};
use crate::backend::default_device_spec;
use crate::cli::StressArgs;
use crate::device::DeviceMemory;
use crate::error::CliError;
use crate::exit::Exit;
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
    let bars: Vec<(StressPhase, Progress)> = [
        (StressPhase::Ramp, 256),
        (StressPhase::Exhaust, 8),
        (StressPhase::Churn, args.ops.map(|o| o * 2).unwrap_or(0)),
        (StressPhase::Recover, 2),
    ]
    .into_iter()
    .map(|(p, n)| (p, out.progress(n, &format!("{p:?}").to_lowercase())))
    .collect();
    let progress = |phase: StressPhase, done: u64, _total: u64| {
        for (p, bar) in &bars {
            if *p == phase {
                bar.set(done);
            } else if *p < phase {
                bar.finish();
            }
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
    for (_, bar) in &bars {
        bar.finish();
    }
    drop(pool);
    let (backend, index) = spec.identity();
    let report = StressReport::new(backend.into(), index, base.name(), total, outcome);
    out.emit(&report)?;
    if report.outcome.interrupted {
        out.note("interrupted: the current phase was cut short; everything was freed");
        return Ok(super::signals::interrupted_exit());
    }
    if !report.outcome.passed {
        return Err(CliError::AfterReport(format!(
            "stress failed: {}",
            report.failure_lines().join("; ")
        ))
        .into());
    }
    Ok(Exit::Success)
}
