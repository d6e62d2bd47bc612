//! Chunked transfers between a pool allocation and the host, blocking or double-buffered
//! (the consolidated-manager design's ping-pong buffers): a transfer thread moves chunk *i + 1* between the device and
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

/// The chunks of a `len`-byte transfer: where each starts and how long it is. Worked out per
/// index, never listed, so a transfer of many small chunks costs no memory for the list.
#[derive(Debug, Clone, Copy)]
struct Spans {
    len: u64,
    chunk: u64,
}

impl Spans {
    /// `chunk` must not be 0 ([`check`]); a chunk longer than the transfer is cut to it, so
    /// the host buffers are never larger than what they carry.
    fn new(len: u64, chunk: usize) -> Self {
        Spans {
            len,
            chunk: (chunk as u64).min(len).max(1),
        }
    }

    fn count(self) -> u64 {
        self.len.div_ceil(self.chunk)
    }

    /// Bytes in each host buffer.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "usize is 64 bits (lib.rs refuses other targets)"
    )]
    fn buffer(self) -> usize {
        self.chunk as usize
    }

    #[expect(
        clippy::cast_possible_truncation,
        reason = "usize is 64 bits (lib.rs refuses other targets)"
    )]
    fn get(self, i: u64) -> (u64, usize) {
        let at = i * self.chunk;
        (at, self.chunk.min(self.len - at) as usize)
    }

    fn iter(self) -> impl Iterator<Item = (u64, usize)> {
        (0..self.count()).map(move |i| self.get(i))
    }
}

/// The stop of the calls that take none.
fn never() -> bool {
    false
}

/// How a transfer uses host memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Buffering {
    /// One host buffer: copy a chunk, process it, copy the next. The baseline.
    Blocking,
    /// Two host buffers: a transfer thread copies one chunk while the caller processes the
    /// other (the consolidated-manager design's ping-pong buffers).
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
    consume: impl FnMut(u64, &[u8]),
) -> Result<TransferReport, PoolError> {
    download_until(pool, alloc, len, chunk, buffering, &never, consume)
}

/// [`download`] that asks `stop` before each chunk and ends early, without error, once it
/// says so: the report's `bytes` and `chunks` then count what was handed to `consume`.
pub fn download_until(
    pool: &Pool,
    alloc: &Allocation,
    len: u64,
    chunk: usize,
    buffering: Buffering,
    stop: &dyn Fn() -> bool,
    mut consume: impl FnMut(u64, &[u8]),
) -> Result<TransferReport, PoolError> {
    let info = pool.info(alloc)?;
    let direction = Direction {
        download: true,
        stop,
    };
    transfer_at(pool, &info, len, chunk, buffering, direction, |at, buf| {
        consume(at, buf)
    })
}

/// Which way a transfer goes, and what may end it early.
#[derive(Clone, Copy)]
struct Direction<'a> {
    /// Device to host; else host to device.
    download: bool,
    /// Asked before each chunk.
    stop: &'a dyn Fn() -> bool,
}

