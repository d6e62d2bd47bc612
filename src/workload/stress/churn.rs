//! Churn: threads, each on its own stream, allocate, fill, verify and free at random for a
//! duration or a number of operations, with the device held near High pressure. A byte that
//! does not read back as written is a corruption; the test hook plants one.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use super::checks::{fill, request, verify, Counters};
use super::state::Run;
use super::{PhaseNote, StressOptions, StressPhase};
use crate::alloc::{Buffer, Pool};
use crate::workload::Rng;

/// What every churn thread shares.
struct Churn<'a> {
    pool: &'a Pool,
    opts: &'a StressOptions,
    counters: &'a Counters,
    errors: &'a std::sync::Mutex<Vec<String>>,
    progress: &'a (dyn Fn(StressPhase, u64, u64) + Sync),
    /// Operations left when `--ops` bounds the phase.
    budget: AtomicU64,
    /// Whether the test hook's corruption is planted (or was never asked for).
    planted: AtomicBool,
    deadline: Instant,
    per_thread: u64,
    max_size: u64,
    ops0: u64,
}

pub(super) fn run(run: &mut Run<'_, '_>) {
    let start = run.begin(StressPhase::Churn);
    let pool = run.pool;
    // Hold the device near High: keep the ramp's buffers down to 80 % of the limit and let the
    // threads churn in the room up to 95 %.
    let base = run.limit / 100 * 80;
    while pool.stats().allocated_bytes > base && !run.held.is_empty() {
        run.held.pop();
    }
    let room = (run.limit / 100 * 95).saturating_sub(pool.stats().allocated_bytes);
    let threads = run.opts.threads.max(1);
    let per_thread = (room / threads as u64).max(512);
    let max_size = run.opts.max_size.min(per_thread).max(512);
    let churn = Churn {
        pool,
        opts: run.opts,
        counters: &run.counters,
        errors: &run.errors,
        progress: run.progress,
        budget: AtomicU64::new(run.opts.ops.unwrap_or(u64::MAX)),
        planted: AtomicBool::new(!run.opts.plant_corruption),
        deadline: start.0 + run.opts.duration,
        per_thread,
        max_size,
        ops0: start.1,
    };
    std::thread::scope(|scope| {
        for t in 0..threads {
            let churn = &churn;
            scope.spawn(move || churn.thread(t));
        }
    });
    run.peak = run.peak.max(pool.pressure());
    let stats = pool.stats();
    let notes = vec![PhaseNote::Churn {
        threads,
        max_size_bytes: max_size,
        retries: stats.retries,
        fallbacks: stats.cpu_fallbacks,
    }];
    let passed = run.counters.corruptions.load(Ordering::Relaxed) == 0;
    run.end(StressPhase::Churn, start, passed, notes);
}

impl Churn<'_> {
    /// How far the phase is, in a unit whose total is fixed from the start: operations (an
    /// allocation and a free each) against `--ops`, else milliseconds against `--duration`.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "milliseconds of a phase: far below 2^64"
    )]
    fn progress_now(&self) -> (u64, u64) {
        match self.opts.ops {
            Some(ops) => (
                self.counters.ops.load(Ordering::Relaxed) - self.ops0,
                ops.saturating_mul(2),
            ),
            None => {
                let total = self.opts.duration.as_millis() as u64;
                let left = self.deadline.saturating_duration_since(Instant::now());
                (total.saturating_sub(left.as_millis() as u64), total)
            }
        }
    }

    /// Whether thread work should stop: a signal, the deadline, or the operations budget.
    fn done(&self) -> bool {
        if self.opts.interrupt.load(Ordering::Relaxed)
            || (self.opts.ops.is_none() && Instant::now() >= self.deadline)
        {
            return true;
        }
        self.opts.ops.is_some()
            && self
                .budget
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |b| b.checked_sub(1))
                .is_err()
    }

    #[expect(
        clippy::cast_possible_truncation,
        reason = "thread indices: a few threads; usize is 64 bits (lib.rs refuses other targets)"
    )]
    fn thread(&self, t: usize) {
        let seed = self.opts.seed ^ (t as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03);
        let mut rng = Rng::new(seed);
        let mut live: Vec<(Buffer<'_>, u64)> = Vec::new();
        let mut live_bytes = 0u64;
        while !self.done() {
            let size = rng.range(512, self.max_size);
            if live_bytes + size <= self.per_thread {
                if let Some(b) = self.allocate(size, t as u32, &mut rng) {
                    live_bytes += b.0.len();
                    live.push(b);
                }
            }
            if !live.is_empty() && (live_bytes + size > self.per_thread || rng.below(2) == 0) {
                let (b, s) = live.swap_remove(rng.below(live.len() as u64) as usize);
                live_bytes -= b.len();
                self.check(&b, s);
                self.counters.ops.fetch_add(1, Ordering::Relaxed);
            }
            if t == 0 {
                let (done, total) = self.progress_now();
                (self.progress)(StressPhase::Churn, done.min(total), total);
            }
        }
        // At the end a buffer that cannot be read back counts as corrupted too.
        for (b, s) in live {
            if !matches!(verify(&b, s), Ok(true)) {
                self.counters.corruptions.fetch_add(1, Ordering::Relaxed);
            }
            self.counters.ops.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A filled buffer of `size` on `stream`, and its pattern's seed.
    fn allocate(&self, size: u64, stream: u32, rng: &mut Rng) -> Option<(Buffer<'_>, u64)> {
        let mut b = request(self.pool, size, stream, self.counters, self.errors)?;
        let s = rng.next_u64();
        if fill(&mut b, s).is_err() {
            self.counters.escaped.fetch_add(1, Ordering::Relaxed);
        }
        if !self.planted.swap(true, Ordering::AcqRel) {
            // Test hook: flip one byte through the device, as a buggy kernel or a
            // double-issued block would.
            let mut byte = [0u8; 1];
            if b.read(0, &mut byte).is_ok() {
                byte[0] ^= 0xFF;
                let _ = b.write(0, &byte);
            }
        }
        Some((b, s))
    }

    /// Verifies a buffer's pattern before it is freed.
    fn check(&self, b: &Buffer<'_>, s: u64) {
        match verify(b, s) {
            Ok(true) => {}
            Ok(false) => {
                self.counters.corruptions.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                self.counters.escaped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}
