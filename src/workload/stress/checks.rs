//! What the phases share: asking for a buffer and sorting the outcome, and filling and
//! verifying a buffer's bytes from a seed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::super::Rng;
use crate::alloc::{Buffer, Pool, PoolError};

/// Writes a pattern unique to `seed` over the whole buffer, in chunks.
#[expect(
    clippy::cast_possible_truncation,
    reason = "usize is 64 bits (lib.rs refuses other targets)"
)]
pub(super) fn fill(buffer: &mut Buffer<'_>, seed: u64) -> Result<(), PoolError> {
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
#[expect(
    clippy::cast_possible_truncation,
    reason = "usize is 64 bits (lib.rs refuses other targets)"
)]
pub(super) fn verify(buffer: &Buffer<'_>, seed: u64) -> Result<bool, PoolError> {
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

/// Counts over the whole run, shared by the churn threads.
#[derive(Default)]
pub(super) struct Counters {
    pub ops: AtomicU64,
    pub corruptions: AtomicU64,
    pub oom_errors: AtomicU64,
    pub escaped: AtomicU64,
}

/// Asks for a buffer and sorts the outcome: a buffer, a typed out-of-memory error (counted and
/// survived), or an escaped error.
pub(super) fn request<'p>(
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
