//! [`run_stress`]: the chosen phases in order, recovery, and the sum of it all.

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::state::Run;
use super::{
    churn, exhaust, ramp, recover, DeviceBaseline, StressFailure, StressOptions, StressOutcome,
    StressPhase,
};
use crate::alloc::Pool;
use crate::device::DeviceMemory;

/// Runs the selected phases on `pool` (whose device is `device`), then recovers.
/// `progress(phase, done, total)` reports progress; `injected` reads the fault injector.
pub fn run_stress(
    pool: &Pool,
    device: &dyn DeviceMemory,
    baseline: DeviceBaseline,
    opts: &StressOptions,
    injected: &dyn Fn() -> u64,
    progress: &(dyn Fn(StressPhase, u64, u64) + Sync),
) -> StressOutcome {
    let start = Instant::now();
    let mut run = Run::new(pool, opts, progress);
    if run.wants(StressPhase::Ramp) {
        ramp::run(&mut run);
    }
    if run.wants(StressPhase::Exhaust) {
        exhaust::run(&mut run);
    }
    if run.wants(StressPhase::Churn) {
        churn::run(&mut run);
    }
    // Recover always runs, so that an interrupted run still leaves the device clean.
    let left = recover::run(&mut run, device, baseline);
    let corruptions = run.counters.corruptions.load(Ordering::Relaxed);
    if corruptions > 0 {
        run.failures.push(StressFailure::Corruption {
            buffers: corruptions,
        });
    }
    let escaped = run.counters.escaped.load(Ordering::Relaxed);
    if escaped > 0 {
        let first = run
            .errors
            .lock()
            .ok()
            .and_then(|v| v.first().cloned())
            .unwrap_or_default();
        run.failures.push(StressFailure::Escaped {
            count: escaped,
            first,
        });
    }
    let final_stats = pool.stats();
    let interrupted = run.interrupted();
    StressOutcome {
        ops: run.ops(),
        duration_s: start.elapsed().as_secs_f64(),
        peak_pressure: run.peak,
        pressure_transitions: run
            .transitions
            .lock()
            .map(|v| v.clone())
            .unwrap_or_default(),
        ooms: final_stats.ooms,
        retries: final_stats.retries,
        cpu_fallbacks: final_stats.cpu_fallbacks,
        oom_errors: run.counters.oom_errors.load(Ordering::Relaxed),
        injected_failures: injected(),
        escaped_errors: escaped,
        corruptions,
        leaked_buffers: left.leaked_buffers,
        leaked_bytes: left.leaked_bytes,
        reserved_after: final_stats.reserved_bytes,
        device_free_before: baseline.free,
        device_free_after: left.free_after,
        free_tolerance_bytes: left.tolerance,
        free_compared: left.free_compared,
        device_held_before: baseline.held,
        device_held_after: left.held_after,
        phases: run.phases,
        interrupted,
        passed: run.failures.is_empty() && !interrupted,
        failures: run.failures,
    }
}