/// A transfer of an allocation looked up once, for all of its chunks: device to `caller` when
/// `download`, else `caller` to device.
fn transfer_at(
    pool: &Pool,
    info: &AllocationInfo,
    len: u64,
    chunk: usize,
    buffering: Buffering,
    direction: Direction<'_>,
    caller: impl FnMut(u64, &mut [u8]),
) -> Result<TransferReport, PoolError> {
    check(chunk)?;
    let download = direction.download;
    let device = |at, buf: &mut [u8]| {
        if download {
            pool.read_at(info, at, buf)
        } else {
            pool.write_at(info, at, buf)
        }
    };
    let spans = Spans::new(len.min(info.size), chunk);
    match (buffering, pool.device().async_copies()) {
        (Buffering::Blocking, _) => blocking(spans, direction, device, caller),
        (Buffering::Double, Some(copies)) => device_async(copies, info, spans, direction, caller),
        (Buffering::Double, None) => double_buffered(spans, direction, device, caller),
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
    upload_until(pool, alloc, len, chunk, buffering, &never, produce)
}

/// [`upload`] that asks `stop` before each chunk and ends early, without error, once it says
/// so: the report's `bytes` and `chunks` then count what reached the device.
pub fn upload_until(
    pool: &Pool,
    alloc: &Allocation,
    len: u64,
    chunk: usize,
    buffering: Buffering,
    stop: &dyn Fn() -> bool,
    produce: impl FnMut(u64, &mut [u8]),
) -> Result<TransferReport, PoolError> {
    let direction = Direction {
        download: false,
        stop,
    };
    transfer_at(
        pool,
        &pool.info(alloc)?,
        len,
        chunk,
        buffering,
        direction,
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
        Direction {
            download: true,
            stop: &never,
        },
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
        Direction {
            download: false,
            stop: &never,
        },
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

/// [`download_typed`] from the named buffer `name` (the consolidated-manager design's
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
    let named = crate::device::lock(&pool.named);
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
    spans: Spans,
    direction: Direction<'_>,
    mut caller: impl FnMut(u64, &mut [u8]),
) -> Result<TransferReport, PoolError> {
    let download = direction.download;
    let start = Instant::now();
    let count = spans.count();
    let mut buffers = [vec![0u8; spans.buffer()], vec![0u8; spans.buffer()]];
    // Raw pointers from here on: the device writes one buffer while the caller has the other.
    let base = [buffers[0].as_mut_ptr(), buffers[1].as_mut_ptr()];
    // Declared after the buffers, so dropped (and waited for) before them.
    let mut flight = InFlight {
        copies,
        pending: [None, None],
    };
    let (mut copy, mut work, mut done) = (Duration::ZERO, Duration::ZERO, (0u64, 0u64));
    let start_copy = |flight: &mut InFlight<'_>, i: u64| -> Result<(), PoolError> {
        let (at, n) = spans.get(i);
        let slot = (i % 2) as usize;
        // SAFETY: buffer `slot` has `spans.buffer()` >= n bytes and no copy in flight (waited
        // for before reuse); it stays alive and untouched until `flight` waits for this copy.
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
    if download && count > 0 {
        start_copy(&mut flight, 0)?;
    }
    for i in 0..count {
        if (direction.stop)() {
            break;
        }
        let (at, n) = spans.get(i);
        let slot = (i % 2) as usize;
        if download {
            if i + 1 < count {
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
        done = (done.0 + n as u64, done.1 + 1);
    }
    for slot in 0..2 {
        copy += flight.wait(slot)?;
    }
    drop(flight);
    drop(buffers);
    let mut report = report(done.0, done.1, start, copy, work);
    report.device_async = true;
    Ok(report)
}

/// One host buffer, the device and the caller taking turns: on a download the device side
/// fills the buffer and the caller reads it; on an upload the caller fills it first.
fn blocking(
    spans: Spans,
    direction: Direction<'_>,
    mut device: impl FnMut(u64, &mut [u8]) -> Result<(), PoolError>,
    mut caller: impl FnMut(u64, &mut [u8]),
) -> Result<TransferReport, PoolError> {
    let start = Instant::now();
    let (mut copy, mut work, mut bytes, mut chunks) = (Duration::ZERO, Duration::ZERO, 0, 0);
    let mut buf = vec![0u8; spans.buffer()];
    for (at, n) in spans.iter() {
        if (direction.stop)() {
            break;
        }
        for device_turn in [direction.download, !direction.download] {
            let t = Instant::now();
            if device_turn {
                device(at, &mut buf[..n])?;
                copy += t.elapsed();
            } else {
                caller(at, &mut buf[..n]);
                work += t.elapsed();
            }
        }
        bytes += n as u64;
        chunks += 1;
    }
    Ok(report(bytes, chunks, start, copy, work))
}

/// Two host buffers: the device side runs on a transfer thread, the caller's side here, each
/// buffer passing between them, so one side's chunk overlaps the other's.
fn double_buffered(
    spans: Spans,
    direction: Direction<'_>,
    mut device: impl FnMut(u64, &mut [u8]) -> Result<(), PoolError> + Send,
    mut caller: impl FnMut(u64, &mut [u8]),
) -> Result<TransferReport, PoolError> {
    let device_first = direction.download;
    let start = Instant::now();
    type Job = (u64, usize, Vec<u8>);
    let (to_device, jobs) = mpsc::channel::<Job>();
    let (done, from_device) = mpsc::channel::<(Job, Result<(), PoolError>)>();
    let (mut work, mut bytes, mut chunks) = (Duration::ZERO, 0u64, 0u64);
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
        let mut free = vec![vec![0u8; spans.buffer()], vec![0u8; spans.buffer()]];
        let mut todo = spans.iter();
        let mut in_flight = 0;
        loop {
            while let Some(mut buf) = free.pop() {
                // Once stopped, nothing new is handed over; what is in flight still ends.
                let next = if (direction.stop)() {
                    None
                } else {
                    todo.next()
                };
                let Some((at, n)) = next else {
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
            bytes += n as u64;
            chunks += 1;
            free.push(buf);
        }
        drop(to_device);
        Ok(mover
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    })?;
    Ok(report(bytes, chunks, start, copy, work))
}
