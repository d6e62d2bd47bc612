//! The pool's lock: one atomic to take it and a plain store to give it back.
//!
//! The pool's critical sections are a few dozen nanoseconds, and a futex mutex's unlock is an
//! atomic swap (it must look for sleepers), a third of an uncontended allocate. Here a waiter
//! spins briefly, then yields, then sleeps in short naps, so a holder that is inside a slow
//! driver call (a device allocation can take milliseconds) does not keep a core busy for long.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A lock around `T`.
pub(crate) struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the lock hands out access to `value` to one holder at a time.
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: moving the lock moves the value; no holder can exist across a move.
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T> SpinLock<T> {
    pub(crate) fn new(value: T) -> Self {
        SpinLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    pub(crate) fn lock(&self) -> SpinGuard<'_, T> {
        if self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
        SpinGuard { lock: self }
    }

    #[cold]
    fn lock_contended(&self) {
        let mut waited = 0u32;
        loop {
            while self.locked.load(Ordering::Relaxed) {
                waited = waited.saturating_add(1);
                if waited < 64 {
                    std::hint::spin_loop();
                } else if waited < 256 {
                    std::thread::yield_now();
                } else {
                    std::thread::sleep(Duration::from_micros(20));
                }
            }
            if self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }

    pub(crate) fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }

    /// Access to the value without the atomic operation of taking the lock.
    ///
    /// # Safety
    ///
    /// Nothing else may touch the value while the reference lives: the caller holds an
    /// exclusive borrow of whatever owns the lock (so no guard can exist, nor be made,
    /// meanwhile).
    // A `&mut` from `&self` is this function's point; its contract above is what makes it sound.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn assume_unlocked(&self) -> &mut T {
        // SAFETY: the caller guarantees no other access while the reference lives.
        unsafe { &mut *self.value.get() }
    }
}

/// Access to the value until dropped.
pub(crate) struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock, so no other reference to the value exists.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as above, and the guard is borrowed mutably.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.locked.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn counts_are_exact_under_contention() {
        let lock = Arc::new(SpinLock::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let lock = Arc::clone(&lock);
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        *lock.lock() += 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap_or_else(|_| panic!("a thread panicked"));
        }
        assert_eq!(*lock.lock(), 80_000);
    }
}
