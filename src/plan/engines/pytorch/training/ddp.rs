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
    /// PyTorch's `ZeroRedundancyOptimizer` (ZeRO stage 1) over this many ranks: each keeps
    /// the optimizer state of its share of the parameters only.
    pub zero1: Option<u64>,
}

/// `ZeroRedundancyOptimizer`'s partition (`_partition_parameters`): the tensors largest first
/// (a stable sort), each to the rank with the fewest elements so far (the first of them); each
/// rank's elements and tensors.
pub(super) fn zero_partition(elements: &[u128], world: u64) -> Vec<(u128, u128)> {
    let mut sorted = elements.to_vec();
    sorted.sort_by(|a, b| b.cmp(a));
    let mut ranks = vec![(0u128, 0u128); usize::try_from(world.max(1)).unwrap_or(1)];
    for n in sorted {
        let (i, _) = ranks
            .iter()
            .enumerate()
            .min_by_key(|&(i, r)| (r.0, i))
            .expect("a rank");
        ranks[i].0 += n;
        ranks[i].1 += 1;
    }
    ranks
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
