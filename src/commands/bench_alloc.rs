//! `gpumem bench-alloc`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};

use super::exports::Renderers;
use super::options::{
    bench_baseline, bench_compare, bench_confidence, bench_inputs, bench_pool_config, bench_preset,
    bench_run_plan, bench_thresholds, bench_workload, check_baseline_device, check_bench_args,
    probe_all_until,
};
use crate::alloc::{Pool, Preset};
use crate::backend::{default_device_spec, DeviceSpec};
use crate::cli::{BenchAllocArgs, WorkloadKind};
use crate::device::DeviceMemory;
use crate::error::CliError;
use crate::exit::Exit;
use crate::output::bench::{failure_text, BenchReport, DeviceView};
use crate::output::export::{bench_junit, bench_markdown};
use crate::output::prometheus::bench_prometheus;
use crate::output::runs::{AdaptiveView, ComparisonView, RunsView};
use crate::output::timeline::timeline_svg;
use crate::output::transfer::TransferReport as TransferBenchReport;
use crate::output::Output;
use crate::workload::baseline::{Baseline, BaselineError, Replayed};
use crate::workload::bench::{
    run_native, run_pool, run_raw, Arena, NativeRun, Options, PoolRun, RawRun,
};
use crate::workload::gates::{Measured, Thresholds};
use crate::workload::native::{Comparison, NativeComparison};
use crate::workload::stopping::{self, undecided_gates, Next, RunPlan, Stop};
use crate::workload::transfer::run_transfers;
use crate::workload::Workload;

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
        peak_reserved: 0,
    });
    let interrupted = interrupt.load(Ordering::SeqCst);
    let failure = crate::output::transfer::failure_text(run.corruptions, &gates)
        .map(|why| (Exit::Failure, why));
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

/// The exit once the report is out: 128 + the signal when interrupted, else the failure's exit
/// (1, or 6 for an undecided gate) with its line, else success.
fn finish(interrupted: bool, failure: Option<(Exit, String)>) -> Result<Exit> {
    if interrupted {
        return Ok(super::signals::interrupted_exit());
    }
    match failure {
        Some((exit, why)) => Err(CliError::AfterReport(exit, why).into()),
        None => Ok(Exit::Success),
    }
}

/// Runs `gpumem bench-alloc` and returns its exit status.
pub fn run(args: &BenchAllocArgs, out: &Output) -> Result<Exit> {
    // First, so that a signal during set-up (a large workload takes a while to build) still
    // ends in a report rather than the default action.
    let interrupt = super::signals::install();
    check_bench_args(args)?;
    // Read before the device is opened: a bad file should not wait on a driver.
    let baseline = bench_baseline(args)?;
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
    replay(
        args,
        out,
        &spec,
        device,
        (free, total),
        (&interrupt, baseline),
    )
}

/// One replay's results: the pool's run, the raw one unless skipped or interrupted, the one
/// through the device's native allocator (`--compare native` on a device that has one beside
/// its `reserve`), and the buffers the pool still held.
struct Replay {
    pool: PoolRun,
    raw: Option<RawRun>,
    native: Option<NativeRun>,
    leaked: u64,
}

/// Replays `workload` once through a fresh pool, then (unless `--no-raw`) straight on the device.
fn replay_once(
    ctx: &Bench<'_>,
    workload: &Workload,
    options: Options<'_>,
    label: &str,
) -> Result<Replay> {
    let pool = Pool::new(ctx.device.clone(), ctx.config.clone())
        .with_context(|| format!("creating a pool on {}", ctx.spec))?;
    let ops = workload.ops.len() as u64;
    let bar = ctx.out.progress(ops, &format!("pool{label}"));
    let pool_run = run_pool(workload, &pool, options, &mut |done| bar.set(done))?;
    bar.finish();
    let leaked = pool.stats().active_buffers;
    pool.empty_cache();
    drop(pool);
    let raw = if ctx.no_raw || ctx.interrupt.load(Ordering::SeqCst) {
        None
    } else {
        let bar = ctx.out.progress(ops, &format!("raw{label}"));
        let run = run_raw(workload, ctx.device.as_ref(), options, &mut |done| {
            bar.set(done)
        })?;
        bar.finish();
        Some(run)
    };
    let native = if ctx.compare.is_none() || raw.is_none() || ctx.interrupt.load(Ordering::SeqCst) {
        None
    } else {
        let bar = ctx.out.progress(ops, &format!("native{label}"));
        let run = run_native(workload, ctx.device.as_ref(), options, &mut |done| {
            bar.set(done)
        })?;
        bar.finish();
        run
    };
    Ok(Replay {
        pool: pool_run,
        raw,
        native,
        leaked,
    })
}

