//! One stress run: the state the phases share ([`Run`]), and [`run_stress`], which runs the
//! chosen phases in order, recovers, and sums up.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::checks::Counters;
use super::{
    churn, exhaust, ramp, ramp_step, recover, DeviceBaseline, PhaseNote, PhaseReport,
    StressFailure, StressOptions, StressOutcome, StressPhase, Transition,
};
use crate::alloc::{Buffer, MemoryPressure, Pool};
use crate::device::DeviceMemory;

/// What the phases share over a run.
pub(super) struct Run<'p, 'o> {
    pub pool: &'p Pool,
    pub opts: &'o StressOptions,
    pub progress: &'o (dyn Fn(StressPhase, u64, u64) + Sync),
    pub counters: Counters,
    /// The first message of each escaped error.
    pub errors: Mutex<Vec<String>>,
    pub phases: Vec<PhaseReport>,
    pub failures: Vec<StressFailure>,
    /// Highest pressure seen after any phase.
    pub peak: MemoryPressure,
    /// The pool's usable limit.
    pub limit: u64,
    /// The ramp's request size.
    pub step: u64,
    /// Buffers the ramp holds (churn trims them), each with the seed of its signature.
    pub held: Vec<(Buffer<'p>, u64)>,
    /// Every pressure change, with the phase it happened in.
    pub transitions: Arc<Mutex<Vec<Transition>>>,
    phase_now: Arc<Mutex<StressPhase>>,
    next_seed: u64,
}

impl<'p, 'o> Run<'p, 'o> {
    fn new(
        pool: &'p Pool,
        opts: &'o StressOptions,
        progress: &'o (dyn Fn(StressPhase, u64, u64) + Sync),
    ) -> Self {
        let phase_now = Arc::new(Mutex::new(StressPhase::Ramp));
        let transitions: Arc<Mutex<Vec<Transition>>> = Arc::new(Mutex::new(Vec::new()));
        let (t, p) = (transitions.clone(), phase_now.clone());
        pool.on_pressure_change(move |from, to| {
            let phase = p.lock().map(|g| *g).unwrap_or(StressPhase::Ramp);
            if let Ok(mut v) = t.lock() {
                v.push(Transition { from, to, phase });
            }
        });
        let limit = pool.usable_limit();
        Run {
            pool,
            opts,
            progress,
            counters: Counters::default(),
            errors: Mutex::new(Vec::new()),
            phases: Vec::new(),
            failures: Vec::new(),
            peak: MemoryPressure::Low,
            limit,
            step: ramp_step(limit),
            held: Vec::new(),
            transitions,
            phase_now,
            next_seed: opts.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        }
    }

    /// A fresh seed for a buffer's pattern.
    pub fn seed(&mut self) -> u64 {
        self.next_seed = self.next_seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        self.next_seed
    }

    pub fn interrupted(&self) -> bool {
        self.opts.interrupt.load(Ordering::Relaxed)
    }

    pub fn ops(&self) -> u64 {
        self.counters.ops.load(Ordering::Relaxed)
    }

    /// Marks `phase` as running (pressure changes are filed under it); its start time and the
    /// operations counted so far.
    pub fn begin(&self, phase: StressPhase) -> (Instant, u64) {
        log::info!("stress: {phase:?} phase");
        if let Ok(mut g) = self.phase_now.lock() {
            *g = phase;
        }
        (Instant::now(), self.ops())
    }

    /// Files `phase`'s report, begun at `start`.
    pub fn end(
        &mut self,
        phase: StressPhase,
        start: (Instant, u64),
        passed: bool,
        notes: Vec<PhaseNote>,
    ) {
        self.phases.push(PhaseReport {
            phase,
            ops: self.ops() - start.1,
            duration_s: start.0.elapsed().as_secs_f64(),
            passed,
            notes,
        });
    }

    fn wants(&self, phase: StressPhase) -> bool {
        self.opts.phases.contains(&phase) && !self.interrupted()
    }
}

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
