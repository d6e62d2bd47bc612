//! Chunked transfers between a pool allocation and the host, blocking or double-buffered
//! (seed 002's ping-pong buffers): a transfer thread moves chunk *i + 1* between the device and
//! one host buffer while the caller works on chunk *i* in the other, so device copies overlap
//! the caller's processing. Works on every backend through the device contract's copies; a
//! failed chunk stops the transfer and both host buffers are freed on every path.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::{Allocation, Pool, PoolError};

/// What one transfer did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TransferReport {
    /// Bytes moved.
    pub bytes: u64,
    /// Chunks they were moved in.
    pub chunks: u64,
    /// Wall-clock time of the whole transfer, caller's work included.
    pub elapsed: Duration,
    /// Time spent in device copies (on the transfer thread when double-buffered).
    pub copy_time: Duration,
    /// Time spent in the caller's per-chunk work.
    pub work_time: Duration,
}

impl TransferReport {
    /// How much of the shorter of copying and working was hidden behind the other: 1.0 when
    /// the elapsed time is the longer of the two alone, 0.0 when it is their sum.
    pub fn overlap(&self) -> f64 {
        let (copy, work) = (self.copy_time.as_secs_f64(), self.work_time.as_secs_f64());
        let hideable = copy.min(work);
        if hideable <= 0.0 {
            return 0.0;
        }
        ((copy + work - self.elapsed.as_secs_f64()) / hideable).clamp(0.0, 1.0)
    }

