//! The transfer benchmark (`bench-alloc --workload transfer`): a buffer of `size` bytes moved
//! host→device and device→host in `chunk`-byte pieces, blocking and double-buffered, with a
//! host-side consumer on every chunk (filling it on the way up, checksumming and verifying it on
//! the way down). Every byte that comes back is checked against what went up.

use serde::Serialize;

use crate::alloc::transfer::{download_until, upload_until, Buffering, TransferReport};
use crate::alloc::{Pool, PoolError};

/// One direction measured both ways.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DirectionResult {
    /// Bytes per second with one host buffer (best run).
    pub blocking_bytes_per_sec: f64,
    /// Bytes per second with two host buffers (best run).
    pub double_bytes_per_sec: f64,
    /// Blocking time ÷ double-buffered time.
    pub speedup: f64,
    /// How much of the shorter of copying and host work the double-buffered run hid (0–1).
    pub overlap: f64,
}

/// What the transfer benchmark measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TransferRun {
    /// Bytes moved each way per run.
    pub size: u64,
    /// Bytes per chunk (the chunk asked for, cut to the transfer's size).
    pub chunk: u64,
    /// Runs per direction and mode; the fastest is reported.
    pub runs: u32,
    /// Host to device.
    pub upload: DirectionResult,
    /// Device to host.
    pub download: DirectionResult,
    /// Bytes that did not read back as written, over every download.
    pub corruptions: u64,
    /// The double-buffered runs used the device's own asynchronous copies (a second OpenCL
    /// queue, a CUDA stream); else a transfer thread's blocking copies.
    pub device_async: bool,
}

// The value of byte `i` of the pattern written in round `round`: differs between rounds so a
// stale buffer cannot pass for a fresh one.
fn pattern(round: u64, i: u64) -> u8 {
    (i.wrapping_add(round).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8
}

fn result(blocking: TransferReport, double: TransferReport) -> DirectionResult {
    DirectionResult {
        blocking_bytes_per_sec: blocking.bytes_per_second(),
        double_bytes_per_sec: double.bytes_per_second(),
        speedup: blocking.elapsed.as_secs_f64() / double.elapsed.as_secs_f64().max(1e-12),
        overlap: double.overlap(),
    }
}

/// Runs the benchmark on `pool`'s device: `runs` rounds of upload and download in each mode.
/// `interrupted` is polled before every chunk; an interrupted run reports the transfers it
/// finished (one cut short is not counted).
pub fn run_transfers(
    pool: &Pool,
    size: u64,
    chunk: u64,
    runs: u32,
    interrupted: &dyn Fn() -> bool,
) -> Result<TransferRun, PoolError> {
    let alloc = pool.allocate(size)?;
    let chunk_bytes = usize::try_from(chunk).unwrap_or(usize::MAX);
    let mut best: [[Option<TransferReport>; 2]; 2] = [[None; 2]; 2];
    let mut corruptions = 0u64;
    let mut round = 0u64;
    let outcome = (|| -> Result<(), PoolError> {
        for _ in 0..runs.max(1) {
            for (m, mode) in [Buffering::Blocking, Buffering::Double]
                .into_iter()
                .enumerate()
            {
                if interrupted() {
                    return Ok(());
                }
                round += 1;
                let up = upload_until(
                    pool,
                    &alloc,
                    size,
                    chunk_bytes,
                    mode,
                    interrupted,
                    |at, buf| {
                        for (k, b) in buf.iter_mut().enumerate() {
                            *b = pattern(round, at + k as u64);
                        }
                    },
                )?;
                if interrupted() {
                    return Ok(());
                }
                let down = download_until(
                    pool,
                    &alloc,
                    size,
                    chunk_bytes,
                    mode,
                    interrupted,
                    |at, buf| {
                        corruptions += buf
                            .iter()
                            .enumerate()
                            .filter(|(k, b)| **b != pattern(round, at + *k as u64))
                            .count() as u64;
                    },
                )?;
                if interrupted() {
                    return Ok(());
                }
                for (d, report) in [up, down].into_iter().enumerate() {
                    let slot = &mut best[d][m];
                    if slot.is_none_or(|b| report.elapsed < b.elapsed) {
                        *slot = Some(report);
                    }
                }
            }
        }
        Ok(())
    })();
    pool.free(alloc)?;
    outcome?;
    let pick = |d: usize| match (best[d][0], best[d][1]) {
        (Some(b), Some(x)) => result(b, x),
        _ => DirectionResult {
            blocking_bytes_per_sec: 0.0,
            double_bytes_per_sec: 0.0,
            speedup: 0.0,
            overlap: 0.0,
        },
    };
    Ok(TransferRun {
        size,
        chunk: chunk.min(size),
        runs,
        upload: pick(0),
        download: pick(1),
        corruptions,
        device_async: best[0][1].or(best[1][1]).is_some_and(|r| r.device_async),
    })
}
