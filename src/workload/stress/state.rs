//! What the phases of one stress run share ([`Run`]): the pool and options, the counts, the
//! failures and reports so far, the ramp's buffers and the pressure changes seen.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::checks::Counters;
use super::{
    ramp_step, PhaseNote, PhaseReport, StressFailure, StressOptions, StressPhase, Transition,
};
use crate::alloc::{Buffer, MemoryPressure, Pool};

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
    pub fn new(
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

    pub fn wants(&self, phase: StressPhase) -> bool {
        self.opts.phases.contains(&phase) && !self.interrupted()
    }
}
