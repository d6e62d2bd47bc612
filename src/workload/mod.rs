//! Allocation workloads: synthetic ones (RMM's random allocations, same-size, mixed, a
//! transformer inference step) and recorded traces (RMM logging CSV, PyTorch memory snapshots),
//! all as one operation sequence that the pool and the raw device replay alike.

pub mod baseline;
pub mod bench;
pub mod gates;
pub mod native;
mod pickle;
mod rng;
pub mod significance;
pub mod stopping;
pub mod stress;
mod synthetic;
mod trace;
pub mod transfer;

use serde::Serialize;
use thiserror::Error;

pub use pickle::{decode as decode_pickle, PickleError, PyValue};
pub use rng::Rng;
pub use synthetic::{
    mixed, random, same_size, transformer, RandomParams, SizeDist, TransformerParams,
};
pub use trace::{load_trace, parse_pytorch_snapshot, parse_rmm_csv};

/// One step of a workload. Ids are dense (0..allocations) so replays index vectors directly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Allocate `size` bytes on `stream` and call it `id`.
    Alloc {
        /// The allocation's id, dense from 0.
        id: u32,
        /// Bytes requested.
        size: u64,
        /// Stream it is allocated on (0 when the source has no streams).
        stream: u32,
    },
    /// Free allocation `id`.
    Free {
        /// The id of a live allocation.
        id: u32,
    },
}

/// What a recorded trace says its own allocator reserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Reference {
    /// The recording allocator, e.g. `pytorch` or `rmm`.
    pub source: &'static str,
    /// Peak reserved from segment events, when the trace has them.
    pub peak_reserved_bytes: Option<u64>,
    /// Reserved at snapshot time, from the snapshot's segments.
    pub snapshot_reserved_bytes: Option<u64>,
    /// Allocated at snapshot time, from the snapshot's blocks.
    pub snapshot_allocated_bytes: Option<u64>,
    /// The recording allocator used expandable segments (one growing mapping per stream).
    pub expandable_segments: bool,
}

/// An operation sequence and what is known about it.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Name (`random`, `trace:FILE`, …).
    pub name: String,
    /// Allocations and frees in replay order.
    pub ops: Vec<Op>,
    /// Allocations (ids are 0..allocations).
    pub allocations: u32,
    /// The seed, for synthetic workloads.
    pub seed: Option<u64>,
    /// For traces: allocations placed first because they predate the recording.
    pub preexisting: u32,
    /// For traces: the recording allocator's own figures.
    pub reference: Option<Reference>,
    /// Trace events that were not replayed (e.g. failed allocations), by kind.
    pub skipped: Vec<(String, u64)>,
    /// For traces: how many operations the recording itself accounts for; the rest free what
    /// was still live when it ended.
    pub recorded_ops: Option<usize>,
    /// Frees are completed frees (PyTorch `free_completed`): the block may go to any stream.
    pub completed_frees: bool,
    /// For traces with segment events: what the recording allocator held reserved, as
    /// `(operations replayed, bytes)` at each change.
    pub reference_reserved: Vec<(u64, u64)>,
}

impl Workload {
    /// The most bytes live at once.
    pub fn peak_live_bytes(&self) -> u64 {
        let mut sizes = vec![0u64; self.allocations as usize];
        let (mut live, mut peak) = (0u64, 0u64);
        for op in &self.ops {
            match *op {
                Op::Alloc { id, size, .. } => {
                    if let Some(s) = sizes.get_mut(id as usize) {
                        *s = size;
                    }
                    live += size;
                    peak = peak.max(live);
                }
                Op::Free { id } => live -= sizes.get(id as usize).copied().unwrap_or(0),
            }
        }
        peak
    }

    /// FNV-1a over every operation: equal for equal sequences on every machine and version (a
    /// saved baseline compares only with a replay of the same operations).
    pub fn fingerprint(&self) -> u64 {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |word: u64| {
            for byte in word.to_le_bytes() {
                hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
            }
        };
        for op in &self.ops {
            match *op {
                Op::Alloc { id, size, stream } => {
                    eat(1);
                    eat(u64::from(id));
                    eat(size);
                    eat(u64::from(stream));
                }
                Op::Free { id } => {
                    eat(2);
                    eat(u64::from(id));
                }
            }
        }
        hash
    }

    /// Checks that every free refers to a live allocation and ids are dense.
    pub fn validate(&self) -> Result<(), WorkloadError> {
        let mut live = vec![false; self.allocations as usize];
        let mut seen = vec![false; self.allocations as usize];
        for (i, op) in self.ops.iter().enumerate() {
            match *op {
                Op::Alloc { id, size, .. } => {
                    let slot = id as usize;
                    if slot >= live.len() || seen[slot] || size == 0 {
                        return Err(WorkloadError::Invalid(format!(
                            "operation {i}: bad allocation {id} of {size} bytes"
                        )));
                    }
                    seen[slot] = true;
                    live[slot] = true;
                }
                Op::Free { id } => {
                    if !live.get(id as usize).copied().unwrap_or(false) {
                        return Err(WorkloadError::Invalid(format!(
                            "operation {i}: free of {id}, which is not live"
                        )));
                    }
                    live[id as usize] = false;
                }
            }
        }
        Ok(())
    }
}

/// Why a workload could not be built.
#[derive(Debug, Error)]
pub enum WorkloadError {
    /// The trace file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The trace file as given.
        path: String,
        /// Why the operating system refused to read it.
        source: std::io::Error,
    },
    /// The trace is malformed.
    #[error("{path}: {why}")]
    Malformed {
        /// The trace file as given.
        path: String,
        /// What is wrong, with the event or byte offset where it helps.
        why: String,
    },
    /// The path is not a readable regular file, or is too large.
    #[error(transparent)]
    Input(#[from] crate::input::InputError),
    /// The operation sequence is inconsistent.
    #[error("{0}")]
    Invalid(String),
}