/// What every replay of one invocation shares.
struct Bench<'a> {
    out: &'a Output,
    spec: &'a DeviceSpec,
    device: Arc<dyn DeviceMemory>,
    config: crate::alloc::MemoryConfig,
    no_raw: bool,
    /// `--compare`: what the pool is set beside.
    compare: Option<Comparison>,
    interrupt: &'a AtomicBool,
}

/// The workload, preset and arena a replay uses, and what identifies them in a baseline: a
/// synthetic workload takes the baseline's live-bytes limit when this device has room for it,
/// and the baseline must have replayed the same operations.
fn prepare(
    args: &BenchAllocArgs,
    free: u64,
    device: &dyn DeviceMemory,
    baseline: Option<&Baseline>,
) -> Result<(Workload, Preset, Arena, Replayed)> {
    let arena = Arena::on_device(free, device.max_allocation());
    let max_live = match baseline.and_then(|b| b.replayed.max_live_bytes) {
        Some(saved) if saved <= arena.max_live => saved,
        _ => arena.max_live,
    };
    let arena = Arena { max_live, ..arena };
    let workload = bench_workload(args, max_live)?;
    let preset = bench_preset(args, &workload);
    let replayed = Replayed {
        workload: workload.name.clone(),
        ops: workload.ops.len() as u64,
        seed: workload.seed,
        preset: preset.name().into(),
        max_live_bytes: workload.seed.map(|_| max_live),
        fingerprint: format!("{:016x}", workload.fingerprint()),
    };
    if let Some(b) = baseline {
        check_same_replay(args, &b.replayed, &replayed)?;
    }
    Ok((workload, preset, arena, replayed))
}

/// Replays the workload `--warmup` + `--runs` times (or from `--min-runs` to `--max-runs`
/// until every gate is decided); the report details the last run, with each figure's
/// statistics over the measured runs, the gates on their medians and the comparison with
/// `--baseline`.
fn replay(
    args: &BenchAllocArgs,
    out: &Output,
    spec: &DeviceSpec,
    device: Arc<dyn DeviceMemory>,
    (free, total): (u64, u64),
    (interrupt, baseline): (&AtomicBool, Option<Baseline>),
) -> Result<Exit> {
    let view = DeviceView::of(spec, device.as_ref(), total);
    // Before the workload is compared: another device's free memory sizes a synthetic one
    // differently, and the device is the first thing to name.
    if let Some(b) = &baseline {
        check_baseline_device(args, b, &view.identity())?;
    }
    let (workload, preset, arena, replayed) =
        prepare(args, free, device.as_ref(), baseline.as_ref())?;
    if device.simulated() {
        out.note("note: sim device — results are simulated; no memory is reserved");
    }
    let plan = bench_run_plan(args)?;
    log::info!(
        "{}: {} operations on {spec}, preset {}, {}–{} runs after {} warm-up",
        workload.name,
        replayed.ops,
        preset.name(),
        plan.first(),
        plan.most(),
        args.warmup
    );
    let compare = bench_compare(args)?;
    let ctx = Bench {
        out,
        spec,
        config: bench_pool_config(preset, spec, arena.for_workload(&workload))?,
        device: device.clone(),
        no_raw: args.no_raw,
        compare,
        interrupt,
    };
    let shape = Shape {
        device: view,
        reserve_api: device.reserve_api(),
        workload: &workload,
        preset,
        arena,
        compare,
    };
    let confidence = bench_confidence(args)?;
    let mut per_run = Vec::new();
    let (measured, stop) = run_all(args, &ctx, &workload, plan, &mut |done| {
        let (Some(b), RunPlan::Until(range)) = (&baseline, plan) else {
            return Next::Stop(Stop::Decided);
        };
        let runs = shape.runs(args.warmup, &mut per_run, done);
        let view = compare_with(
            args,
            b,
            &replayed,
            (&shape.device.identity(), &runs),
            confidence,
        );
        let undecided = undecided_gates(&view.rows, &b.metrics);
        stopping::next(done.len(), range, &undecided, confidence)
    })?;
    let Some(last) = measured.last() else {
        // Interrupted during the warm-up: nothing was measured.
        out.note("interrupted during the warm-up: nothing was measured; everything was freed");
        return finish(true, None);
    };
    let mut runs = shape.runs(args.warmup, &mut per_run, &measured);
    if let (RunPlan::Until(range), Some(stop)) = (plan, stop) {
        runs.adaptive = Some(AdaptiveView::new(range, stop));
    }
    let mut report = shape.report(last);
    report.gates = bench_thresholds(args).check(&runs.medians());
    report.comparison = baseline.as_ref().map(|b| {
        compare_with(
            args,
            b,
            &replayed,
            (&report.device.identity(), &runs),
            confidence,
        )
    });
    let interrupted = interrupt.load(Ordering::SeqCst);
    let failure = run_failure(&measured, &report, runs.adaptive.as_ref());
    // A replay cut short has not shown that it passes.
    report.passed = !interrupted && failure.is_none();
    report.interrupted = interrupted;
    let saved = Baseline::new(report.device.identity(), replayed, runs.metrics.clone());
    report.runs =
        (measured.len() > 1 || args.warmup > 0 || runs.adaptive.is_some()).then_some(runs);
    write_outputs(args, out, &report, &saved)?;
    if interrupted {
        out.note("interrupted: the replay stopped early; everything was freed");
    }
    finish(interrupted, failure)
}

