//! One rank of DeepSpeed's ZeRO stage 3 (deepspeed 0.19, bf16, its defaults): every tensor
//! cut into `world` equal pieces (padded), of its piece the bf16 weights, an f32 master copy,
//! Adam's two f32 moments and a bf16 gradient partition. Tensors of at most 1e5 elements stay
//! whole on every rank besides their piece (`stage3_param_persistence_threshold`). The reduce
//! bucket of 5e8 bf16 elements is allocated with the optimizer and kept.
//!
//! In forward and backward each module's weights are gathered whole before it runs, with
//! what the parameter coordinator prefetches and keeps ([`super::zero3_trace`]).
//!
//! The step walks sub-groups of at most about 1e9 partition elements (`sub_group_size`): the
//! sub-group's gradient flattened to f32 and torch AdamW's two temporaries beside the
//! moments of every sub-group.
//!
//! Recorded against `MemTracker` with `tools/pytorch-reference/measure_deepspeed.py --stage 3`
//! (`tests/fixtures/pytorch/deepspeed-*-z3-*.json`).

use super::shape::Tensor;
use super::zero3_trace::PERSISTENCE;

/// `sub_group_size`, in partition elements.
const SUB_GROUP: u128 = 1_000_000_000;
/// The f32 scalars stage 3's step keeps beside the engine's (the gradient norm and its
/// pieces), in bytes.
const STEP_SCALARS: u128 = 21;
/// And 8 bytes more for each further sub-group (Mistral-7B over 4 ranks: two sub-groups).
const SUB_GROUP_SCALARS: u128 = 8;
/// Weights, their gradient partition and the gathered copies in bf16.
const BF16: u128 = 2;

/// One rank's share of the model under ZeRO-3.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Zero3 {
    /// Elements of the rank's pieces, every tensor padded to a multiple of the ranks.
    pub partition: u128,
    /// Elements of the tensors kept whole besides their piece.
    pub persistent: u128,
    /// Partition elements of the largest optimizer sub-group.
    pub sub_group: u128,
    /// Optimizer sub-groups.
    pub sub_groups: u128,
}

impl Zero3 {
    pub(super) fn of(tensors: &[Tensor], world: u64) -> Zero3 {
        let world = u128::from(world.max(1));
        let mut partition = 0;
        let mut persistent = 0;
        let (mut sub_group, mut filling, mut sub_groups) = (0, 0, 1);
        for t in tensors {
            let n = t.elements();
            let piece = n.div_ceil(world);
            partition += piece;
            if n <= PERSISTENCE {
                persistent += n;
            }
            // A sub-group closes once it holds `SUB_GROUP` elements or more.
            filling += piece;
            sub_group = u128::max(sub_group, filling);
            if filling >= SUB_GROUP {
                filling = 0;
                sub_groups += 1;
            }
        }
        Zero3 {
            partition,
            persistent,
            sub_group,
            // The last tensor closes the last group however full.
            sub_groups: if filling == 0 {
                sub_groups - 1
            } else {
                sub_groups
            }
            .max(1),
        }
    }

    /// The bf16 pieces, held throughout.
    pub(super) fn weights(&self) -> u128 {
        BF16 * self.partition
    }

    /// Weights whole in forward and backward: the small tensors, kept gathered until the
    /// step, and `gathered` elements of the others.
    pub(super) fn whole_bytes(&self, gathered: u128) -> u128 {
        BF16 * (self.persistent + gathered)
    }

    /// The bf16 gradient partition, held throughout.
    pub(super) fn gradients(&self) -> u128 {
        BF16 * self.partition
    }

    /// The f32 master pieces and Adam's moments, with a step count a sub-group.
    pub(super) fn optimizer(&self) -> u128 {
        12 * self.partition + 4 * self.sub_groups
    }

    /// The step's own bytes on its largest sub-group: the gradient flattened to f32 and
    /// torch AdamW's two f32 temporaries.
    pub(super) fn step_extra(&self) -> u128 {
        12 * self.sub_group + STEP_SCALARS + SUB_GROUP_SCALARS * (self.sub_groups - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_are_padded_per_tensor_and_small_tensors_stay_whole() {
        let tensors = [
            Tensor::matrix(1_000, 1_001),
            Tensor::vector(4_096),
            Tensor::matrix(3, 5),
        ];
        let z = Zero3::of(&tensors, 4);
        // 1,001,000 / 4 = 250,250; 4,096 / 4 = 1,024; 15 → 4 a piece.
        assert_eq!(z.partition, 250_250 + 1_024 + 4);
        assert_eq!(z.persistent, 4_096 + 15);
        assert_eq!((z.sub_group, z.sub_groups), (z.partition, 1));
    }

    #[test]
    fn sub_groups_close_at_a_billion_elements() {
        let big = Tensor::matrix(600_000_000, 1);
        let z = Zero3::of(&[big, big, big], 1);
        // [600M, 600M] closes at 1.2e9; the last 600M is a group of its own.
        assert_eq!(z.sub_group, 1_200_000_000);
        assert_eq!(z.sub_groups, 2);
        let z = Zero3::of(&[big, big], 1);
        assert_eq!((z.sub_group, z.sub_groups), (1_200_000_000, 1));
    }
}
