//! One rank's step under DeepSpeed's ZeRO ([`super::deepspeed`] holds what the rank keeps):
//! the walk's points ([`super::step`]) with the rank's flat weights, master partition and
//! moments, the reduce bucket and the partition of gradients where they are there; under
//! gradient accumulation a later micro-batch's points too.

use super::deepspeed::{
    Flat, RankHeld, StepAt, ZeroStage, BF16, BUCKET_BYTES, ENGINE_SCALARS, FORWARD_SCALARS,
};
use super::fsdp::Tally;
use super::saved::{layer_backward_temporaries, up_weight_grad, IDS};
use super::shape::Tensor;
use super::step::{accumulating, largest, Held, Point};
use super::walked::Mask;
use super::Optimizer;
use super::{DeepSpeed, Phase, Recipe, Shape, TrainingError, TrainingPeak, TrainingRun};

/// One rank's peak under DeepSpeed's ZeRO stage 1, 2 or 3: the walk's forward and loss
/// backward with the rank's flat weights, master partition and moments; the rest of backward
/// with the reduce bucket there (stage 1: the walk's points, the gradients whole; stages 2 and
/// 3: the bucket's moments, the layer being walked counted whole, recomputed under
/// checkpointing); the step on the partition.
pub(super) fn deepspeed_peak(
    s: &Shape,
    run: &TrainingRun,
    ds: DeepSpeed,
    (held, points): (&Held, &[Point; 6]),
    mask: Mask,
) -> Result<TrainingPeak, TrainingError> {
    let refuse = |what| Err(TrainingError::Unsupported { what });
    let plain = run.recipe == Recipe::Bf16
        && matches!(run.optimizer, Optimizer::Adam | Optimizer::Adamw)
        && !mask.eager
        && !mask.masked;
    let Some(tensors) = s.tensors().filter(|_| plain) else {
        return refuse(
            "DeepSpeed ZeRO other than bf16 Adam or AdamW, or with eager attention or a \
             sliding window within the sequence",
        );
    };
    // Stage 3 under offload on experts holds more in backward than its reductions list
    // (Qwen3-MoE's shape over 2 ranks: 0.87x of MemTracker).
    if ds.stage == ZeroStage::Three && ds.offload_optimizer && s.moe.is_some() {
        return refuse("DeepSpeed ZeRO-3 with the optimizer offloaded on experts");
    }
    // Stage 3 offloaded holds one more large gradient piece on the GPU under accumulation
    // (Llama-3.2-1B over 2 ranks: 33,558,528 bytes above the step without), not modelled yet.
    if run.grad_accum > 1 && ds.offload_optimizer && ds.stage == ZeroStage::Three {
        return refuse("gradient accumulation under DeepSpeed ZeRO-3's ZeRO-Offload");
    }
    // Stage 3's coordinator replay knows the modules of a Llama, Phi-3 or Gemma layer, and of
    // experts in every layer.
    let Some(rank) = RankHeld::of(ds, s, &tensors, run.checkpointing) else {
        return refuse("DeepSpeed ZeRO-3 on experts in some layers only, or shared experts");
    };
    let walk = Walk {
        s,
        run,
        ds,
        mask,
        tensors: &tensors,
        rank: &rank,
        held,
    };
    let mut tallies = walk.tallies(points, false);
    if run.grad_accum > 1 {
        tallies.extend(walk.tallies(points, true));
    }
    // Offloaded at stage 2, the earlier micro-batches' gradients of the tensors the rank's
    // partition touches wait in pinned host memory (`accumulated_grads_in_cpu`), in bf16; at
    // stage 1 the GPU keeps them whole as without offload.
    let accumulated_on_host =
        if run.grad_accum > 1 && ds.offload_optimizer && ds.stage == ZeroStage::Two {
            BF16 * Flat::of(&tensors, ds.world).grads_in_partition
        } else {
            0
        };
    let fit = |v: u128| u64::try_from(v).map_err(|_| TrainingError::Overflow);
    Ok(TrainingPeak {
        host: fit(rank.host + accumulated_on_host)?,
        ..largest(&tallies, held.buffers)?
    })
}

/// One rank's step, to be tallied at its points.
struct Walk<'a> {
    s: &'a Shape,
    run: &'a TrainingRun,
    ds: DeepSpeed,
    mask: Mask,
    tensors: &'a [Tensor],
    rank: &'a RankHeld,
    held: &'a Held,
}

