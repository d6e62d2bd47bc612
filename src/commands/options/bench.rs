//! `bench-alloc`'s flags as typed options: its inputs and exports checked, its runs, baseline
//! and thresholds, the pool's preset and configuration, and the workload.

use anyhow::{Context, Result};

use crate::alloc::{MemoryConfig, Preset};
use crate::backend::DeviceSpec;
use crate::cli::{self, BenchAllocArgs, CompareWith, WorkloadKind};
use crate::error::CliError;
use crate::input::OutputKind;
use crate::model;
use crate::workload::baseline::{Baseline, Confidence, Metric, RegressionGate};
use crate::workload::gates::Thresholds;
use crate::workload::native::Comparison;
use crate::workload::stopping::{RunPlan, RunRange};
use crate::workload::{self, RandomParams, SizeDist, TransformerParams, Workload};

/// `bench-alloc`'s flag combinations: `--min-speedup` needs the raw baseline, and the transfer
/// workload moves data, which a simulated device does not hold.
pub fn check_bench_args(args: &BenchAllocArgs) -> Result<()> {
    if args.gates.min_speedup.is_some() && args.no_raw {
        return Err(
            CliError::Usage("--min-speedup needs the raw replay; drop --no-raw".into()).into(),
        );
    }
    if args.workload == WorkloadKind::Transfer
        && args.trace.is_none()
        && matches!(args.device, Some(DeviceSpec::Sim { .. }))
    {
        return Err(CliError::Usage(
            "--workload transfer moves data, and sim:SIZE holds none; use host or a real device"
                .into(),
        )
        .into());
    }
    bench_compare(args)?;
    check_bench_runs(args)?;
    bench_run_plan(args)?;
    check_regression_gates(args)?;
    bench_confidence(args)?;
    let mut outputs = Vec::new();
    if let Some(path) = &args.timeline {
        outputs.push(("--timeline", path.clone()));
    }
    if let Some(path) = &args.save_baseline {
        outputs.push(("--save-baseline", path.clone()));
    }
    outputs.extend(export_outputs(&args.exports)?);
    let kinds = check_outputs(&outputs, &bench_inputs(args))?;
    if let (Some(path), Some(OutputKind::File)) = (&args.timeline, kinds.first()) {
        // The timeline is drawn as SVG; a file named for another format would hold SVG anyway.
        // A FIFO, a device or standard output takes it whatever its name.
        let svg = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("svg"));
        if !svg {
            return Err(CliError::Usage(format!(
                "--timeline writes SVG; name the file FILE.svg (got '{}'; for a PNG, convert the SVG, e.g. rsvg-convert -o out.png FILE.svg)",
                path.display()
            ))
            .into());
        }
    }
    Ok(())
}

/// `--max-regression speedup` needs the raw replay that `--no-raw` skips: a gate this run could
/// not answer.
fn check_regression_gates(args: &BenchAllocArgs) -> Result<()> {
    if let Some(gate) = args
        .max_regression
        .iter()
        .find(|g| g.metric == Metric::Speedup && args.no_raw)
    {
        return Err(CliError::Usage(format!(
            "--max-regression {}:{} needs the raw replay; drop --no-raw",
            gate.metric, gate.max_pct
        ))
        .into());
    }
    Ok(())
}

/// `--confidence` as the level comparisons decide at: 95 % without it, a usage error outside
/// 0.5–0.9999.
pub fn bench_confidence(args: &BenchAllocArgs) -> Result<Confidence> {
    args.confidence.map_or(Ok(Confidence::DEFAULT), |level| {
        Confidence::new(level).map_err(|e| CliError::Usage(e.to_string()).into())
    })
}

/// The files `bench-alloc` reads, by the flag that names them: no output may overwrite one.
pub fn bench_inputs(args: &BenchAllocArgs) -> Vec<(&'static str, &std::path::Path)> {
    let trace = args.trace.iter().map(|p| ("--trace", p.as_path()));
    let baseline = args.baseline.iter().map(|p| ("--baseline", p.as_path()));
    trace.chain(baseline).collect()
}

