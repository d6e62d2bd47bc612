//! Recover, which always runs: free everything, clean up, and check that nothing is live,
//! nothing is reserved, and the device has its memory back (its free figure within 1 % where
//! it is the device's own, and the backend's count of held bytes to the byte).

use std::sync::atomic::Ordering;

use super::state::Run;
use super::{DeviceBaseline, PhaseNote, StressFailure, StressPhase};
use crate::device::DeviceMemory;

/// What recovery found left over.
pub(super) struct Left {
    pub leaked_buffers: u64,
    pub leaked_bytes: u64,
    pub free_after: u64,
    pub tolerance: u64,
    pub free_compared: bool,
    pub held_after: Option<u64>,
}

pub(super) fn run(
    run: &mut Run<'_, '_>,
    device: &dyn DeviceMemory,
    baseline: DeviceBaseline,
) -> Left {
    let (started, _) = run.begin(StressPhase::Recover);
    for (b, s) in run.held.drain(..) {
        let mut back = [0u8; 8];
        if b.read(0, &mut back).is_ok() && u64::from_le_bytes(back) != s {
            run.counters.corruptions.fetch_add(1, Ordering::Relaxed);
        }
        run.counters.ops.fetch_add(1, Ordering::Relaxed);
    }
    (run.progress)(StressPhase::Recover, 1, 2);
    let pool = run.pool;
    let emergency = pool.emergency_cleanup();
    let stats = pool.stats();
    let leak_report = pool.tracker().map(|t| t.leak_report()).unwrap_or_default();
    let total = device.mem_info().map(|(_, t)| t).unwrap_or(0);
    let left = Left {
        leaked_buffers: stats.active_buffers.max(leak_report.len() as u64),
        leaked_bytes: stats
            .allocated_bytes
            .max(leak_report.iter().map(|m| m.size_bytes).sum()),
        free_after: device.mem_info().map(|(f, _)| f).unwrap_or(0),
        tolerance: if device.simulated() { 0 } else { total / 100 },
        free_compared: !device.shares_host_memory(),
        held_after: device.held_bytes(),
    };
    let mut failures = Vec::new();
    if left.leaked_buffers > 0 {
        failures.push(StressFailure::LeakedBuffers {
            buffers: left.leaked_buffers,
            bytes: left.leaked_bytes,
        });
    }
    if stats.reserved_bytes > 0 {
        failures.push(StressFailure::LeakedReserved {
            bytes: stats.reserved_bytes,
        });
    }
    if left.free_compared && left.free_after + left.tolerance < baseline.free {
        failures.push(StressFailure::LeakedDeviceMemory {
            free_after: left.free_after,
            free_before: baseline.free,
            tolerance: left.tolerance,
        });
    }
    if let (Some(held_before), Some(held_after)) = (baseline.held, left.held_after) {
        if held_after > held_before {
            failures.push(StressFailure::LeakedDeviceBytes {
                held_after,
                held_before,
            });
        }
    }
    let notes = vec![
        PhaseNote::RecoverCleanup {
            released_bytes: emergency,
            live_buffers: left.leaked_buffers,
            reserved_bytes: stats.reserved_bytes,
        },
        PhaseNote::RecoverDeviceFree {
            before_bytes: baseline.free,
            after_bytes: left.free_after,
        },
    ];
    (run.progress)(StressPhase::Recover, 2, 2);
    let passed = failures.is_empty();
    run.failures.extend(failures);
    // Frees of the ramp's buffers count in the run's total, not as recovery's own operations.
    run.end(StressPhase::Recover, (started, run.ops()), passed, notes);
    left
}
