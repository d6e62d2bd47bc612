//! Driving a pool to memory pressure and back: ramp, exhaust, churn, recover.
//!
//! Every phase checks something the pool promises: pressure levels rise in order and callbacks
//! fire once per change (ramp); a request past the limit takes the retry path and then the CPU
//! fallback or a typed error (exhaust); concurrent threads never see each other's bytes (churn);
//! and after everything is freed nothing is live, nothing is reserved, and the device has its
//! memory back (recover).

mod checks;
mod churn;
mod exhaust;
mod ramp;
mod recover;
mod run;
mod state;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

pub use run::run_stress;

use crate::alloc::MemoryPressure;
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

impl StressPhase {
    /// The phase's name, as `--phase` takes it and every report prints it.
    pub fn name(self) -> &'static str {
        match self {
            StressPhase::Ramp => "ramp",
            StressPhase::Exhaust => "exhaust",
            StressPhase::Churn => "churn",
            StressPhase::Recover => "recover",
        }
    }
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