impl Walk<'_> {
    /// The rank's tallies at the walk's `points`: a step's first micro-batch's, or
    /// (`accumulated`) a later one's under gradient accumulation, where what the earlier ones
    /// left is there from the forward on: at stage 1 every gradient whole (`param.grad`,
    /// reduced at the boundary only) beside the reduce bucket, at stage 2 the rank's bf16
    /// gradients of the tensors its partition touches; at stage 3 nothing more (each
    /// micro-batch's are added into its partition, held throughout). Its optimizer step is the
    /// first's.
    fn tallies(&self, points: &[Point; 6], accumulated: bool) -> Vec<Tally> {
        let (s, run, rank) = (self.s, self.run, self.rank);
        let carried = match (accumulated, self.ds.stage) {
            (false, _) => 0,
            (true, ZeroStage::One) => self.held.trainable + BUCKET_BYTES,
            (true, ZeroStage::Two) => BF16 * rank.flat.grads_in_partition,
            (true, ZeroStage::Three) => 0,
        };
        let tokens = u128::from(run.batch) * u128::from(run.seq);
        let tally = |(phase, at), gradients, optimizer, activations, temporaries| Tally {
            phase,
            parameters: rank.weights + rank.whole_at(at),
            gradients: rank.gradients + rank.staging + gradients,
            optimizer: rank.optimizer + optimizer,
            activations,
            temporaries,
        };
        let mut tallies = vec![
            tally(
                (Phase::Forward, StepAt::FinalNorm),
                rank.bucket() + carried,
                0,
                super::saved::final_norm_activations(s, tokens, points[0].activations)
                    + FORWARD_SCALARS,
                0,
            ),
            tally(
                (Phase::Forward, StepAt::ForwardEnd),
                rank.bucket() + carried,
                0,
                points[0].activations + FORWARD_SCALARS,
                0,
            ),
            tally(
                (Phase::Backward, StepAt::Loss),
                rank.bucket() + carried,
                0,
                points[1].activations + ENGINE_SCALARS + rank.backward_scalars(),
                points[1].temporaries,
            ),
        ];
        if !accumulated {
            tallies.push(tally(
                (Phase::Optimizer, StepAt::Step),
                rank.bucket(),
                rank.step,
                tokens * IDS + ENGINE_SCALARS,
                0,
            ));
        }
        match self.ds.stage {
            // The gradients stay the walk's (accumulated: all of them, each new one beside
            // them), the bucket beside them from the first on.
            ZeroStage::One => {
                let later = accumulated.then(|| accumulating(points, self.held));
                let backward = later.as_deref().unwrap_or(&points[..]);
                tallies.extend(backward[2..5].iter().map(|pt| {
                    tally(
                        (pt.phase, StepAt::Backward),
                        pt.gradients,
                        0,
                        pt.activations + ENGINE_SCALARS,
                        pt.temporaries + BUCKET_BYTES,
                    )
                }));
            }
            ZeroStage::Two | ZeroStage::Three => {
                let bucket = zero2_bucket_points(
                    s,
                    run,
                    self.mask,
                    (self.tensors, rank),
                    points,
                    accumulated,
                );
                tallies.extend(bucket.into_iter().map(|(b, activations, temporaries)| {
                    let t = tally(
                        (Phase::Backward, StepAt::Bucket(b.at)),
                        b.gradients,
                        0,
                        activations + ENGINE_SCALARS + rank.backward_scalars(),
                        temporaries,
                    );
                    match b.gathered {
                        Some(g) => Tally {
                            parameters: rank.weights + rank.whole_of(g),
                            ..t
                        },
                        None => t,
                    }
                }));
            }
        }
        tallies
    }
}

/// Stage 2's moments with the bucket there ([`super::deepspeed::bucket_points`]), with what
/// the walk holds at each: gradients beside the model's, activations and temporaries.
fn zero2_bucket_points(
    s: &Shape,
    run: &TrainingRun,
    mask: Mask,
    (tensors, rank): (&[Tensor], &RankHeld),
    points: &[Point; 6],
    accumulated: bool,
) -> Vec<(super::deepspeed::BucketPoint, u128, u128)> {
    use super::deepspeed::{bucket_points, registration_order, traced_order};
    let tokens = u128::from(run.batch) * u128::from(run.seq);
    let p = u128::from(run.recipe.param_bytes());
    let walk = super::deepspeed::WalkAt::new(
        s,
        run,
        (mask.repeated, mask.eager),
        [
            (points[2].activations, 0),
            (points[4].activations, points[4].temporaries),
        ],
        (
            layer_backward_temporaries(s, p, tokens, s.moe.is_some()),
            up_weight_grad(s, p, s.moe.is_some()),
        ),
    );
    // Stage 3's trace knows the order backward makes gradients in and what is gathered then.
    let order = match &rank.stage3 {
        Some((_, g)) => traced_order(&g.hooks),
        None => {
            let layer_tensors =
                tensors.len().saturating_sub(2 + usize::from(!s.tied)) / s.layers.max(1) as usize;
            registration_order(tensors, layer_tensors, s.tied)
        }
    };
    bucket_points(&order, s.layers, (&rank.flat, accumulated), rank.norms)
        .into_iter()
        .map(|b| {
            let (activations, temporaries) = if b.reduction {
                walk.at_reduction(b.at)
            } else {
                walk.at(b.at)
            };
            (b, activations, temporaries)
        })
        .collect()
}
