//! Driving a pool to memory pressure and back: ramp, exhaust, churn, recover.
//!
//! Every phase checks something the pool promises: pressure levels rise in order and callbacks
//! fire once per change (ramp); a request past the limit takes the retry path and then the CPU
//! fallback or a typed error (exhaust); concurrent threads never see each other's bytes (churn);
//! and after everything is freed nothing is live, nothing is reserved, and the device has its
//! memory back (recover).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::Rng;
use crate::alloc::{Buffer, BufferLocation, MemoryPressure, Pool, PoolError};
use crate::device::DeviceMemory;

/// The phases, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StressPhase {
    /// Allocate until Critical pressure.
    Ramp,
    /// Allocate past the limit.
    Exhaust,
    /// Threads allocate, fill, verify and free.
    Churn,
    /// Free everything and check nothing is left.
    Recover,
}

/// What `stress` runs and how hard.
#[derive(Debug, Clone)]
pub struct StressOptions {
    /// Phases to run (recover always runs last, to leave the device clean).
    pub phases: Vec<StressPhase>,
    /// Threads that allocate and free at once in the churn phase.
    pub threads: usize,
    /// Churn duration, unless `ops` is given.
    pub duration: Duration,
    /// Churn operations (allocate + free pairs) over all threads.
    pub ops: Option<u64>,
    /// Largest churn request in bytes (sizes are drawn up to it).
    pub max_size: u64,
    /// Seed of the churn sizes, so a failing run can be repeated.
    pub seed: u64,
    /// Test hook: damage one buffer's bytes behind the pool's back.
    pub plant_corruption: bool,
    /// Set (e.g. by Ctrl-C) to end the current phase and go straight to recovery.
    pub interrupt: Arc<AtomicBool>,
}

/// A pressure level change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Transition {
    /// Level before the change.
    pub from: MemoryPressure,
    /// Level after the change.
    pub to: MemoryPressure,
    /// Phase it happened in.
    pub phase: StressPhase,
}

/// One phase's counts, checks and notes.
#[derive(Debug, Clone)]
pub struct PhaseReport {
    /// The phase.
    pub phase: StressPhase,
    /// Allocations and frees it made.
    pub ops: u64,
    /// Wall-clock seconds it ran.
    pub duration_s: f64,
    /// Whether its checks passed.
    pub passed: bool,
    /// What it found (the output layer puts these into words).
    pub notes: Vec<PhaseNote>,
}

/// Something a phase found worth telling, as data.
#[derive(Debug, Clone, PartialEq)]
pub enum PhaseNote {
    /// Ramp: the device refused several requests in a row before Critical pressure.
    RampRefused {
        /// Allocated bytes as a percentage of the usable limit when it stopped.
        percent_of_limit: f64,
    },
    /// Ramp: how Critical was reached.
    RampReached {
        /// Buffers held when Critical was reached.
        buffers: usize,
        /// Bytes in each buffer.
        step_bytes: u64,
        /// Highest pressure level reached.
        pressure: MemoryPressure,
        /// Pressure callbacks the pool fired on the way.
        callbacks: usize,
    },
    /// Exhaust: what happened to the requests past the limit.
    ExhaustOutcomes {
        /// Requests the device could not hold after the retry.
        ooms: u64,
        /// Out-of-memory retries (cache released, allocation tried again).
        retries: u64,
        /// Requests served from CPU memory.
        fallbacks: u64,
        /// Typed out-of-memory errors returned.
        typed_errors: u64,
    },
    /// Exhaust: the device held every request, so nothing went past the limit.
    ExhaustNothingPastLimit,
    /// Churn: how it ran.
    Churn {
        /// Threads allocating at once.
        threads: usize,
        /// Largest request in bytes.
        max_size_bytes: u64,
        /// Out-of-memory retries over the phase.
        retries: u64,
        /// CPU fallbacks so far.
        fallbacks: u64,
    },
    /// Recover: what the emergency clean-up released and what was left.
    RecoverCleanup {
        /// Bytes the clean-up released.
        released_bytes: u64,
        /// Buffers still live after the clean-up.
        live_buffers: u64,
        /// Bytes still reserved from the device after the clean-up.
        reserved_bytes: u64,
    },
    /// Recover: device free memory before the run and after recovery.
    RecoverDeviceFree {
        /// Device free bytes before the run.
        before_bytes: u64,
        /// Device free bytes after recovery.
        after_bytes: u64,
    },
}