    /// Bytes per second over the whole transfer.
    pub fn bytes_per_second(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// A chunk of zero bytes would never finish.
fn check(chunk: usize) -> Result<(), PoolError> {
    if chunk == 0 {
        return Err(PoolError::ZeroSize);
    }
    Ok(())
}

fn spans(len: u64, chunk: usize) -> impl Iterator<Item = (u64, usize)> {
    let chunk = chunk as u64;
    (0..len.div_ceil(chunk)).map(move |i| {
        let at = i * chunk;
        (at, chunk.min(len - at) as usize)
    })
}

/// How a transfer uses host memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Buffering {
    /// One host buffer: copy a chunk, process it, copy the next. The baseline.
    Blocking,
    /// Two host buffers: a transfer thread copies one chunk while the caller processes the
    /// other (seed 002's ping-pong buffers).
    Double,
}

/// Reads the allocation's first `len` bytes (at most its size) in `chunk`-byte pieces, handing
/// each to `consume` in order, with `buffering`.
pub fn download(
    pool: &Pool,
    alloc: &Allocation,
    len: u64,
    chunk: usize,
    buffering: Buffering,
    mut consume: impl FnMut(u64, &[u8]),
) -> Result<TransferReport, PoolError> {
    let device = |at, buf: &mut [u8]| pool.read(alloc, at, buf);
    let caller = |at, buf: &mut [u8]| consume(at, buf);
    let len = len.min(alloc.size);
    match buffering {
        Buffering::Blocking => blocking(len, chunk, true, device, caller),
        Buffering::Double => double_buffered(len, chunk, true, device, caller),
    }
}

/// Writes the allocation's first `len` bytes (at most its size) in `chunk`-byte pieces, each
/// filled by `produce` first, with `buffering`.
pub fn upload(
    pool: &Pool,
    alloc: &Allocation,
    len: u64,
    chunk: usize,
    buffering: Buffering,
    produce: impl FnMut(u64, &mut [u8]),
) -> Result<TransferReport, PoolError> {
    let device = |at, buf: &mut [u8]| pool.write(alloc, at, buf);
    let len = len.min(alloc.size);
    match buffering {
        Buffering::Blocking => blocking(len, chunk, false, device, produce),
        Buffering::Double => double_buffered(len, chunk, false, device, produce),
    }
}

/// A plain element type typed transfers convert to and from little-endian bytes.
pub trait Element: Copy + Default + Send {
    /// Bytes per element.
    const SIZE: usize;
    /// The element from its little-endian bytes (`SIZE` of them).
    fn from_le(bytes: &[u8]) -> Self;
    /// The element's little-endian bytes into `out` (`SIZE` of them).
    fn to_le(self, out: &mut [u8]);
}

macro_rules! element {
    ($($t:ty),*) => {$(
        impl Element for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn from_le(bytes: &[u8]) -> Self {
                let mut raw = [0u8; std::mem::size_of::<$t>()];
                raw.copy_from_slice(bytes);
                <$t>::from_le_bytes(raw)
            }
            fn to_le(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
element!(u8, u16, u32, u64, i32, i64, f32, f64);

/// The bytes `count` elements of `T` take, which must lie inside the allocation.
fn typed_len<T: Element>(alloc: &Allocation, count: u64) -> Result<u64, PoolError> {
    let bytes = count
        .checked_mul(T::SIZE as u64)
        .ok_or(PoolError::ElementSize {
            bytes: u64::MAX,
            element_size: T::SIZE,
        })?;
    crate::device::check_bounds(0, usize::try_from(bytes).unwrap_or(usize::MAX), alloc.size)?;
    Ok(bytes)
}

/// [`download`] as elements of `T`: `count` elements in chunks of `chunk` elements, `consume`
/// getting the index of each chunk's first element. More elements than the allocation holds
/// are refused.
pub fn download_typed<T: Element>(
    pool: &Pool,
    alloc: &Allocation,
    count: u64,
    chunk: usize,
    buffering: Buffering,
    mut consume: impl FnMut(u64, &[T]),
) -> Result<TransferReport, PoolError> {
    let bytes = typed_len::<T>(alloc, count)?;
    let mut typed: Vec<T> = Vec::new();
    download(
        pool,
        alloc,
        bytes,
        chunk.saturating_mul(T::SIZE),
        buffering,
        |at, buf| {
            typed.clear();
            typed.extend(buf.chunks_exact(T::SIZE).map(T::from_le));
            consume(at / T::SIZE as u64, &typed);
        },
    )
}

/// [`upload`] as elements of `T`: `produce` fills each chunk's elements, given the index of
/// its first element.
pub fn upload_typed<T: Element>(
    pool: &Pool,
    alloc: &Allocation,
    count: u64,
    chunk: usize,
    buffering: Buffering,
    mut produce: impl FnMut(u64, &mut [T]),
) -> Result<TransferReport, PoolError> {
    let bytes = typed_len::<T>(alloc, count)?;
    let mut typed: Vec<T> = Vec::new();
    upload(
        pool,
        alloc,
        bytes,
        chunk.saturating_mul(T::SIZE),
        buffering,
        |at, buf| {
            typed.clear();
            typed.resize(buf.len() / T::SIZE, T::default());
            produce(at / T::SIZE as u64, &mut typed);
            for (v, out) in typed.iter().zip(buf.chunks_exact_mut(T::SIZE)) {
                v.to_le(out);
            }
        },
    )
}

fn report(
    bytes: u64,
    chunks: u64,
    start: Instant,
    copy: Duration,
    work: Duration,
) -> TransferReport {
    TransferReport {
        bytes,
        chunks,
        elapsed: start.elapsed(),
        copy_time: copy,
        work_time: work,
    }
}

/// One host buffer, the device and the caller taking turns. `device_first`: the device side
/// fills the buffer and the caller reads it (download); else the caller fills it first
/// (upload).
fn blocking(
    len: u64,
    chunk: usize,
    device_first: bool,
    mut device: impl FnMut(u64, &mut [u8]) -> Result<(), PoolError>,
    mut caller: impl FnMut(u64, &mut [u8]),
) -> Result<TransferReport, PoolError> {
    check(chunk)?;
    let start = Instant::now();
    let (mut copy, mut work, mut chunks) = (Duration::ZERO, Duration::ZERO, 0);
    let mut buf = vec![0u8; chunk];
    for (at, n) in spans(len, chunk) {
        for device_turn in [device_first, !device_first] {
            let t = Instant::now();
            if device_turn {
                device(at, &mut buf[..n])?;
                copy += t.elapsed();
            } else {
                caller(at, &mut buf[..n]);
                work += t.elapsed();
            }
        }
        chunks += 1;
    }
    Ok(report(len, chunks, start, copy, work))
}

/// Two host buffers: the device side runs on a transfer thread, the caller's side here, each
/// buffer passing between them, so one side's chunk overlaps the other's.
fn double_buffered(
    len: u64,
    chunk: usize,
    device_first: bool,
    mut device: impl FnMut(u64, &mut [u8]) -> Result<(), PoolError> + Send,
    mut caller: impl FnMut(u64, &mut [u8]),
) -> Result<TransferReport, PoolError> {
    check(chunk)?;
    let start = Instant::now();
    type Job = (u64, usize, Vec<u8>);
    let (to_device, jobs) = mpsc::channel::<Job>();
    let (done, from_device) = mpsc::channel::<(Job, Result<(), PoolError>)>();
    let (mut work, mut chunks) = (Duration::ZERO, 0u64);
    let copy = std::thread::scope(|scope| -> Result<Duration, PoolError> {
        let mover = scope.spawn(move || {
            let mut copy = Duration::ZERO;
            // Ends when the caller hangs up (finished, or stopped on an error).
            for (at, n, mut buf) in jobs.iter() {
                let t = Instant::now();
                let result = device(at, &mut buf[..n]);
                copy += t.elapsed();
                let failed = result.is_err();
                if done.send(((at, n, buf), result)).is_err() || failed {
                    break;
                }
            }
            copy
        });
        let mut free = vec![vec![0u8; chunk], vec![0u8; chunk]];
        let mut todo = spans(len, chunk);
        let mut in_flight = 0;
        loop {
            while let Some(mut buf) = free.pop() {
                let Some((at, n)) = todo.next() else {
                    free.push(buf);
                    break;
                };
                if !device_first {
                    let t = Instant::now();
                    caller(at, &mut buf[..n]);
                    work += t.elapsed();
                }
                // The mover only hangs up after reporting an error, received below.
                let _ = to_device.send((at, n, buf));
                in_flight += 1;
            }
            if in_flight == 0 {
                break;
            }
            let Ok(((at, n, mut buf), result)) = from_device.recv() else {
                break;
            };
            in_flight -= 1;
            result?;
            if device_first {
                let t = Instant::now();
                caller(at, &mut buf[..n]);
                work += t.elapsed();
            }
            chunks += 1;
            free.push(buf);
        }
        drop(to_device);
        Ok(mover
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    })?;
    Ok(report(len, chunks, start, copy, work))
}