/// `--compare native` as the typed request: the native side is the raw replay, which
/// `--no-raw` skips and the transfer workload does not make.
pub fn bench_compare(args: &BenchAllocArgs) -> Result<Option<Comparison>> {
    let Some(CompareWith::Native) = args.compare else {
        return Ok(None);
    };
    if args.no_raw {
        return Err(CliError::Usage(
            "--compare native replays through the device's own allocator, which --no-raw skips; \
             drop one"
                .into(),
        )
        .into());
    }
    if args.workload == WorkloadKind::Transfer && args.trace.is_none() {
        return Err(CliError::Usage(
            "--compare native compares allocators on a replay; --workload transfer moves data"
                .into(),
        )
        .into());
    }
    Ok(Some(Comparison::Native))
}

/// `--runs`, `--warmup` and the baseline flags: replays only, and a saved baseline never onto an
/// input.
fn check_bench_runs(args: &BenchAllocArgs) -> Result<()> {
    let repeated =
        args.runs > 1 || args.warmup > 0 || args.baseline.is_some() || args.save_baseline.is_some();
    if repeated && args.workload == WorkloadKind::Transfer && args.trace.is_none() {
        return Err(CliError::Usage(
            "--workload transfer already takes the fastest of 5 runs; --runs, --warmup and the \
             baselines are for the replay workloads"
                .into(),
        )
        .into());
    }
    Ok(())
}

/// How many measured runs to make: `--runs N`, or from `--min-runs` (3 by default, or
/// `--max-runs` when fewer) to `--max-runs` until every gate is decided. A minimum above the
/// maximum is a usage error.
pub fn bench_run_plan(args: &BenchAllocArgs) -> Result<RunPlan> {
    let Some(max) = args.max_runs else {
        return Ok(RunPlan::Fixed(args.runs as usize));
    };
    let min = args.min_runs.unwrap_or(max.min(3));
    RunRange::new(min as usize, max as usize)
        .map(RunPlan::Until)
        .ok_or_else(|| {
            CliError::Usage(format!(
                "--min-runs {min} is more than --max-runs {max}; give --min-runs at most --max-runs"
            ))
            .into()
        })
}

/// `--baseline FILE`, read through the bounded reader: `None` without the flag.
pub fn bench_baseline(args: &BenchAllocArgs) -> Result<Option<Baseline>> {
    let Some(path) = &args.baseline else {
        return Ok(None);
    };
    // The reader's error names the file already.
    let bytes =
        crate::input::read_bounded(path, BASELINE_MAX_BYTES, "baseline").context("--baseline")?;
    let baseline =
        Baseline::from_json(&bytes).with_context(|| format!("--baseline {}", path.display()))?;
    check_gated_metrics(path, &baseline, &args.max_regression)?;
    Ok(Some(baseline))
}

/// Every `--max-regression` metric must be in the baseline: a gate it cannot answer is an
/// error, not a pass.
fn check_gated_metrics(
    path: &std::path::Path,
    baseline: &Baseline,
    gates: &[RegressionGate],
) -> Result<()> {
    let Some(gate) = gates
        .iter()
        .find(|g| !baseline.metrics.contains_key(&g.metric))
    else {
        return Ok(());
    };
    let has: Vec<&str> = baseline.metrics.keys().map(|m| m.name()).collect();
    let has = if has.is_empty() {
        "no metrics".to_string()
    } else {
        has.join(", ")
    };
    Err(CliError::Usage(format!(
        "--max-regression {}:{}: the baseline {} has no {} (it has {has})",
        gate.metric,
        gate.max_pct,
        path.display(),
        gate.metric
    ))
    .into())
}

/// A baseline recorded on another device than `device` (`backend:index (name)`) is refused,
/// naming both, unless `--allow-other-device` asks to compare anyway (the report then labels
/// the comparison).
pub fn check_baseline_device(
    args: &BenchAllocArgs,
    baseline: &Baseline,
    device: &str,
) -> Result<()> {
    if baseline.device == device || args.allow_other_device {
        return Ok(());
    }
    Err(CliError::Usage(format!(
        "--baseline {} was recorded on {}; this run is on {device} (--allow-other-device compares them anyway)",
        args.baseline.as_deref().unwrap_or(std::path::Path::new("")).display(),
        baseline.device
    ))
    .into())
}

