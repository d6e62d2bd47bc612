//! RAII handles (the RAII-pool design): a buffer returns its block to the pool when dropped; a batch returns
//! all of its buffers. A buffer may live in CPU memory when the device was full (the unified-pool design's
//! `FallbackBuffer`).

use super::allocation::Allocation;
use super::error::PoolError;
use super::pool::{Pool, StreamId, DEFAULT_STREAM};
use super::tracker::{BufferId, BufferLocation, BufferMetadata};
use crate::device::check_bounds;

enum Backing {
    Device(Allocation),
    Cpu { id: BufferId, bytes: Box<[u8]> },
    Released,
}

/// A buffer from a [`Pool`], on the device or (after an out-of-memory fallback) in CPU memory.
/// Dropping it returns its memory.
pub struct Buffer<'p> {
    pool: &'p Pool,
    backing: Backing,
    len: u64,
}

impl std::fmt::Debug for Buffer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer")
            .field("id", &self.id())
            .field("len", &self.len)
            .field("location", &self.location())
            .finish()
    }
}

impl<'p> Buffer<'p> {
    /// The id the tracker and leak report know it by.
    pub fn id(&self) -> BufferId {
        match &self.backing {
            Backing::Device(a) => self.pool.info(a).map_or(BufferId(0), |info| info.id),
            Backing::Cpu { id, .. } => *id,
            Backing::Released => BufferId(0),
        }
    }

    /// Bytes requested (the block behind it may be larger).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the buffer is empty (never true for a live buffer).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Where the bytes live.
    pub fn location(&self) -> BufferLocation {
        match self.backing {
            Backing::Cpu { .. } => BufferLocation::Cpu,
            _ => BufferLocation::Gpu,
        }
    }

    /// The device allocation, when on the device.
    pub fn allocation(&self) -> Option<&Allocation> {
        match &self.backing {
            Backing::Device(a) => Some(a),
            _ => None,
        }
    }

    /// Writes `data` at `offset` (through the device API when on the device).
    #[expect(
        clippy::cast_possible_truncation,
        reason = "usize is 64 bits (lib.rs refuses other targets)"
    )]
    pub fn write(&mut self, offset: u64, data: &[u8]) -> Result<(), PoolError> {
        check_bounds(offset, data.len(), self.len)?;
        match &mut self.backing {
            Backing::Device(a) => self.pool.write(a, offset, data),
            Backing::Cpu { bytes, .. } => {
                bytes[offset as usize..offset as usize + data.len()].copy_from_slice(data);
                Ok(())
            }
            Backing::Released => unreachable!("only drop and `release` (which consumes) release"),
        }
    }

    /// Reads into `out` from `offset`.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "usize is 64 bits (lib.rs refuses other targets)"
    )]
    pub fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), PoolError> {
        check_bounds(offset, out.len(), self.len)?;
        match &self.backing {
            Backing::Device(a) => self.pool.read(a, offset, out),
            Backing::Cpu { bytes, .. } => {
                out.copy_from_slice(&bytes[offset as usize..offset as usize + out.len()]);
                Ok(())
            }
            Backing::Released => unreachable!("only drop and `release` (which consumes) release"),
        }
    }

    /// Returns the memory now and reports a failure (drop does the same, silently).
    pub fn release(mut self) -> Result<(), PoolError> {
        self.release_inner()
    }

    fn release_inner(&mut self) -> Result<(), PoolError> {
        match std::mem::replace(&mut self.backing, Backing::Released) {
            Backing::Device(a) => self.pool.free(a),
            Backing::Cpu { id, .. } => {
                if let Some(t) = self.pool.tracker() {
                    t.untrack(id);
                }
                Ok(())
            }
            Backing::Released => Ok(()),
        }
    }
}

impl Drop for Buffer<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.release_inner() {
            log::error!("returning a buffer to the pool failed: {e}");
        }
    }
}

impl Pool {
    /// A device buffer of `size` bytes on the default stream, with CPU fallback when enabled.
    pub fn buffer(&self, size: u64) -> Result<Buffer<'_>, PoolError> {
        self.buffer_on(size, DEFAULT_STREAM, None)
    }

    /// A buffer on `stream`, labelled `tag` in the tracker. When the device cannot hold it even
    /// after the retry and `cpu_fallback_enabled` is set, the buffer lives in CPU memory and the
    /// fallback is counted.
    pub fn buffer_on(
        &self,
        size: u64,
        stream: StreamId,
        tag: Option<&str>,
    ) -> Result<Buffer<'_>, PoolError> {
        match self.allocate_tagged(size, stream, tag) {
            Ok(a) => Ok(Buffer {
                pool: self,
                backing: Backing::Device(a),
                len: size,
            }),
            Err(PoolError::OutOfMemory { .. }) if self.config().cpu_fallback_enabled => {
                self.cpu_buffer(size, tag)
            }
            Err(e) => Err(e),
        }
    }

    /// Wraps a raw allocation of this pool in an RAII buffer.
    pub(crate) fn wrap_allocation(&self, allocation: Allocation, len: u64) -> Buffer<'_> {
        Buffer {
            pool: self,
            backing: Backing::Device(allocation),
            len,
        }
    }

    fn cpu_buffer(&self, size: u64, tag: Option<&str>) -> Result<Buffer<'_>, PoolError> {
        let oom = || PoolError::Device(crate::device::DeviceError::OutOfMemory { requested: size });
        let len = usize::try_from(size).map_err(|_| oom())?;
        let mut bytes = Vec::new();
        bytes.try_reserve_exact(len).map_err(|_| oom())?;
        bytes.resize(len, 0);
        let id = BufferId::new();
        if let Some(t) = self.tracker() {
            let mut meta = BufferMetadata::new(id, size, size, BufferLocation::Cpu);
            meta.tag = tag.map(str::to_string);
            t.track(meta);
        }
        self.count_cpu_fallback();
        Ok(Buffer {
            pool: self,
            backing: Backing::Cpu {
                id,
                bytes: bytes.into_boxed_slice(),
            },
            len: size,
        })
    }

    /// Allocates every size or none: on failure the buffers already taken are returned.
    pub fn batch(&self, sizes: &[u64]) -> Result<BatchBuffers<'_>, PoolError> {
        let mut buffers = Vec::with_capacity(sizes.len());
        for &size in sizes {
            // Dropping `buffers` on error returns what was taken.
            buffers.push(self.buffer(size)?);
        }
        Ok(BatchBuffers { buffers })
    }
}

/// Buffers allocated together and returned together when dropped.
#[derive(Debug)]
pub struct BatchBuffers<'p> {
    buffers: Vec<Buffer<'p>>,
}

impl<'p> BatchBuffers<'p> {
    /// The buffers, in request order.
    pub fn buffers(&self) -> &[Buffer<'p>] {
        &self.buffers
    }

    /// Mutable access, e.g. to write into them.
    pub fn buffers_mut(&mut self) -> &mut [Buffer<'p>] {
        &mut self.buffers
    }

    /// Buffers in the collection.
    pub fn len(&self) -> usize {
        self.buffers.len()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.buffers.is_empty()
    }
}
