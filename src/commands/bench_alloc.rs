//! `gpumem bench-alloc`.

use anyhow::{Context, Result};

use super::options::{
    bench_pool_config, bench_preset, bench_workload, check_bench_args, probe_all_until,
};
use crate::alloc::Pool;
use crate::backend::default_device_spec;
use crate::cli::{BenchAllocArgs, WorkloadKind};
use crate::error::CliError;
use crate::exit::Exit;
use crate::output::bench::{
    timeline_svg, BenchReport, DeviceView, Gate, PoolView, RawView, ReferenceView, WorkloadView,
};
use crate::output::transfer::TransferReport as TransferBenchReport;
use crate::output::Output;
use crate::workload::bench::{run_pool, run_raw, Options};
use crate::workload::transfer::run_transfers;

/// `--workload transfer`: blocking versus double-buffered transfers through a pool allocation.
fn transfer(
    args: &BenchAllocArgs,
    out: &Output,
    spec: &crate::backend::DeviceSpec,
    device: std::sync::Arc<dyn crate::device::DeviceMemory>,
    total: u64,
    interrupt: &std::sync::atomic::AtomicBool,
) -> Result<Exit> {
    use std::sync::atomic::Ordering;
    let config = bench_pool_config(crate::alloc::Preset::Default, spec, args.transfer_size)?;
    let pool =
        Pool::new(device.clone(), config).with_context(|| format!("creating a pool on {spec}"))?;
    let run = run_transfers(&pool, args.transfer_size, args.chunk, 5, &|| {
        interrupt.load(Ordering::SeqCst)
    })?;
    pool.empty_cache();
    let slowest = run.upload.speedup.min(run.download.speedup);
    let gates: Vec<Gate> = args
        .gates
        .min_speedup
        .map(|t| Gate {
            name: "min-speedup",
            threshold: t,
            measured: slowest,
            passed: slowest >= t,
        })
        .into_iter()
        .collect();
    let (backend, index) = spec.identity();
    let interrupted = interrupt.load(Ordering::SeqCst);
    let report = TransferBenchReport {
        device: DeviceView {
            backend: backend.into(),
            index,
            name: device.name(),
            simulated: false,
            total_bytes: total,
        },
        workload: "transfer",
        // A run cut short has not shown that it passes.
        passed: !interrupted && gates.iter().all(|g| g.passed) && run.corruptions == 0,
        gates,
        transfer: run,
        interrupted,
    };
    out.emit(&report)?;
    if report.interrupted {
        return Ok(super::signals::interrupted_exit());
    }
    if report.transfer.corruptions > 0 {
        return Err(CliError::AfterReport(format!(
            "{} bytes did not read back as written",
            report.transfer.corruptions
        ))
        .into());
    }
    if let Some(g) = report.gates.iter().find(|g| !g.passed) {
        return Err(CliError::AfterReport(format!(
            "--{} (measured {:.3}, threshold {})",
            g.name, g.measured, g.threshold
        ))
        .into());
    }
    Ok(Exit::Success)
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
    // RMM's benchmark pool starts at half of the free device memory, and keeps live bytes under
    // a limit: here 80 % of that arena, leaving room for rounding and fragmentation inside it.
    let arena = device.max_allocation().unwrap_or(u64::MAX).min(free / 2);
    let max_live = (arena / 5 * 4).min(16 << 30);
    let workload = bench_workload(args, max_live)?;
    let preset = bench_preset(args, &workload);
    // Expandable segments grow to what the program needs: size the arena to the trace's peak.
    let arena = match workload.reference {
        Some(r) if r.expandable_segments => {
            arena.min(workload.peak_live_bytes().div_ceil(20 << 20) * (20 << 20))
        }
        _ => arena,
    };
    let config = bench_pool_config(preset, &spec, arena)?;
    let pool =
        Pool::new(device.clone(), config).with_context(|| format!("creating a pool on {spec}"))?;
    if device.simulated() {
        out.note("note: sim device — results are simulated; no memory is reserved");
    }
    let options = Options {
        interrupt: Some(&interrupt),
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
    let interrupted = interrupt.load(std::sync::atomic::Ordering::SeqCst);
    let raw_run = if args.no_baseline || interrupted {
        None
    } else {
        let bar = out.progress(ops, "raw");
        let run = run_raw(&workload, device.as_ref(), options, &mut |done| {
            bar.set(done)
        })?;
        bar.finish();
        Some(run)
    };
    let (backend, index) = spec.identity();
    let pool_view = PoolView::new(&pool_run, preset.name());
    let speedup = raw_run
        .as_ref()
        .map(|r| r.busy_ns as f64 / pool_run.busy_ns.max(1) as f64);
    let reference = workload.reference.and_then(|r| {
        let (figure, how, ours) = match (r.peak_reserved_bytes, r.snapshot_reserved_bytes) {
            (Some(peak), _) => (peak, "segment_events", pool_run.stats.peak_reserved_bytes),
            (None, Some(snap)) => (snap, "snapshot_segments", pool_run.reserved_end),
            _ => return None,
        };
        Some(ReferenceView {
            source: r.source.into(),
            peak_reserved_bytes: figure,
            measured_as: how.into(),
            gpumem_reserved_bytes: ours,
        })
    });
    let g = &args.gates;
    let mut gates = Vec::new();
    let mut gate =
        |name: &'static str, threshold: Option<f64>, measured: f64, higher_is_better: bool| {
            if let Some(t) = threshold {
                let passed = if higher_is_better {
                    measured >= t
                } else {
                    measured <= t
                };
                gates.push(Gate {
                    name,
                    threshold: t,
                    measured,
                    passed,
                });
            }
        };
    gate("min-hit-rate", g.min_hit_rate, pool_view.hit_rate, true);
    gate(
        "max-fragmentation",
        g.max_fragmentation,
        pool_view.fragmentation_peak,
        false,
    );
    gate("min-speedup", g.min_speedup, speedup.unwrap_or(0.0), true);
    gate(
        "max-p99-ns",
        g.max_p99_ns.map(|v| v as f64),
        pool_view.alloc_ns.p99 as f64,
        false,
    );
    let corruptions = pool_run.corruptions + raw_run.as_ref().map_or(0, |r| r.corruptions);
    let interrupted = interrupted || interrupt.load(std::sync::atomic::Ordering::SeqCst);
    // A replay cut short has not shown that it passes.
    let passed = !interrupted && gates.iter().all(|g| g.passed) && corruptions == 0 && leaked == 0;
    let report = BenchReport {
        device: DeviceView {
            backend: backend.into(),
            index,
            name: device.name(),
            simulated: device.simulated(),
            total_bytes: total,
        },
        workload: WorkloadView {
            name: workload.name.clone(),
            ops,
            seed: workload.seed,
            allocations: workload.allocations,
            preexisting: workload.preexisting,
            skipped: workload.skipped.clone(),
            max_live_bytes: workload.seed.map(|_| max_live),
        },
        pool: pool_view,
        raw: raw_run.as_ref().map(RawView::new),
        speedup,
        reference,
        gates,
        passed,
        interrupted,
        timeline: pool_run.timeline.clone(),
    };
    if let Some(path) = &args.timeline {
        let inputs: Vec<&std::path::Path> = args.trace.iter().map(|p| p.as_path()).collect();
        crate::input::write_atomic(path, timeline_svg(&report).as_bytes(), &inputs)
            .with_context(|| format!("writing --timeline {}", path.display()))?;
    }
    out.emit(&report)?;
    if report.interrupted {
        out.note("interrupted: the replay stopped early; everything was freed");
        return Ok(super::signals::interrupted_exit());
    }
    if corruptions > 0 {
        return Err(CliError::AfterReport(format!(
            "{corruptions} buffers did not read back as written"
        ))
        .into());
    }
    if leaked > 0 {
        return Err(CliError::AfterReport(format!(
            "{leaked} buffers were still live after the replay"
        ))
        .into());
    }
    let failed: Vec<String> = report
        .gates
        .iter()
        .filter(|g| !g.passed)
        .map(|g| {
            format!(
                "--{} (measured {}, threshold {})",
                g.name, g.measured, g.threshold
            )
        })
        .collect();
    if !failed.is_empty() {
        return Err(CliError::AfterReport(format!("gate failed: {}", failed.join("; "))).into());
    }
    Ok(Exit::Success)
}