/// A check that failed, as data.
#[derive(Debug, Clone, PartialEq)]
pub enum StressFailure {
    /// Ramp: the device refused several requests in a row before Critical pressure.
    RampRefused {
        /// Allocated bytes as a percentage of the usable limit when it stopped.
        percent_of_limit: f64,
    },
    /// Ramp: pressure did not rise Low→Medium→High→Critical once each.
    RampOrder {
        /// Every (from, to) pressure change seen, in order.
        seen: Vec<(MemoryPressure, MemoryPressure)>,
    },
    /// Exhaust: an out-of-memory failure was not retried.
    ExhaustUnretried {
        /// Requests the device refused.
        ooms: u64,
        /// Retries the pool made; fewer than `ooms` means some were not retried.
        retries: u64,
    },
    /// Exhaust: a failure was neither served from the CPU nor returned as a typed error.
    ExhaustUnaccounted {
        /// Requests the device refused after the retry.
        ooms: u64,
        /// Of those, requests served from CPU memory.
        fallbacks: u64,
        /// Of those, typed out-of-memory errors returned.
        typed_errors: u64,
    },
    /// Buffers still live after recovery.
    LeakedBuffers {
        /// Buffers still live.
        buffers: u64,
        /// Bytes they hold.
        bytes: u64,
    },
    /// Bytes still reserved after `empty_cache`.
    LeakedReserved {
        /// Bytes still reserved from the device.
        bytes: u64,
    },
    /// The device did not get its memory back.
    LeakedDeviceMemory {
        /// Device free bytes after recovery.
        free_after: u64,
        /// Free before the run.
        free_before: u64,
        /// Difference allowed for the driver's own bookkeeping.
        tolerance: u64,
    },
    /// The backend's own count of bytes held on the device (every reservation less every
    /// release) is higher after recovery than before the run.
    LeakedDeviceBytes {
        /// Bytes held after recovery.
        held_after: u64,
        /// Bytes held before the run.
        held_before: u64,
    },
    /// Buffers that did not read back as written.
    Corruption {
        /// Buffers whose bytes changed between write and read.
        buffers: u64,
    },
    /// Errors other than out-of-memory reached the caller.
    Escaped {
        /// How many errors escaped.
        count: u64,
        /// The first one's message.
        first: String,
    },
}

/// Everything a stress run found.
#[derive(Debug, Clone, Serialize)]
pub struct StressOutcome {
    /// Allocations and frees over all phases.
    pub ops: u64,
    /// Seconds over all phases.
    pub duration_s: f64,
    /// Highest pressure level reached in any phase.
    pub peak_pressure: MemoryPressure,
    /// Every level change, in order.
    pub pressure_transitions: Vec<Transition>,
    /// Requests that failed on the device after the retry.
    pub ooms: u64,
    /// Retries (cache released, allocation tried again).
    pub retries: u64,
    /// Requests served from CPU memory.
    pub cpu_fallbacks: u64,
    /// Typed out-of-memory errors returned to the caller (fallback off).
    pub oom_errors: u64,
    /// Failures injected by `--inject-failures`.
    pub injected_failures: u64,
    /// Errors other than out-of-memory that reached the caller (an escaped failure).
    pub escaped_errors: u64,
    /// Buffers whose bytes did not read back as written.
    pub corruptions: u64,
    /// Buffers live after recovery.
    pub leaked_buffers: u64,
    /// Bytes live after recovery.
    pub leaked_bytes: u64,
    /// Bytes still reserved after recovery.
    pub reserved_after: u64,
    /// Device free memory before the run.
    pub device_free_before: u64,
    /// Device free memory after recovery.
    pub device_free_after: u64,
    /// Allowed difference between the two.
    pub free_tolerance_bytes: u64,
    /// Whether the free figures were held to the tolerance: not on a device that shares the
    /// host's memory, whose free figure moves with every other process (`device_held_*`
    /// decide there).
    pub free_compared: bool,
    /// Bytes the backend counted as held on the device before the run (`None`: not counted).
    pub device_held_before: Option<u64>,
    /// The same after recovery; any more than before is a leak.
    pub device_held_after: Option<u64>,
    /// Each phase's counts and notes, in run order.
    #[serde(skip)]
    pub phases: Vec<PhaseReport>,
    /// Whether Ctrl-C cut the run short.
    pub interrupted: bool,
    /// Why the run failed, if it did.
    #[serde(skip)]
    pub failures: Vec<StressFailure>,
    /// Whether the run finished and every check passed (an interrupted run has not passed,
    /// even when no check failed before the signal; `failures` says whether one did).
    pub passed: bool,
}

