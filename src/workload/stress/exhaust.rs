//! Exhaust: eight requests that together ask for a quarter of the limit more than fits. Each
//! one past the limit must take the retry path (cache released, allocation tried again), then
//! the CPU fallback or a typed out-of-memory error; what was handed out keeps its bytes.

use std::sync::atomic::Ordering;

use super::checks::request;
use super::state::Run;
use super::{PhaseNote, StressFailure, StressPhase};

pub(super) fn run(run: &mut Run<'_, '_>) {
    let start = run.begin(StressPhase::Exhaust);
    let pool = run.pool;
    let before = pool.stats();
    let errors_before = run.counters.oom_errors.load(Ordering::Relaxed);
    let big = (run.limit / 32).max(run.step);
    let mut spilled = Vec::new();
    for i in 0..8u64 {
        if run.interrupted() {
            break;
        }
        if let Some(mut b) = request(pool, big + i * 512, 0, &run.counters, &run.errors) {
            let s = run.seed();
            let _ = b.write(0, &s.to_le_bytes());
            let _ = b.write(b.len() - 8, &s.to_le_bytes());
            spilled.push((b, s));
        }
        (run.progress)(StressPhase::Exhaust, i + 1, 8);
    }
    run.peak = run.peak.max(pool.pressure());
    let after = pool.stats();
    let ooms = after.ooms - before.ooms;
    let retries = after.retries - before.retries;
    let fallbacks = after.cpu_fallbacks - before.cpu_fallbacks;
    let typed = run.counters.oom_errors.load(Ordering::Relaxed) - errors_before;
    let mut notes = vec![PhaseNote::ExhaustOutcomes {
        ooms,
        retries,
        fallbacks,
        typed_errors: typed,
    }];
    let mut passed = true;
    if retries < ooms {
        passed = false;
        run.failures
            .push(StressFailure::ExhaustUnretried { ooms, retries });
    }
    if fallbacks + typed != ooms {
        passed = false;
        run.failures.push(StressFailure::ExhaustUnaccounted {
            ooms,
            fallbacks,
            typed_errors: typed,
        });
    }
    for (b, s) in &spilled {
        let mut head = [0u8; 8];
        let mut tail = [0u8; 8];
        let ok = b.read(0, &mut head).is_ok() && b.read(b.len() - 8, &mut tail).is_ok();
        if !ok || u64::from_le_bytes(head) != *s || u64::from_le_bytes(tail) != *s {
            run.counters.corruptions.fetch_add(1, Ordering::Relaxed);
        }
    }
    if ooms == 0 {
        notes.push(PhaseNote::ExhaustNothingPastLimit);
    }
    drop(spilled);
    run.end(StressPhase::Exhaust, start, passed, notes);
}