/// A baseline holds a few numbers per run; 16 MiB is far beyond 1,000 runs of every metric.
const BASELINE_MAX_BYTES: u64 = 16 << 20;

/// `stress`'s exports: each writable, none an input, no two the same.
pub fn check_export_paths(
    exports: &cli::Exports,
    inputs: &[(&'static str, &std::path::Path)],
) -> Result<()> {
    check_outputs(&export_outputs(exports)?, inputs).map(drop)
}

/// The `--export-*` flags given, with the path each writes.
fn export_outputs(exports: &cli::Exports) -> Result<Vec<(&'static str, std::path::PathBuf)>> {
    let mut outputs = Vec::new();
    if let Some(path) = markdown_path(&exports.export_markdown)? {
        outputs.push(("--export-markdown", path));
    }
    if let Some(path) = &exports.export_junit {
        outputs.push(("--export-junit", path.clone()));
    }
    if let Some(path) = &exports.export_prometheus {
        outputs.push(("--export-prometheus", path.clone()));
    }
    Ok(outputs)
}

/// Checks each output (see [`check_output_path`]) and that no two write to the same place (the
/// same file by any path, the same stream: `-` and `/dev/stdout` are one); returns each one's
/// kind, in order.
fn check_outputs(
    outputs: &[(&'static str, std::path::PathBuf)],
    inputs: &[(&'static str, &std::path::Path)],
) -> Result<Vec<OutputKind>> {
    let mut seen: Vec<(&str, &std::path::Path, crate::input::OutputTarget)> = Vec::new();
    let mut kinds = Vec::new();
    for (flag, path) in outputs {
        kinds.push(check_output_path(flag, path, inputs)?);
        let target = crate::input::output_target(path);
        if let Some((first, first_path, _)) = seen.iter().find(|(_, _, t)| *t == target) {
            return Err(CliError::Usage(format!(
                "{first} {} and {flag} {} are the same output; give each its own",
                first_path.display(),
                path.display()
            ))
            .into());
        }
        seen.push((flag, path, target));
    }
    Ok(kinds)
}

/// Where `--export-markdown` writes: its FILE, or without one `$GITHUB_STEP_SUMMARY` (a usage
/// error when that is not set).
pub fn markdown_path(
    flag: &Option<Option<std::path::PathBuf>>,
) -> Result<Option<std::path::PathBuf>> {
    match flag {
        None => Ok(None),
        Some(Some(p)) => Ok(Some(p.clone())),
        Some(None) => match std::env::var_os("GITHUB_STEP_SUMMARY") {
            Some(summary) if !summary.is_empty() => Ok(Some(summary.into())),
            _ => Err(CliError::Usage(
                "--export-markdown without FILE writes to $GITHUB_STEP_SUMMARY, which is not set"
                    .into(),
            )
            .into()),
        },
    }
}

/// `bench-alloc`'s CI gates.
pub fn bench_thresholds(args: &BenchAllocArgs) -> Thresholds {
    let g = &args.gates;
    Thresholds {
        min_hit_rate: g.min_hit_rate,
        max_fragmentation: g.max_fragmentation,
        min_speedup: g.min_speedup,
        max_p99_ns: g.max_p99_ns,
        max_peak_reserved: g.max_peak_reserved,
    }
}

/// The preset `--preset` names. `auto` stands for the recording allocator's own semantics for
/// traces (expandable segments for PyTorch's expandable segments, size classes otherwise), size classes for
/// the transformer step, and RMM's pool for the synthetic RMM workloads.
pub fn bench_preset(args: &BenchAllocArgs, workload: &Workload) -> Preset {
    match args.preset {
        cli::Preset::Auto if workload.reference.is_some_and(|r| r.expandable_segments) => {
            Preset::Expandable
        }
        cli::Preset::Auto if args.trace.is_some() || args.workload == WorkloadKind::Transformer => {
            Preset::Inference
        }
        cli::Preset::Auto | cli::Preset::Arena => Preset::Arena,
        cli::Preset::Default => Preset::Default,
        cli::Preset::Inference => Preset::Inference,
        cli::Preset::Training => Preset::Training,
        cli::Preset::Constrained => Preset::Constrained,
        cli::Preset::Pytorch => Preset::Pytorch,
        cli::Preset::Expandable => Preset::Expandable,
    }
}

/// `bench-alloc`'s pool: the preset, without tracking; a device with a stated capacity is the
/// whole budget. `GPUMEM_*` overrides apply last.
pub fn bench_pool_config(
    preset: Preset,
    spec: &DeviceSpec,
    arena_bytes: u64,
) -> Result<MemoryConfig> {
    let config = whole_budget(
        MemoryConfig::from_preset(preset, arena_bytes).with_tracking(false),
        spec,
    );
    Ok(config.with_env_overrides()?)
}

/// The synthetic workload the flags describe, or the trace they name. `max_live` bounds live
/// bytes for the RMM-style workloads.
pub fn bench_workload(args: &BenchAllocArgs, max_live: u64) -> Result<Workload> {
    if let Some(path) = &args.trace {
        return Ok(workload::load_trace(path)?);
    }
    // clap bounds -n to 1..=MAX_ALLOCATIONS, far below 2^32.
    let n = u32::try_from(args.allocations)
        .map_err(|_| CliError::Usage("-n/--allocations must be below 2^32".into()))?;
    let max_live = max_live.max(args.max_size.saturating_mul(2));
    Ok(match args.workload {
        WorkloadKind::Random => workload::random(RandomParams {
            allocations: n,
            max_size: args.max_size,
            max_live,
            dist: match args.size_dist {
                cli::SizeDist::Uniform => SizeDist::Uniform,
                cli::SizeDist::Normal => SizeDist::Normal,
                cli::SizeDist::Lognormal => SizeDist::Lognormal,
                cli::SizeDist::Geometric => SizeDist::Geometric,
            },
            seed: args.seed,
        }),
        WorkloadKind::SameSize => workload::same_size(n, args.size, args.seed),
        WorkloadKind::Mixed => workload::mixed(n, args.max_size, max_live, args.seed),
        WorkloadKind::Transfer => {
            return Err(CliError::Usage(
                "--workload transfer moves data, it is not an allocation sequence".into(),
            )
            .into())
        }
        WorkloadKind::Transformer => {
            let model =
                model::find_model(&args.model).ok_or_else(|| model::ModelError::UnknownModel {
                    name: args.model.clone(),
                    suggestion: model::closest_model(&args.model),
                })?;
            let context = u64::from(args.context);
            let decode = u64::from(args.decode_steps).min(context.saturating_sub(1));
            workload::transformer(&TransformerParams {
                arch: model.arch,
                batch: u64::from(args.batch),
                prompt: context - decode,
                decode_steps: decode,
                ubatch: 512,
                kv_block_tokens: 16,
            })
        }
    })
}

/// A device of a stated size (`sim:SIZE`, `host:SIZE`) is that size to use: no fraction, free
/// floor or driver reserve taken off it.
pub(super) fn whole_budget(config: MemoryConfig, spec: &DeviceSpec) -> MemoryConfig {
    if spec.has_stated_capacity() {
        config
            .with_gpu_memory_fraction(1.0)
            .with_min_free_bytes(0)
            .with_driver_reserve(false)
    } else {
        config
    }
}

/// Checks, before any work, that `output` can be written and is none of `inputs`: a run must
/// not end in "cannot write", nor overwrite what it read. Returns how it will be written.
pub fn check_output_path(
    flag: &str,
    output: &std::path::Path,
    inputs: &[(&'static str, &std::path::Path)],
) -> Result<OutputKind> {
    let kind =
        crate::input::output_kind(output).map_err(|e| CliError::Usage(format!("{flag} {e}")))?;
    let parent = output
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    if kind == OutputKind::File && !parent.is_dir() {
        return Err(CliError::Usage(format!(
            "{flag} {}: the folder {} does not exist",
            output.display(),
            parent.display()
        ))
        .into());
    }
    // The same file by device and inode: a hard link or symlink to an input is that input.
    if let Some((input_flag, input)) = inputs
        .iter()
        .find(|(_, i)| crate::input::same_file(output, i))
    {
        return Err(CliError::Usage(format!(
            "{flag} {} would overwrite the input {input_flag} {}",
            output.display(),
            input.display()
        ))
        .into());
    }
    Ok(kind)
}