/// Ramp request size: about 1/256 of the limit, chosen so that requests fill their segments
/// exactly (whole 2 MiB multiples of their own above 10 MiB; an exact fraction of a 20 MiB or
/// 2 MiB segment below), so the pool can reach Critical without segment waste in the way.
pub fn ramp_step(limit: u64) -> u64 {
    const MIB: u64 = 1 << 20;
    let target = (limit / 256).max(512);
    if target >= 10 * MIB {
        target / (2 * MIB) * (2 * MIB)
    } else if target > MIB {
        let per_segment = (20 * MIB).div_ceil(target);
        let step = 20 * MIB / per_segment;
        if step > MIB {
            step / 512 * 512
        } else {
            MIB
        }
    } else {
        let per_segment = (2 * MIB).div_ceil(target);
        (2 * MIB / per_segment / 512 * 512).max(512)
    }
}

/// Writes a pattern unique to `seed` over the whole buffer, in chunks.
fn fill(buffer: &mut Buffer<'_>, seed: u64) -> Result<(), PoolError> {
    let mut rng = Rng::new(seed);
    let mut chunk = vec![0u8; 64 << 10];
    let mut offset = 0;
    while offset < buffer.len() {
        let n = (buffer.len() - offset).min(chunk.len() as u64) as usize;
        for word in chunk[..n].chunks_mut(8) {
            let v = rng.next_u64().to_le_bytes();
            word.copy_from_slice(&v[..word.len()]);
        }
        buffer.write(offset, &chunk[..n])?;
        offset += n as u64;
    }
    Ok(())
}

/// Checks the pattern `fill` wrote.
fn verify(buffer: &Buffer<'_>, seed: u64) -> Result<bool, PoolError> {
    let mut rng = Rng::new(seed);
    let mut want = vec![0u8; 64 << 10];
    let mut got = vec![0u8; 64 << 10];
    let mut offset = 0;
    while offset < buffer.len() {
        let n = (buffer.len() - offset).min(want.len() as u64) as usize;
        for word in want[..n].chunks_mut(8) {
            let v = rng.next_u64().to_le_bytes();
            word.copy_from_slice(&v[..word.len()]);
        }
        buffer.read(offset, &mut got[..n])?;
        if got[..n] != want[..n] {
            return Ok(false);
        }
        offset += n as u64;
    }
    Ok(true)
}

struct Counters {
    ops: AtomicU64,
    corruptions: AtomicU64,
    oom_errors: AtomicU64,
    escaped: AtomicU64,
}

