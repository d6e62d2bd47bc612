//! Chunked transfers between a pool allocation and the host, blocking or double-buffered
//! (seed 002's ping-pong buffers): a transfer thread moves chunk *i + 1* between the device and
//! one host buffer while the caller works on chunk *i* in the other, so device copies overlap
//! the caller's processing. Where the device has copies of its own that run while the caller
//! goes on ([`crate::device::AsyncCopies`]: OpenCL's non-blocking reads and writes on a second
//! queue, CUDA's asynchronous copies on a stream), the double buffering uses them and no thread;
//! elsewhere a transfer thread makes the device contract's blocking copies. A failed chunk stops
//! the transfer; copies still in flight are waited for before the host buffers are freed.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::{Allocation, AllocationInfo, Pool, PoolError};
use crate::device::{AsyncCopies, PendingCopy};

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
    /// The copies were the device's own asynchronous ones (else blocking copies, on a
    /// transfer thread when double-buffered).
    pub device_async: bool,
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
    let info = pool.info(alloc)?;
    transfer_at(pool, &info, len, chunk, buffering, true, |at, buf| {
        consume(at, buf)
    })
}

/// A transfer of an allocation looked up once, for all of its chunks: device to `caller` when
/// `download`, else `caller` to device.
fn transfer_at(
    pool: &Pool,
    info: &AllocationInfo,
    len: u64,
    chunk: usize,
    buffering: Buffering,
    download: bool,
    caller: impl FnMut(u64, &mut [u8]),
) -> Result<TransferReport, PoolError> {
    let device = |at, buf: &mut [u8]| {
        if download {
            pool.read_at(info, at, buf)
        } else {
            pool.write_at(info, at, buf)
        }
    };
    let len = len.min(info.size);
    match (buffering, pool.device().async_copies()) {
        (Buffering::Blocking, _) => blocking(len, chunk, download, device, caller),
        (Buffering::Double, Some(copies)) => {
            device_async(copies, info, len, chunk, download, caller)
        }
        (Buffering::Double, None) => double_buffered(len, chunk, download, device, caller),
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
    transfer_at(
        pool,
        &pool.info(alloc)?,
        len,
        chunk,
        buffering,
        false,
        produce,
    )
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
fn typed_len<T: Element>(size: u64, count: u64) -> Result<u64, PoolError> {
    let bytes = count
        .checked_mul(T::SIZE as u64)
        .ok_or(PoolError::ElementSize {
            bytes: u64::MAX,
            element_size: T::SIZE,
        })?;
    crate::device::check_bounds(0, usize::try_from(bytes).unwrap_or(usize::MAX), size)?;
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
    let info = pool.info(alloc)?;
    let bytes = typed_len::<T>(info.size, count)?;
    let mut typed: Vec<T> = Vec::new();
    transfer_at(
        pool,
        &info,
        bytes,
        chunk.saturating_mul(T::SIZE),
        buffering,
        true,
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
    let info = pool.info(alloc)?;
    let bytes = typed_len::<T>(info.size, count)?;
    let mut typed: Vec<T> = Vec::new();
    transfer_at(
        pool,
        &info,
        bytes,
        chunk.saturating_mul(T::SIZE),
        buffering,
        false,
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

/// [`download_typed`] from the named buffer `name` (seed 002's
/// `start_async_download::<T>(name)` … `wait_for_download`): `count` elements, which must lie
/// within its capacity. Other named-buffer calls wait until the transfer ends, so the buffer
/// cannot be grown or freed under it.
pub fn download_named<T: Element>(
    pool: &Pool,
    name: &str,
    count: u64,
    chunk: usize,
    buffering: Buffering,
    consume: impl FnMut(u64, &[T]),
) -> Result<TransferReport, PoolError> {
    with_named::<T>(pool, name, count, |alloc| {
        download_typed(pool, alloc, count, chunk, buffering, consume)
    })
}

/// [`upload_typed`] into the named buffer `name`: `count` elements within its capacity.
pub fn upload_named<T: Element>(
    pool: &Pool,
    name: &str,
    count: u64,
    chunk: usize,
    buffering: Buffering,
    produce: impl FnMut(u64, &mut [T]),
) -> Result<TransferReport, PoolError> {
    with_named::<T>(pool, name, count, |alloc| {
        upload_typed(pool, alloc, count, chunk, buffering, produce)
    })
}

/// Runs `transfer` on the allocation behind `name` once `count` elements of `T` are known to
/// fit its capacity (the allocation may be larger; the capacity is what was asked for), with
/// the named buffers locked throughout.
fn with_named<T: Element>(
    pool: &Pool,
    name: &str,
    count: u64,
    transfer: impl FnOnce(&Allocation) -> Result<TransferReport, PoolError>,
) -> Result<TransferReport, PoolError> {
    let named = pool.named.lock().unwrap_or_else(|e| e.into_inner());
    let buffer = named
        .get(name)
        .ok_or_else(|| PoolError::UnknownName(name.to_string()))?;
    let bytes = count.saturating_mul(T::SIZE as u64);
    crate::device::check_bounds(
        0,
        usize::try_from(bytes).unwrap_or(usize::MAX),
        buffer.capacity,
    )?;
    transfer(&buffer.allocation)
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
        device_async: false,
    }
}

/// Copies in flight, waited for when dropped (on every path, errors included) so that no host
/// buffer is freed while the device still reads or writes it.
struct InFlight<'a> {
    copies: &'a dyn AsyncCopies,
    pending: [Option<PendingCopy>; 2],
}

impl InFlight<'_> {
    /// Waits for the copy using buffer `slot`, if any; the device's time for it, or the time
    /// spent waiting when the device does not say.
    fn wait(&mut self, slot: usize) -> Result<Duration, PoolError> {
        let Some(copy) = self.pending[slot].take() else {
            return Ok(Duration::ZERO);
        };
        let t = Instant::now();
        let timed = self.copies.wait(copy)?;
        Ok(timed.unwrap_or_else(|| t.elapsed()))
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        for slot in 0..2 {
            let _ = self.wait(slot);
        }
    }
}

/// Two host buffers and the device's own asynchronous copies: chunk *i + 1* is in flight to or
/// from one buffer while the caller handles chunk *i* in the other. No thread.
fn device_async(
    copies: &dyn AsyncCopies,
    alloc: &AllocationInfo,
    len: u64,
    chunk: usize,
    download: bool,
    mut caller: impl FnMut(u64, &mut [u8]),
) -> Result<TransferReport, PoolError> {
    check(chunk)?;
    let start = Instant::now();
    let spans: Vec<(u64, usize)> = spans(len, chunk).collect();
    let mut buffers = [vec![0u8; chunk], vec![0u8; chunk]];
    // Raw pointers from here on: the device writes one buffer while the caller has the other.
    let base = [buffers[0].as_mut_ptr(), buffers[1].as_mut_ptr()];
    // Declared after the buffers, so dropped (and waited for) before them.
    let mut flight = InFlight {
        copies,
        pending: [None, None],
    };
    let (mut copy, mut work) = (Duration::ZERO, Duration::ZERO);
    let start_copy = |flight: &mut InFlight<'_>, i: usize| -> Result<(), PoolError> {
        let (at, n) = spans[i];
        let slot = i % 2;
        // SAFETY: buffer `slot` has `chunk` >= n bytes and no copy in flight (waited for
        // before reuse); it stays alive and untouched until `flight` waits for this copy.
        let started = unsafe {
            if download {
                copies.start_read(alloc.segment, alloc.offset + at, base[slot], n)
            } else {
                copies.start_write(alloc.segment, alloc.offset + at, base[slot], n)
            }
        }?;
        flight.pending[slot] = Some(started);
        Ok(())
    };
    if download && !spans.is_empty() {
        start_copy(&mut flight, 0)?;
    }
    for (i, &(at, n)) in spans.iter().enumerate() {
        let slot = i % 2;
        if download {
            if i + 1 < spans.len() {
                start_copy(&mut flight, i + 1)?;
            }
            copy += flight.wait(slot)?;
        } else {
            // The copy that last used this buffer (chunk i - 2) must be done before refilling.
            copy += flight.wait(slot)?;
        }
        // SAFETY: no copy is in flight on buffer `slot` (waited for above), and the slice
        // ends before the caller's next turn.
        let buf = unsafe { std::slice::from_raw_parts_mut(base[slot], n) };
        let t = Instant::now();
        caller(at, buf);
        work += t.elapsed();
        if !download {
            start_copy(&mut flight, i)?;
        }
    }
    for slot in 0..2 {
        copy += flight.wait(slot)?;
    }
    drop(flight);
    drop(buffers);
    let mut done = report(len, spans.len() as u64, start, copy, work);
    done.device_async = true;
    Ok(done)
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
