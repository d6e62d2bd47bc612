//! Named buffers that grow (the consolidated-manager design's `ensure_capacity`): a buffer found by name, grown by the
//! growth factor when too small, with its contents preserved.

use super::allocation::{Allocation, NamedBuffer};
use super::error::PoolError;
use super::pool::Pool;

/// What `ensure_capacity` did to a named buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NamedInfo {
    /// Capacity in bytes after the call (at least what was asked).
    pub capacity: u64,
    /// Whether this call grew (reallocated) the buffer.
    pub resized: bool,
    /// Times the buffer has been grown in all.
    pub resizes: u64,
}

/// Copy chunk for preserving contents on growth; bounded so growth of a huge buffer does not
/// need a huge host staging area.
const COPY_CHUNK: usize = 4 << 20;

impl Pool {
    /// Makes the buffer `name` hold at least `bytes`: creates it, or grows it to
    /// max(`bytes`, capacity × growth factor) and copies the old contents over.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "a float cast saturates; capacities are far below 2^53"
    )]
    pub fn ensure_capacity(&self, name: &str, bytes: u64) -> Result<NamedInfo, PoolError> {
        let mut named = crate::device::lock(&self.named);
        if let Some(existing) = named.get(name) {
            if existing.capacity >= bytes {
                return Ok(NamedInfo {
                    capacity: existing.capacity,
                    resized: false,
                    resizes: existing.resizes,
                });
            }
            let grown = ((existing.capacity as f64) * self.config().growth_factor).ceil() as u64;
            let capacity = bytes.max(grown);
            let fresh = self.allocate_tagged(
                capacity,
                self.info(&existing.allocation)?.stream,
                Some(name),
            )?;
            let old_len = existing.capacity;
            let copied = if self.device().simulated() {
                Ok(())
            } else {
                self.copy(&existing.allocation, &fresh, old_len)
            };
            if let Err(e) = copied {
                self.free(fresh)?;
                return Err(e);
            }
            let old = named.remove(name).map(|n| (n.allocation, n.resizes));
            let resizes = old.as_ref().map_or(0, |o| o.1) + 1;
            if let Some((allocation, _)) = old {
                self.free(allocation)?;
            }
            named.insert(
                name.to_string(),
                NamedBuffer {
                    allocation: fresh,
                    capacity,
                    resizes,
                },
            );
            return Ok(NamedInfo {
                capacity,
                resized: true,
                resizes,
            });
        }
        let allocation = self.allocate_tagged(bytes, super::DEFAULT_STREAM, Some(name))?;
        named.insert(
            name.to_string(),
            NamedBuffer {
                allocation,
                capacity: bytes,
                resizes: 0,
            },
        );
        Ok(NamedInfo {
            capacity: bytes,
            resized: false,
            resizes: 0,
        })
    }

    #[expect(
        clippy::cast_possible_truncation,
        reason = "usize is 64 bits (lib.rs refuses other targets)"
    )]
    fn copy(&self, from: &Allocation, to: &Allocation, len: u64) -> Result<(), PoolError> {
        let mut chunk = vec![0u8; COPY_CHUNK.min(len as usize)];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(chunk.len() as u64) as usize;
            self.read(from, done, &mut chunk[..n])?;
            self.write(to, done, &chunk[..n])?;
            done += n as u64;
        }
        Ok(())
    }

    /// Capacity of a named buffer, if it exists.
    pub fn named_capacity(&self, name: &str) -> Option<u64> {
        crate::device::lock(&self.named)
            .get(name)
            .map(|n| n.capacity)
    }

    /// Writes into a named buffer.
    pub fn write_named(&self, name: &str, offset: u64, data: &[u8]) -> Result<(), PoolError> {
        let named = crate::device::lock(&self.named);
        let n = named
            .get(name)
            .ok_or_else(|| PoolError::UnknownName(name.to_string()))?;
        crate::device::check_bounds(offset, data.len(), n.capacity)?;
        self.write(&n.allocation, offset, data)
    }

    /// Reads from a named buffer.
    pub fn read_named(&self, name: &str, offset: u64, out: &mut [u8]) -> Result<(), PoolError> {
        let named = crate::device::lock(&self.named);
        let n = named
            .get(name)
            .ok_or_else(|| PoolError::UnknownName(name.to_string()))?;
        crate::device::check_bounds(offset, out.len(), n.capacity)?;
        self.read(&n.allocation, offset, out)
    }

    /// Frees a named buffer.
    pub fn free_named(&self, name: &str) -> Result<(), PoolError> {
        let removed = crate::device::lock(&self.named).remove(name);
        let n = removed.ok_or_else(|| PoolError::UnknownName(name.to_string()))?;
        self.free(n.allocation)
    }

    /// Names of live named buffers, sorted (a named buffer left at shutdown is a leak).
    pub fn named_buffers(&self) -> Vec<String> {
        let mut names: Vec<String> = crate::device::lock(&self.named).keys().cloned().collect();
        names.sort();
        names
    }
}
