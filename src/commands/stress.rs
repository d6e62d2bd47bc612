//! `gpumem stress`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::alloc::{DeviceMemory, FaultInjector, MemoryConfig, Pool};
use crate::backend::{default_device_spec, open_device, DeviceSpec};
use crate::cli::{Phase, StressArgs};
use crate::commands::bench_alloc::device_identity;
use crate::error::CliError;
use crate::exit::Exit;
use crate::output::stress::StressReport;
use crate::output::{Output, Progress};
use crate::workload::stress::{run_stress, StressOptions, StressPhase};

/// Runs `gpumem stress`.
pub fn run(args: &StressArgs, out: &Output) -> Result<Exit> {
    let spec = args
        .device
        .clone()
        .unwrap_or_else(|| default_device_spec(Duration::from_secs(5)));
    if matches!(spec, DeviceSpec::Sim { .. }) {
        return Err(CliError::Usage("stress checks data integrity, and sim:SIZE holds no data; use host:SIZE or a real device".into()).into());
    }
    let base = open_device(&spec)?;
    let (free_before, total) = base
        .mem_info()
        .with_context(|| format!("querying {spec}"))?;
    let injector = args
        .inject_failures
        .map(|rate| Arc::new(FaultInjector::new(base.clone(), rate, args.seed)));
    let device: Arc<dyn DeviceMemory> = match &injector {
        Some(i) => i.clone(),
        None => base.clone(),
    };
    let mut config = MemoryConfig::default()
        .with_tracking(true)
        .with_cpu_fallback(!args.no_cpu_fallback);
    if matches!(spec, DeviceSpec::Host { capacity: Some(_) }) {
        // host:SIZE is the whole budget.
        config = config.with_gpu_memory_fraction(1.0).with_min_free_bytes(0);
    }
    if let Some(max) = args.max_pool {
        if max == 0 {
            return Err(CliError::Usage("--max-pool must be greater than zero".into()).into());
        }
        config = config.with_max_pool_bytes(max);
    }
    let config = config.with_env_overrides()?;
    let pool = Pool::new(device, config).with_context(|| format!("creating a pool on {spec}"))?;
    let interrupt = Arc::new(AtomicBool::new(false));
    {
        let flag = interrupt.clone();
        // A second handler (e.g. in tests that call run twice) is refused; the first one sets
        // the same kind of flag, so the error is not worth stopping for.
        let _ = ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst));
    }
    let mut phases: Vec<StressPhase> = if args.phases.is_empty() {
        vec![
            StressPhase::Ramp,
            StressPhase::Exhaust,
            StressPhase::Churn,
            StressPhase::Recover,
        ]
    } else {
        args.phases
            .iter()
            .map(|p| match p {
                Phase::Ramp => StressPhase::Ramp,
                Phase::Exhaust => StressPhase::Exhaust,
                Phase::Churn => StressPhase::Churn,
                Phase::Recover => StressPhase::Recover,
            })
            .collect()
    };
    phases.sort();
    phases.dedup();
    let threads = args.threads.map(|t| t as usize).unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
    });
    let options = StressOptions {
        phases,
        threads,
        duration: args.duration,
        ops: args.ops,
        max_size: args.max_size.max(512),
        seed: args.seed,
        plant_corruption: args.plant_corruption,
        interrupt: interrupt.clone(),
    };
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
        free_before,
        &options,
        &injected,
        &progress,
    );
    for (_, bar) in &bars {
        bar.finish();
    }
    drop(pool);
    let (backend, index) = device_identity(&spec);
    let report = StressReport::new(backend, index, base.name(), total, outcome);
    out.emit(&report)?;
    if report.outcome.interrupted {
        out.note("interrupted: the current phase was cut short; everything was freed");
    }
    if !report.outcome.passed {
        return Err(CliError::AfterReport(format!(
            "stress failed: {}",
            report.outcome.failures.join("; ")
        ))
        .into());
    }
    Ok(Exit::Success)
}