/// What every run's report shares: the device, the workload, the preset and the arena.
struct Shape<'a> {
    device: DeviceView,
    /// What the device's `reserve` calls: the native side where it has no allocator of its own.
    reserve_api: crate::device::Allocator,
    workload: &'a Workload,
    preset: Preset,
    arena: Arena,
    /// `--compare`: what the pool is set beside.
    compare: Option<Comparison>,
}

impl Shape<'_> {
    /// One run's report, its gates and verdict still to fill in.
    fn report(&self, run: &Replay) -> BenchReport {
        let mut report = BenchReport::from_runs(
            self.device.clone(),
            self.workload,
            &run.pool,
            run.raw.as_ref(),
            self.preset,
            self.arena,
        );
        report.native = match (self.compare, run.raw.as_ref()) {
            (Some(Comparison::Native), Some(raw)) => Some(NativeComparison::new(
                &run.pool,
                run.native.as_ref(),
                raw,
                self.reserve_api,
            )),
            _ => None,
        };
        report
    }

    /// The statistics over `measured`, whose reports so far are kept in `per_run` (each built
    /// once, however often the runs are judged).
    fn runs(&self, warmup: u32, per_run: &mut Vec<BenchReport>, measured: &[Replay]) -> RunsView {
        for run in &measured[per_run.len().min(measured.len())..] {
            per_run.push(self.report(run));
        }
        RunsView::of(warmup, &per_run[..measured.len()])
    }
}

/// Why the run fails, with its exit: corrupted or leaked buffers and missed gates (1) before
/// the comparison's regressions (1) and undecided gates (6).
fn run_failure(
    measured: &[Replay],
    report: &BenchReport,
    adaptive: Option<&AdaptiveView>,
) -> Option<(Exit, String)> {
    let corruptions: u64 = measured
        .iter()
        .map(|r| {
            r.pool.corruptions
                + r.raw.as_ref().map_or(0, |r| r.corruptions)
                + r.native.as_ref().map_or(0, |n| n.run.corruptions)
        })
        .sum();
    let leaked: u64 = measured.iter().map(|r| r.leaked).sum();
    failure_text(corruptions, leaked, &report.gates)
        .map(|why| (Exit::Failure, why))
        .or_else(|| {
            report
                .comparison
                .as_ref()
                .and_then(|c| c.failure_after(adaptive))
        })
}

/// This run against the baseline `b`; another trace of the job on its memory metrics alone
/// (its figures of time are another workload's).
fn compare_with(
    args: &BenchAllocArgs,
    b: &Baseline,
    replayed: &Replayed,
    (device, runs): (&str, &RunsView),
    confidence: crate::workload::baseline::Confidence,
) -> ComparisonView {
    let other_trace = b.replayed.another_trace(replayed);
    let mut b = b.clone();
    if other_trace {
        b.metrics.retain(|m, _| m.is_memory());
    }
    let mut view = ComparisonView::new(
        args.baseline.as_deref(),
        &b,
        device,
        runs,
        (&args.max_regression, confidence),
    );
    view.other_trace = other_trace.then(|| b.replayed.workload.clone());
    view
}