/// Asks for a buffer and sorts the outcome: a buffer, a typed out-of-memory error (counted and
/// survived), or an escaped error.
fn request<'p>(
    pool: &'p Pool,
    size: u64,
    stream: u32,
    counters: &Counters,
    errors: &Mutex<Vec<String>>,
) -> Option<Buffer<'p>> {
    counters.ops.fetch_add(1, Ordering::Relaxed);
    match pool.buffer_on(size, stream, Some("stress")) {
        Ok(b) => Some(b),
        Err(PoolError::OutOfMemory { .. }) => {
            counters.oom_errors.fetch_add(1, Ordering::Relaxed);
            None
        }
        Err(e) => {
            counters.escaped.fetch_add(1, Ordering::Relaxed);
            if let Ok(mut v) = errors.lock() {
                v.push(e.to_string());
            }
            None
        }
    }
}

/// What the device held and had free before the run, read before the pool was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceBaseline {
    /// The device's free bytes.
    pub free: u64,
    /// The backend's count of bytes held ([`DeviceMemory::held_bytes`]).
    pub held: Option<u64>,
}

impl DeviceBaseline {
    /// Reads `device` now.
    pub fn read(device: &dyn DeviceMemory) -> Result<(Self, u64), crate::device::DeviceError> {
        let (free, total) = device.mem_info()?;
        Ok((
            DeviceBaseline {
                free,
                held: device.held_bytes(),
            },
            total,
        ))
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
    let free_before = baseline.free;
    let start = Instant::now();
    let phase_now = Arc::new(Mutex::new(StressPhase::Ramp));
    let transitions: Arc<Mutex<Vec<Transition>>> = Arc::new(Mutex::new(Vec::new()));
    {
        let (t, p) = (transitions.clone(), phase_now.clone());
        pool.on_pressure_change(move |from, to| {
            let phase = p.lock().map(|g| *g).unwrap_or(StressPhase::Ramp);
            if let Ok(mut v) = t.lock() {
                v.push(Transition { from, to, phase });
            }
        });
    }
    let counters = Counters {
        ops: AtomicU64::new(0),
        corruptions: AtomicU64::new(0),
        oom_errors: AtomicU64::new(0),
        escaped: AtomicU64::new(0),
    };
    let errors = Mutex::new(Vec::new());
    let mut phases = Vec::new();
    let mut failures = Vec::new();
    let mut peak = MemoryPressure::Low;
    let limit = pool.usable_limit();
    let step = ramp_step(limit);
    let mut held: Vec<(Buffer<'_>, u64)> = Vec::new();
    let mut next_seed = opts.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut seed = || {
        next_seed = next_seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        next_seed
    };
    let want = |p: StressPhase| opts.phases.contains(&p) && !opts.interrupt.load(Ordering::Relaxed);
    let set_phase = |p: StressPhase| {
        log::info!("stress: {p:?} phase");
        if let Ok(mut g) = phase_now.lock() {
            *g = p;
        }
    };

    if want(StressPhase::Ramp) {
        set_phase(StressPhase::Ramp);
        let t0 = Instant::now();
        let ops0 = counters.ops.load(Ordering::Relaxed);
        let mut notes = Vec::new();
        let before = transitions.lock().map(|v| v.len()).unwrap_or(0);
        // A request the device cannot take (injected, or the device really is full) is served
        // from the CPU or refused; only several in a row mean the device is full.
        let mut misses_in_a_row = 0;
        while pool.pressure() < MemoryPressure::Critical && !opts.interrupt.load(Ordering::Relaxed)
        {
            match request(pool, step, 0, &counters, &errors) {
                Some(mut b) if b.location() == BufferLocation::Gpu => {
                    misses_in_a_row = 0;
                    let s = seed();
                    // Signature only: ramp buffers are large; churn checks whole buffers.
                    let _ = b.write(0, &s.to_le_bytes());
                    held.push((b, s));
                }
                _ => misses_in_a_row += 1,
            }
            if misses_in_a_row >= 8 {
                let percent_of_limit = 100.0 * pool.stats().allocated_bytes as f64 / limit as f64;
                notes.push(PhaseNote::RampRefused { percent_of_limit });
                failures.push(StressFailure::RampRefused { percent_of_limit });
                break;
            }
            progress(StressPhase::Ramp, held.len() as u64, 256);
        }
        peak = peak.max(pool.pressure());
        let seen: Vec<Transition> = transitions
            .lock()
            .map(|v| v[before..].to_vec())
            .unwrap_or_default();
        use MemoryPressure::*;
        let expected = [(Low, Medium), (Medium, High), (High, Critical)];
        let got: Vec<(MemoryPressure, MemoryPressure)> =
            seen.iter().map(|t| (t.from, t.to)).collect();
        let ordered = got == expected;
        let interrupted = opts.interrupt.load(Ordering::Relaxed);
        if misses_in_a_row < 8 && !ordered && !interrupted {
            failures.push(StressFailure::RampOrder { seen: got.clone() });
        }
        notes.push(PhaseNote::RampReached {
            buffers: held.len(),
            step_bytes: step,
            pressure: pool.pressure(),
            callbacks: got.len(),
        });
        for (b, s) in &held {
            let mut back = [0u8; 8];
            if b.read(0, &mut back).is_ok() && u64::from_le_bytes(back) != *s {
                counters.corruptions.fetch_add(1, Ordering::Relaxed);
            }
        }
        phases.push(PhaseReport {
            phase: StressPhase::Ramp,
            ops: counters.ops.load(Ordering::Relaxed) - ops0,
            duration_s: t0.elapsed().as_secs_f64(),
            passed: ordered || interrupted,
            notes,
        });
    }

    if want(StressPhase::Exhaust) {
        set_phase(StressPhase::Exhaust);
        let t0 = Instant::now();
        let ops0 = counters.ops.load(Ordering::Relaxed);
        let before = pool.stats();
        let errors_before = counters.oom_errors.load(Ordering::Relaxed);
        // Ask for a quarter of the limit more than fits, in eight requests.
        let big = (limit / 32).max(step);
        let mut spilled = Vec::new();
        for i in 0..8u64 {
            if opts.interrupt.load(Ordering::Relaxed) {
                break;
            }
            if let Some(mut b) = request(pool, big + i * 512, 0, &counters, &errors) {
                let s = seed();
                let _ = b.write(0, &s.to_le_bytes());
                let _ = b.write(b.len() - 8, &s.to_le_bytes());
                spilled.push((b, s));
            }
            progress(StressPhase::Exhaust, i + 1, 8);
        }
        peak = peak.max(pool.pressure());
        let after = pool.stats();
        let ooms = after.ooms - before.ooms;
        let retries = after.retries - before.retries;
        let fallbacks = after.cpu_fallbacks - before.cpu_fallbacks;
        let typed = counters.oom_errors.load(Ordering::Relaxed) - errors_before;
        let mut notes = vec![PhaseNote::ExhaustOutcomes {
            ooms,
            retries,
            fallbacks,
            typed_errors: typed,
        }];
        let mut passed = true;
        if retries < ooms {
            passed = false;
            failures.push(StressFailure::ExhaustUnretried { ooms, retries });
        }
        if fallbacks + typed != ooms {
            passed = false;
            failures.push(StressFailure::ExhaustUnaccounted {
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
                counters.corruptions.fetch_add(1, Ordering::Relaxed);
            }
        }
        if ooms == 0 {
            notes.push(PhaseNote::ExhaustNothingPastLimit);
        }
        drop(spilled);
        phases.push(PhaseReport {
            phase: StressPhase::Exhaust,
            ops: counters.ops.load(Ordering::Relaxed) - ops0,
            duration_s: t0.elapsed().as_secs_f64(),
            passed,
            notes,
        });
    }

    if want(StressPhase::Churn) {
        set_phase(StressPhase::Churn);
        let t0 = Instant::now();
        let ops0 = counters.ops.load(Ordering::Relaxed);
        // Hold the device near High: keep the ramp's buffers down to 80 % of the limit and let
        // the threads churn in the room up to 95 %.
        let base = limit / 100 * 80;
        while pool.stats().allocated_bytes > base && !held.is_empty() {
            held.pop();
        }
        let room = (limit / 100 * 95).saturating_sub(pool.stats().allocated_bytes);
        let per_thread = (room / opts.threads.max(1) as u64).max(512);
        let max_size = opts.max_size.min(per_thread).max(512);
        let deadline = t0 + opts.duration;
        let budget = AtomicU64::new(opts.ops.unwrap_or(u64::MAX));
        let planted = AtomicBool::new(!opts.plant_corruption);
        std::thread::scope(|scope| {
            for t in 0..opts.threads.max(1) {
                let (counters, errors, budget, planted) = (&counters, &errors, &budget, &planted);
                let stream = t as u32;
                let thread_seed = opts.seed ^ (t as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03);
                scope.spawn(move || {
                    let mut rng = Rng::new(thread_seed);
                    let mut live: Vec<(Buffer<'_>, u64)> = Vec::new();
                    let mut live_bytes = 0u64;
                    loop {
                        if opts.interrupt.load(Ordering::Relaxed)
                            || (opts.ops.is_none() && Instant::now() >= deadline)
                        {
                            break;
                        }
                        if opts.ops.is_some()
                            && budget
                                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |b| {
                                    b.checked_sub(1)
                                })
                                .is_err()
                        {
                            break;
                        }
                        let size = rng.range(512, max_size);
                        if live_bytes + size <= per_thread {
                            if let Some(mut b) = request(pool, size, stream, counters, errors) {
                                let s = rng.next_u64();
                                if fill(&mut b, s).is_err() {
                                    counters.escaped.fetch_add(1, Ordering::Relaxed);
                                }
                                if !planted.swap(true, Ordering::AcqRel) {
                                    // Test hook: flip one byte through the device, as a buggy
                                    // kernel or a double-issued block would.
                                    let mut byte = [0u8; 1];
                                    if b.read(0, &mut byte).is_ok() {
                                        byte[0] ^= 0xFF;
                                        let _ = b.write(0, &byte);
                                    }
                                }
                                live_bytes += b.len();
                                live.push((b, s));
                            }
                        }
                        if !live.is_empty() && (live_bytes + size > per_thread || rng.below(2) == 0)
                        {
                            let (b, s) = live.swap_remove(rng.below(live.len() as u64) as usize);
                            match verify(&b, s) {
                                Ok(true) => {}
                                Ok(false) => {
                                    counters.corruptions.fetch_add(1, Ordering::Relaxed);
                                }
                                Err(_) => {
                                    counters.escaped.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                            live_bytes -= b.len();
                            counters.ops.fetch_add(1, Ordering::Relaxed);
                            drop(b);
                        }
                        if t == 0 {
                            let done = counters.ops.load(Ordering::Relaxed) - ops0;
                            let total = opts.ops.map(|o| o * 2).unwrap_or(0);
                            progress(StressPhase::Churn, done, total);
                        }
                    }
                    for (b, s) in live {
                        if !matches!(verify(&b, s), Ok(true)) {
                            counters.corruptions.fetch_add(1, Ordering::Relaxed);
                        }
                        counters.ops.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        });
        peak = peak.max(pool.pressure());
        let stats = pool.stats();
        let notes = vec![PhaseNote::Churn {
            threads: opts.threads.max(1),
            max_size_bytes: max_size,
            retries: stats.retries,
            fallbacks: stats.cpu_fallbacks,
        }];
        phases.push(PhaseReport {
            phase: StressPhase::Churn,
            ops: counters.ops.load(Ordering::Relaxed) - ops0,
            duration_s: t0.elapsed().as_secs_f64(),
            passed: counters.corruptions.load(Ordering::Relaxed) == 0,
            notes,
        });
    }

    // Recover always runs, so that an interrupted run still leaves the device clean.
    set_phase(StressPhase::Recover);
    let t0 = Instant::now();
    for (b, s) in held.drain(..) {
        let mut back = [0u8; 8];
        if b.read(0, &mut back).is_ok() && u64::from_le_bytes(back) != s {
            counters.corruptions.fetch_add(1, Ordering::Relaxed);
        }
        counters.ops.fetch_add(1, Ordering::Relaxed);
    }
    progress(StressPhase::Recover, 1, 2);
    let emergency = pool.emergency_cleanup();
    let stats = pool.stats();
    let leak_report = pool.tracker().map(|t| t.leak_report()).unwrap_or_default();
    let leaked_buffers = stats.active_buffers.max(leak_report.len() as u64);
    let leaked_bytes = stats
        .allocated_bytes
        .max(leak_report.iter().map(|m| m.size_bytes).sum());
    let free_after = device.mem_info().map(|(f, _)| f).unwrap_or(0);
    let total = device.mem_info().map(|(_, t)| t).unwrap_or(0);
    let tolerance = if device.simulated() { 0 } else { total / 100 };
    let mut notes = vec![PhaseNote::RecoverCleanup {
        released_bytes: emergency,
        live_buffers: leaked_buffers,
        reserved_bytes: stats.reserved_bytes,
    }];
    let mut passed = true;
    if leaked_buffers > 0 {
        passed = false;
        failures.push(StressFailure::LeakedBuffers {
            buffers: leaked_buffers,
            bytes: leaked_bytes,
        });
    }
    if stats.reserved_bytes > 0 {
        passed = false;
        failures.push(StressFailure::LeakedReserved {
            bytes: stats.reserved_bytes,
        });
    }
    let free_compared = !device.shares_host_memory();
    if free_compared && free_after + tolerance < free_before {
        passed = false;
        failures.push(StressFailure::LeakedDeviceMemory {
            free_after,
            free_before,
            tolerance,
        });
    }
    let held_after = device.held_bytes();
    if let (Some(held_before), Some(held_after)) = (baseline.held, held_after) {
        if held_after > held_before {
            passed = false;
            failures.push(StressFailure::LeakedDeviceBytes {
                held_after,
                held_before,
            });
        }
    }
    notes.push(PhaseNote::RecoverDeviceFree {
        before_bytes: free_before,
        after_bytes: free_after,
    });
    progress(StressPhase::Recover, 2, 2);
    phases.push(PhaseReport {
        phase: StressPhase::Recover,
        ops: 0,
        duration_s: t0.elapsed().as_secs_f64(),
        passed,
        notes,
    });

    let corruptions = counters.corruptions.load(Ordering::Relaxed);
    if corruptions > 0 {
        failures.push(StressFailure::Corruption {
            buffers: corruptions,
        });
    }
    let escaped = counters.escaped.load(Ordering::Relaxed);
    if escaped > 0 {
        let first = errors
            .lock()
            .ok()
            .and_then(|v| v.first().cloned())
            .unwrap_or_default();
        failures.push(StressFailure::Escaped {
            count: escaped,
            first,
        });
    }
    let final_stats = pool.stats();
    StressOutcome {
        ops: counters.ops.load(Ordering::Relaxed),
        duration_s: start.elapsed().as_secs_f64(),
        peak_pressure: peak,
        pressure_transitions: transitions.lock().map(|v| v.clone()).unwrap_or_default(),
        ooms: final_stats.ooms,
        retries: final_stats.retries,
        cpu_fallbacks: final_stats.cpu_fallbacks,
        oom_errors: counters.oom_errors.load(Ordering::Relaxed),
        injected_failures: injected(),
        escaped_errors: escaped,
        corruptions,
        leaked_buffers,
        leaked_bytes,
        reserved_after: final_stats.reserved_bytes,
        device_free_before: free_before,
        device_free_after: free_after,
        free_tolerance_bytes: tolerance,
        free_compared,
        device_held_before: baseline.held,
        device_held_after: held_after,
        phases,
        interrupted: opts.interrupt.load(Ordering::Relaxed),
        passed: failures.is_empty() && !opts.interrupt.load(Ordering::Relaxed),
        failures,
    }
}
