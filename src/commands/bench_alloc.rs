//! `gpumem bench-alloc`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};

use super::options::{
    bench_pool_config, bench_preset, bench_thresholds, bench_workload, check_bench_args,
    probe_all_until,
};
use crate::alloc::{Pool, Preset};
use crate::backend::{default_device_spec, DeviceSpec};
use crate::cli::{BenchAllocArgs, WorkloadKind};
use crate::device::DeviceMemory;
use crate::error::CliError;
use crate::exit::Exit;
use crate::output::bench::{failure_text, timeline_svg, BenchReport, DeviceView};
use crate::output::export::{bench_junit, bench_markdown};
use crate::output::transfer::TransferReport as TransferBenchReport;
use crate::output::Output;
use crate::workload::bench::{run_pool, run_raw, Arena, Options};
use crate::workload::gates::{Measured, Thresholds};
use crate::workload::transfer::run_transfers;

/// `--workload transfer`: blocking versus double-buffered transfers through a pool allocation.
fn transfer(
    args: &BenchAllocArgs,
    out: &Output,
    spec: &DeviceSpec,
    device: Arc<dyn DeviceMemory>,
    total: u64,
    interrupt: &AtomicBool,
) -> Result<Exit> {
    let config = bench_pool_config(Preset::Default, spec, args.transfer_size)?;
    let pool =
        Pool::new(device.clone(), config).with_context(|| format!("creating a pool on {spec}"))?;
    let run = run_transfers(&pool, args.transfer_size, args.chunk, 5, &|| {
        interrupt.load(Ordering::SeqCst)
    })?;
    pool.empty_cache();
    let slowest = run.upload.speedup.min(run.download.speedup);
    let gates = Thresholds {
        min_speedup: args.gates.min_speedup,
        ..Thresholds::default()
    }
    .check(&Measured {
        hit_rate: 0.0,
        fragmentation_peak: 0.0,
        speedup: slowest,
        alloc_p99_ns: 0,
    });
    let interrupted = interrupt.load(Ordering::SeqCst);
    let failure = crate::output::transfer::failure_text(run.corruptions, &gates);
    out.emit(&TransferBenchReport {
        device: DeviceView::of(spec, device.as_ref(), total),
        workload: "transfer",
        // A run cut short has not shown that it passes.
        passed: !interrupted && failure.is_none(),
        gates,
        transfer: run,
        interrupted,
    })?;
    finish(interrupted, failure)
}

/// The exit once the report is out: 128 + the signal when interrupted, else exit 1 with the
/// failure's line, else success.
fn finish(interrupted: bool, failure: Option<String>) -> Result<Exit> {
    if interrupted {
        return Ok(super::signals::interrupted_exit());
    }
    match failure {
        Some(why) => Err(CliError::AfterReport(why).into()),
        None => Ok(Exit::Success),
    }
}

/// Runs `gpumem bench-alloc` and returns its exit status.
pub fn run(args: &BenchAllocArgs, out: &Output) -> Result<Exit> {
    // First, so that a signal during set-up (a large workload takes a while to build) still
    // ends in a report rather than the default action.
    let interrupt = super::signals::install();
    check_bench_args(args)?;
    let probe = probe_all_until(args.timeout, &interrupt);
    let spec = args
        .device
        .clone()
        .unwrap_or_else(|| default_device_spec(&probe));
    let device = super::signals::open_until_signal(&spec, args.device.is_some(), &probe)?;
    let (free, total) = device
        .mem_info()
        .with_context(|| format!("querying {spec}"))?;
    if args.workload == WorkloadKind::Transfer && args.trace.is_none() {
        return transfer(args, out, &spec, device, total, &interrupt);
    }
    replay(args, out, &spec, device, (free, total), &interrupt)
}

/// Replays the workload through the pool, then (unless `--no-baseline`) straight on the device.
fn replay(
    args: &BenchAllocArgs,
    out: &Output,
    spec: &DeviceSpec,
    device: Arc<dyn DeviceMemory>,
    (free, total): (u64, u64),
    interrupt: &AtomicBool,
) -> Result<Exit> {
    let arena = Arena::on_device(free, device.max_allocation());
    let workload = bench_workload(args, arena.max_live)?;
    let preset = bench_preset(args, &workload);
    let config = bench_pool_config(preset, spec, arena.for_workload(&workload))?;
    let pool =
        Pool::new(device.clone(), config).with_context(|| format!("creating a pool on {spec}"))?;
    if device.simulated() {
        out.note("note: sim device — results are simulated; no memory is reserved");
    }
    let options = Options {
        interrupt: Some(interrupt),
        verify: !args.no_verify,
        timeline_points: if args.timeline.is_some() { 2000 } else { 0 },
    };
    let ops = workload.ops.len() as u64;
    log::info!(
        "{}: {ops} operations on {spec}, preset {}",
        workload.name,
        preset.name()
    );
    let bar = out.progress(ops, "pool");
    let pool_run = run_pool(&workload, &pool, options, &mut |done| bar.set(done))?;
    bar.finish();
    let leaked = pool.stats().active_buffers;
    pool.empty_cache();
    drop(pool);
    let raw_run = if args.no_baseline || interrupt.load(Ordering::SeqCst) {
        None
    } else {
        let bar = out.progress(ops, "raw");
        let run = run_raw(&workload, device.as_ref(), options, &mut |done| {
            bar.set(done)
        })?;
        bar.finish();
        Some(run)
    };
    let interrupted = interrupt.load(Ordering::SeqCst);
    let corruptions = pool_run.corruptions + raw_run.as_ref().map_or(0, |r| r.corruptions);
    let device = DeviceView::of(spec, device.as_ref(), total);
    let mut report = BenchReport::from_runs(
        device,
        &workload,
        &pool_run,
        raw_run.as_ref(),
        preset,
        arena,
    );
    report.gates = bench_thresholds(args).check(&Measured {
        hit_rate: report.pool.hit_rate,
        fragmentation_peak: report.pool.fragmentation_peak,
        speedup: report.speedup.unwrap_or(0.0),
        alloc_p99_ns: report.pool.alloc_ns.p99,
    });
    let failure = failure_text(corruptions, leaked, &report.gates);
    // A replay cut short has not shown that it passes.
    report.passed = !interrupted && failure.is_none();
    report.interrupted = interrupted;
    if let Some(path) = &args.timeline {
        let inputs: Vec<&std::path::Path> = args.trace.iter().map(|p| p.as_path()).collect();
        crate::input::write_atomic(path, timeline_svg(&report).as_bytes(), &inputs)
            .with_context(|| format!("writing --timeline {}", path.display()))?;
    }
    out.emit(&report)?;
    let inputs: Vec<&std::path::Path> = args.trace.iter().map(|p| p.as_path()).collect();
    super::exports::write(
        &args.export_markdown,
        args.export_junit.as_deref(),
        &inputs,
        || bench_markdown(&report),
        || bench_junit(&report),
    )?;
    if interrupted {
        out.note("interrupted: the replay stopped early; everything was freed");
    }
    finish(interrupted, failure)
}