/// Runs the warm-up and the measured replays of `plan`, stopping at a signal. A range of runs
/// asks `judge` after each measured run from its minimum on whether to go on. The measured
/// runs are returned, with why a range stopped.
fn run_all(
    args: &BenchAllocArgs,
    ctx: &Bench<'_>,
    workload: &Workload,
    plan: RunPlan,
    judge: &mut dyn FnMut(&[Replay]) -> Next,
) -> Result<(Vec<Replay>, Option<Stop>)> {
    let single = args.warmup == 0 && plan == RunPlan::Fixed(1);
    for i in 0..args.warmup {
        // After a signal the warm-up is skipped but one measured run still starts (and stops
        // at once), so that an interrupted command always reports.
        if ctx.interrupt.load(Ordering::SeqCst) {
            break;
        }
        let label = format!(" warm-up {}/{}", i + 1, args.warmup);
        replay_once(ctx, workload, run_options(args, ctx, false), &label)?;
    }
    let mut measured: Vec<Replay> = Vec::new();
    loop {
        let done = measured.len();
        let interrupted = ctx.interrupt.load(Ordering::SeqCst);
        let next = match plan {
            _ if interrupted && done > 0 => Next::Stop(Stop::Interrupted),
            RunPlan::Fixed(n) if done >= n => Next::Stop(Stop::Decided),
            RunPlan::Fixed(_) => Next::Run,
            RunPlan::Until(range) if done < range.min => Next::Run,
            RunPlan::Until(_) => judge(&measured),
        };
        if let Next::Stop(stop) = next {
            let stop = matches!(plan, RunPlan::Until(_)).then_some(stop);
            return Ok((measured, stop));
        }
        let (label, last) = match plan {
            _ if single => (String::new(), true),
            RunPlan::Fixed(n) => (format!(" {}/{n}", done + 1), done + 1 == n),
            // Which run is the last is known only after it: each one is drawn.
            RunPlan::Until(r) => (format!(" {} ({}–{})", done + 1, r.min, r.max), true),
        };
        let run = replay_once(ctx, workload, run_options(args, ctx, last), &label)?;
        // A run cut short is partial; only the first run's partial figures are kept (as
        // without --runs), since a later one would pull the statistics down.
        if !ctx.interrupt.load(Ordering::SeqCst) || measured.is_empty() {
            measured.push(run);
        }
    }
}

/// A replay's options: verified unless `--no-verify`, and drawn for `--timeline` when `drawn`.
fn run_options<'a>(args: &BenchAllocArgs, ctx: &Bench<'a>, drawn: bool) -> Options<'a> {
    Options {
        interrupt: Some(ctx.interrupt),
        verify: !args.no_verify,
        timeline_points: if args.timeline.is_some() && drawn {
            2000
        } else {
            0
        },
    }
}

/// Two runs compare only when they replayed the same operations on the same preset, or when
/// both replayed a trace: then on their memory metrics alone, and a `--max-regression` on a
/// figure of time is refused.
fn check_same_replay(args: &BenchAllocArgs, saved: &Replayed, now: &Replayed) -> Result<()> {
    if saved == now {
        return Ok(());
    }
    if saved.another_trace(now) {
        if let Some(g) = args.max_regression.iter().find(|g| !g.metric.is_memory()) {
            return Err(CliError::Usage(format!(
                "--max-regression {}: the baseline replayed another trace ({saved}); two traces \
                 compare on their memory metrics only (peak-reserved, fragmentation, hit-rate)",
                g.metric
            ))
            .into());
        }
        return Ok(());
    }
    Err(CliError::Usage(format!(
        "--baseline: {}",
        BaselineError::OtherWorkload {
            saved: saved.to_string(),
            now: now.to_string(),
        }
    ))
    .into())
}

/// The timeline, the report, the saved baseline and the CI exports. An output that cannot be
/// written fails the run; after the report, as one line without a second JSON document.
fn write_outputs(
    args: &BenchAllocArgs,
    out: &Output,
    report: &BenchReport,
    saved: &Baseline,
) -> Result<()> {
    let inputs: Vec<&std::path::Path> = bench_inputs(args).into_iter().map(|(_, p)| p).collect();
    if let Some(path) = &args.timeline {
        crate::input::write_output(path, timeline_svg(report).as_bytes(), &inputs)
            .context("writing --timeline")?;
    }
    out.emit(report)?;
    let after = || -> Result<()> {
        if let Some(path) = &args.save_baseline {
            if report.interrupted {
                out.warn(&format!(
                    "--save-baseline {}: not saved, the run was interrupted",
                    path.display()
                ));
            } else {
                let json = serde_json::to_vec_pretty(saved).context("encoding the baseline")?;
                crate::input::write_output(path, &json, &inputs)
                    .context("writing --save-baseline")?;
            }
        }
        super::exports::write(
            &args.exports,
            &inputs,
            Renderers {
                markdown: || bench_markdown(report),
                junit: || bench_junit(report),
                prometheus: || bench_prometheus(report),
            },
        )
    };
    after().map_err(super::exports::after_report)
}
