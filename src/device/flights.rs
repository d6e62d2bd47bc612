//! What the backends with asynchronous copies share: the copies in flight by the id their
//! [`PendingCopy`] carries, and a lock that a panicking thread does not poison for the rest.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::{DeviceError, PendingCopy, SegmentHandle};

/// `m`'s guard, even when a thread panicked holding it: the data behind these locks stays
/// consistent between statements (a map of copies, a list of buffers), so a panic elsewhere
/// must not stop every later copy or release.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// [`lock`] for a `RwLock` read.
pub fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

/// [`lock`] for a `RwLock` write.
pub fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}

/// [`lock`] for a `Mutex` held alone (`&mut`, no locking).
pub fn inner<T>(m: &mut Mutex<T>) -> &mut T {
    m.get_mut().unwrap_or_else(|e| e.into_inner())
}

/// Copies in flight, each under the id its [`PendingCopy`] carries; `F` is what a backend
/// keeps of one (its events, its staging buffer).
#[derive(Debug)]
pub struct Flights<F> {
    next: AtomicU64,
    map: Mutex<HashMap<u64, F>>,
}

impl<F> Default for Flights<F> {
    fn default() -> Self {
        Flights {
            // From 1, as the backends' own counters started.
            next: AtomicU64::new(1),
            map: Mutex::new(HashMap::new()),
        }
    }
}

impl<F> Flights<F> {
    /// Files a started copy; its id, for the caller to wait on.
    pub fn insert(&self, flight: F) -> PendingCopy {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.map).insert(id, flight);
        PendingCopy(id)
    }

    /// Takes the copy `copy` names back, to wait on it; an id never handed out, or already
    /// waited for, is refused.
    pub fn take(&self, copy: PendingCopy) -> Result<F, DeviceError> {
        lock(&self.map)
            .remove(&copy.0)
            .ok_or(DeviceError::InvalidSegment(SegmentHandle(copy.0)))
    }

    /// Every copy still in flight (for a device being dropped).
    pub fn drain(&self) -> Vec<F> {
        lock(&self.map).drain().map(|(_, f)| f).collect()
    }
}
