//! Typed pool errors.

use thiserror::Error;

use super::allocation::Allocation;
use crate::device::DeviceError;
use crate::units::format_bytes;

/// What a pool operation can fail with.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PoolError {
    /// The device cannot hold the request, even after releasing the cache and retrying.
    #[error(
        "out of memory on {device}: tried to allocate {}; device total {}, free {}; pool has {} \
         allocated and {} reserved but unallocated (usable limit {})",
        format_bytes(*requested), format_bytes(*total), format_bytes(*free), format_bytes(*allocated),
        format_bytes(*reserved_unallocated), format_bytes(*limit)
    )]
    OutOfMemory {
        /// The device's name.
        device: String,
        /// Bytes the request asked for.
        requested: u64,
        /// Device memory in bytes.
        total: u64,
        /// Device free, as the device reports it.
        free: u64,
        /// Bytes in live blocks.
        allocated: u64,
        /// Bytes reserved from the device but not in live blocks.
        reserved_unallocated: u64,
        /// The pool's usable limit.
        limit: u64,
    },
    /// A zero-byte request.
    #[error("cannot allocate zero bytes")]
    ZeroSize,
    /// The allocation is not live in this pool (double free, or from another pool).
    #[error("allocation {0} is not live in this pool (double free?)")]
    NotLive(Allocation),
    /// A typed transfer whose element count overflows a byte length.
    #[error("{bytes} bytes of {element_size}-byte elements is more than 2^64 bytes")]
    ElementSize {
        /// The byte length asked for.
        bytes: u64,
        /// The element's size in bytes.
        element_size: usize,
    },
    /// No named buffer with this name.
    #[error("no named buffer '{0}'")]
    UnknownName(String),
    /// The device itself failed (not out of memory): driver error, lost device.
    #[error(transparent)]
    Device(#[from] DeviceError),
}
