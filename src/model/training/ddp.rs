//! One rank of DistributedDataParallel: the whole model and step on every rank, and the
//! gradient buckets DDP all-reduces (25 MiB each, in the parameters' dtype) allocated when it
//! wraps the model and kept for good. By default (`gradient_as_bucket_view=False`) the buckets
//! are a copy beside the gradients; with `gradient_as_bucket_view=True` the gradients are
//! views of them, so the gradients' memory is there, whole, from the start of every step.
//! `MemTracker` counts the buckets as temporaries.

use serde::Serialize;

use super::fsdp::Tally;

/// DistributedDataParallel's settings that change a rank's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Ddp {
    /// `gradient_as_bucket_view`: the gradients are views of the buckets.
    pub bucket_view: bool,
}

/// The walk's points on one DDP rank: each point's, with the buckets of `trainable` bytes
/// beside them (or, as views, in place of its gradients).
pub(super) fn with_buckets(points: &mut [Tally], ddp: Ddp, trainable: u128) {
    for pt in points {
        pt.temporaries += trainable;
        if ddp.bucket_view {
            pt.gradients = 0;
        }
    }
}
