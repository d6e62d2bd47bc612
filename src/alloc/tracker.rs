//! Allocation tracking (the unified-pool design): unique ids, metadata, old-allocation search, leak reports.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;
use std::time::{Duration, Instant};

use serde::Serialize;

/// Unique identifier of one buffer, never reused within a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct BufferId(pub u64);

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl BufferId {
    /// A fresh id, unique within the process.
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        BufferId(NEXT_ID.fetch_add(1, Ordering::Relaxed))
    }

    /// No id yet: ids are handed out from 1.
    pub(crate) const UNASSIGNED: BufferId = BufferId(0);

    /// The first of `n` fresh consecutive ids, so a pool can hand out ids under its own lock
    /// without a process-wide atomic per allocation.
    pub(crate) fn reserve(n: u64) -> u64 {
        NEXT_ID.fetch_add(n, Ordering::Relaxed)
    }
}

impl fmt::Display for BufferId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "buf#{}", self.0)
    }
}

/// Where a buffer's bytes live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BufferLocation {
    /// On the pool's device.
    Gpu,
    /// In CPU memory, because the device was full (fallback).
    Cpu,
}

/// What is known about one live buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferMetadata {
    /// The buffer's id.
    pub id: BufferId,
    /// Requested size in bytes.
    pub size_bytes: u64,
    /// Elements, when the caller said how large an element is (else bytes).
    pub num_elements: u64,
    /// Device or CPU (fallback) memory.
    pub location: BufferLocation,
    /// When it was allocated.
    pub allocated_at: Instant,
    /// A caller-chosen label, shown in the leak report.
    pub tag: Option<String>,
}

impl BufferMetadata {
    /// Metadata for a new buffer, allocated now.
    pub fn new(id: BufferId, size_bytes: u64, num_elements: u64, location: BufferLocation) -> Self {
        BufferMetadata {
            id,
            size_bytes,
            num_elements,
            location,
            allocated_at: Instant::now(),
            tag: None,
        }
    }

    /// Adds a label shown in the leak report.
    pub fn with_tag(mut self, tag: impl Into<String>) -> Self {
        self.tag = Some(tag.into());
        self
    }
}

/// Thread-safe registry of live buffers.
#[derive(Debug, Default)]
pub struct AllocationTracker {
    allocations: RwLock<HashMap<BufferId, BufferMetadata>>,
    total_bytes: AtomicU64,
    peak_bytes: AtomicU64,
}

impl AllocationTracker {
    /// A tracker with no buffers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a live buffer.
    pub fn track(&self, meta: BufferMetadata) {
        let size = meta.size_bytes;
        let previous = crate::device::write(&self.allocations).insert(meta.id, meta);
        if let Some(old) = previous {
            self.total_bytes
                .fetch_sub(old.size_bytes, Ordering::Relaxed);
        }
        let now = self.total_bytes.fetch_add(size, Ordering::Relaxed) + size;
        self.peak_bytes.fetch_max(now, Ordering::Relaxed);
    }

    /// Forgets a buffer; returns its metadata if it was tracked.
    pub fn untrack(&self, id: BufferId) -> Option<BufferMetadata> {
        let meta = crate::device::write(&self.allocations).remove(&id)?;
        self.total_bytes
            .fetch_sub(meta.size_bytes, Ordering::Relaxed);
        Some(meta)
    }

    /// Live buffers tracked now.
    pub fn count(&self) -> usize {
        crate::device::read(&self.allocations).len()
    }

    /// Bytes in live buffers.
    pub fn total_bytes(&self) -> u64 {
        self.total_bytes.load(Ordering::Relaxed)
    }

    /// Highest `total_bytes` seen since the tracker was made.
    pub fn peak_bytes(&self) -> u64 {
        self.peak_bytes.load(Ordering::Relaxed)
    }

    /// Buffers alive for at least `age`, oldest first: leak candidates.
    pub fn find_old_allocations(&self, age: Duration) -> Vec<BufferMetadata> {
        let now = Instant::now();
        let mut old: Vec<BufferMetadata> = crate::device::read(&self.allocations)
            .values()
            .filter(|m| now.duration_since(m.allocated_at) >= age)
            .cloned()
            .collect();
        old.sort_by_key(|m| (m.allocated_at, m.id));
        old
    }

    /// Every live buffer, oldest first.
    pub fn leak_report(&self) -> Vec<BufferMetadata> {
        self.find_old_allocations(Duration::ZERO)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique() {
        let ids: std::collections::HashSet<BufferId> = (0..1000).map(|_| BufferId::new()).collect();
        assert_eq!(ids.len(), 1000);
    }

    #[test]
    fn tracks_and_reports() {
        let t = AllocationTracker::new();
        let a = BufferMetadata::new(BufferId::new(), 1 << 20, 256 << 10, BufferLocation::Gpu)
            .with_tag("attention_scores");
        let b = BufferMetadata::new(BufferId::new(), 100, 100, BufferLocation::Cpu);
        let (ida, idb) = (a.id, b.id);
        t.track(a);
        t.track(b);
        assert_eq!(t.count(), 2);
        assert_eq!(t.total_bytes(), (1 << 20) + 100);
        assert_eq!(t.find_old_allocations(Duration::from_secs(3600)).len(), 0);
        let report = t.leak_report();
        assert_eq!(report[0].id, ida);
        assert_eq!(report[0].tag.as_deref(), Some("attention_scores"));
        assert!(t.untrack(ida).is_some());
        assert!(t.untrack(ida).is_none());
        assert_eq!(t.total_bytes(), 100);
        assert_eq!(t.peak_bytes(), (1 << 20) + 100);
        t.untrack(idb);
        assert_eq!(t.count(), 0);
    }
}
