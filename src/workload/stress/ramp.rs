//! Ramp: allocate step-sized buffers until the pool reports Critical pressure; the levels must
//! rise in order, one callback per change. A request the device cannot take (injected, or the
//! device really is full) is served from the CPU or refused; only several in a row mean the
//! device is full before Critical.

use std::sync::atomic::Ordering;

use super::checks::request;
use super::state::Run;
use super::{PhaseNote, StressFailure, StressPhase, Transition};
use crate::alloc::{BufferLocation, MemoryPressure};

/// Refusals in a row that mean the device is full.
const REFUSED_IN_A_ROW: u32 = 8;

pub(super) fn run(run: &mut Run<'_, '_>) {
    let start = run.begin(StressPhase::Ramp);
    let pool = run.pool;
    let mut notes = Vec::new();
    let before = run.transitions.lock().map(|v| v.len()).unwrap_or(0);
    let mut misses_in_a_row = 0;
    while pool.pressure() < MemoryPressure::Critical && !run.interrupted() {
        match request(pool, run.step, 0, &run.counters, &run.errors) {
            Some(mut b) if b.location() == BufferLocation::Gpu => {
                misses_in_a_row = 0;
                let s = run.seed();
                // Signature only: ramp buffers are large; churn checks whole buffers.
                let _ = b.write(0, &s.to_le_bytes());
                run.held.push((b, s));
            }
            _ => misses_in_a_row += 1,
        }
        if misses_in_a_row >= REFUSED_IN_A_ROW {
            let percent_of_limit = 100.0 * pool.stats().allocated_bytes as f64 / run.limit as f64;
            notes.push(PhaseNote::RampRefused { percent_of_limit });
            run.failures
                .push(StressFailure::RampRefused { percent_of_limit });
            break;
        }
        // Percent of the pool's limit allocated: the total is fixed, whatever the step.
        let percent = pool.stats().allocated_bytes.saturating_mul(100) / run.limit.max(1);
        (run.progress)(StressPhase::Ramp, percent.min(100), 100);
    }
    run.peak = run.peak.max(pool.pressure());
    let seen: Vec<Transition> = run
        .transitions
        .lock()
        .map(|v| v[before..].to_vec())
        .unwrap_or_default();
    use MemoryPressure::*;
    let expected = [(Low, Medium), (Medium, High), (High, Critical)];
    let got: Vec<(MemoryPressure, MemoryPressure)> = seen.iter().map(|t| (t.from, t.to)).collect();
    let ordered = got == expected;
    let interrupted = run.interrupted();
    if misses_in_a_row < REFUSED_IN_A_ROW && !ordered && !interrupted {
        run.failures
            .push(StressFailure::RampOrder { seen: got.clone() });
    }
    notes.push(PhaseNote::RampReached {
        buffers: run.held.len(),
        step_bytes: run.step,
        pressure: pool.pressure(),
        callbacks: got.len(),
    });
    for (b, s) in &run.held {
        let mut back = [0u8; 8];
        if b.read(0, &mut back).is_ok() && u64::from_le_bytes(back) != *s {
            run.counters.corruptions.fetch_add(1, Ordering::Relaxed);
        }
    }
    run.end(StressPhase::Ramp, start, ordered || interrupted, notes);
}
