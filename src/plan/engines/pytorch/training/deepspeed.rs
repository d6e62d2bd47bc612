//! One rank of DeepSpeed's ZeRO stage 1 or 2 (deepspeed 0.19, bf16, its default buckets):
//! the bf16 weights whole on every rank as one flat buffer, and of the rank's partition an f32
//! master copy and Adam's two f32 moments. A reduce bucket of 5e8 bf16 elements is allocated
//! at backward's first gradient and kept to its end. Stage 1 leaves the gradients whole until
//! backward ends. Stage 2 hands each gradient to the bucket as backward makes it; a bucket that
//! fills is averaged with a transient as large as its contents, and the rank's share is copied
//! into a bf16 partition of gradients allocated at the first such reduction. The step casts
//! the partition's gradients to f32 and runs torch's AdamW on the flat partition.
//!
//! Recorded against `MemTracker` with `tools/pytorch-reference/measure_deepspeed.py`
//! (`tests/fixtures/pytorch/deepspeed-*.json`): the forward, the loss's backward and the
//! step are exact; the points where the bucket is there are bounded at a layer's grain (every
//! activation of the layer being walked counted as saved), within 4 % above the tracker.

use serde::Serialize;

use super::saved::{layer_fixed, layer_input, layer_per_token, rope_per_position, ACT_BYTES, IDS};
use super::shape::Tensor;
use super::zero3::Zero3;
use super::zero3_trace::{gathered, DenseLayout, Gathered, Hook, HookAt};
use super::{Shape, TrainingRun};

/// DeepSpeed's `reduce_bucket_size` default, in elements.
const REDUCE_BUCKET: u128 = 500_000_000;
/// Gradients and weights in bf16.
pub(super) const BF16: u128 = 2;
/// A gradient norm's element (stage 3 under offload takes each piece's norm in f64).
const F64: u128 = 8;
/// Elements stage 3 turns to f64 at once for a norm.
const NORM_CHUNK: u128 = 250_000_000;
/// The f32 scalars DeepSpeed's engine keeps once backward starts (its loss and scale).
pub(super) const ENGINE_SCALARS: u128 = 12;
/// The f32 scalars at the forward's end.
pub(super) const FORWARD_SCALARS: u128 = 8;

/// DeepSpeed ZeRO over `world` data-parallel ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DeepSpeed {
    /// Ranks the optimizer state (and at stage 2 the gradients) are partitioned over.
    pub world: u64,
    /// The ZeRO stage.
    pub stage: ZeroStage,
    /// ZeRO-Offload (`offload_optimizer.device: cpu`, pinned): the rank's f32 master
    /// partition, its f32 gradients and the optimizer's moments live in host memory and the
    /// optimizer steps there (`RankHeld::offloaded`).
    pub offload_optimizer: bool,
}

/// What a ZeRO stage partitions; a higher stage partitions more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum ZeroStage {
    /// The optimizer state and master weights; the gradients stay whole, reduced after
    /// backward.
    #[serde(rename = "1")]
    One,
    /// The gradients too, reduced bucket by bucket as backward makes them.
    #[serde(rename = "2")]
    Two,
    /// The weights too, each layer's gathered whole while it runs.
    #[serde(rename = "3")]
    Three,
}

impl ZeroStage {
    /// The stage's number, as DeepSpeed's config spells it.
    pub fn number(self) -> u8 {
        match self {
            ZeroStage::One => 1,
            ZeroStage::Two => 2,
            ZeroStage::Three => 3,
        }
    }
}

/// The host's scalars at an offloaded step of stage 1 or 2: Adam's step count and the
/// gradient norm's.
const HOST_STEP_SCALARS: u128 = 16;
/// Of stage 3's step scalars, the gradient norm's f32, which offload leaves on the GPU.
const NORM_ON_THE_GPU: u128 = 4;

/// Stage 3's scalars in backward beside the engine's: an f32 and a flag, in bytes.
const STAGE3_BACKWARD_SCALARS: u128 = 5;

/// The reduce bucket, allocated at backward's first gradient and kept to its end.
pub(super) const BUCKET_BYTES: u128 = BF16 * REDUCE_BUCKET;

/// The flat layout: every parameter, in registration order, padded to a multiple of twice
/// the ranks (DeepSpeed's 4-byte alignment of each rank's start).
pub(super) struct Flat {
    /// Elements of the padded flat buffer.
    pub padded: u128,
    /// Elements of one rank's partition.
    pub partition: u128,
    /// The most elements any rank's partition touches, whole tensors counted (the size of
    /// its bf16 partition of gradients, `grads_in_partition`).
    pub grads_in_partition: u128,
}

impl Flat {
    pub(super) fn of(tensors: &[Tensor], world: u64) -> Flat {
        let world = u128::from(world.max(1));
        let total: u128 = tensors.iter().map(|t| t.elements()).sum();
        let align = 2 * world;
        let padded = total.div_ceil(align) * align;
        let partition = padded / world;
        let mut most = 0;
        for rank in 0..world {
            let (lo, hi) = (rank * partition, (rank + 1) * partition);
            let mut offset = 0;
            let mut touched = 0;
            for t in tensors {
                let n = t.elements();
                if offset < hi && offset + n > lo {
                    touched += n;
                }
                offset += n;
            }
            most = u128::max(most, touched);
        }
        Flat {
            padded,
            partition,
            grads_in_partition: most,
        }
    }
}

/// What one rank holds, by stage.
pub(super) struct RankHeld {
    /// Weights held throughout: stages 1 and 2 the bf16 flat buffer, stage 3 the rank's
    /// pieces (its whole ones are [`RankHeld::whole_at`]'s).
    pub weights: u128,
    /// Stage 3's pieces, and the weights its coordinator holds gathered at the walk's points.
    pub stage3: Option<(Zero3, Gathered)>,
    /// The f32 master partition and Adam's moments with their step count.
    pub optimizer: u128,
    /// The step's own bytes: the partition's (stage 3: its largest sub-group's) f32 gradient
    /// and torch AdamW's two f32 temporaries (`exp_avg_sq.sqrt() / bias_correction`).
    pub step: u128,
    /// The layout stage 2's bucket replay walks; stage 3's partition of gradients is held
    /// throughout, and an offloaded one is on the host, so their replay counts none.
    pub flat: Flat,
    /// Gradients held throughout: stage 3's bf16 partition, where not offloaded.
    pub gradients: u128,
    /// Under offload, the GPU's staging buffer for gradients on their way to the host.
    pub staging: u128,
    /// Under offload, the rank's peak in host memory.
    pub host: u128,
    /// How a reduction under offload takes its gradients' norms on the GPU.
    pub norms: OffloadNorms,
}

/// ZeRO-Offload's gradient norms, taken on the GPU in f64 as each reduced gradient leaves for
/// the host (deepspeed 0.19: stages 1 and 2's `set_norm_for_param_grad_in_gpu`, stage 3's
/// `_constant_buffered_norm2`), a tensor at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OffloadNorms {
    /// Not offloaded: the norms are the step's.
    None,
    /// Stages 1 and 2: each gradient's slice in the rank's partition (of `partition` elements)
    /// turned to f64, once the reduction's flattened copy is gone.
    Slices { partition: u128 },
    /// Stage 3: each gradient's piece (of `world` ranks) read back in bf16 from the host and
    /// turned to f64 in chunks of 2.5e8 elements, beside the averaged bucket.
    Pieces { world: u128 },
}

/// Where in the step a point falls, for what stage 3 holds gathered there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StepAt {
    /// The final norm's forward, before the head's.
    FinalNorm,
    /// The output head's forward.
    ForwardEnd,
    /// The loss's backward.
    Loss,
    /// A moment of backward the bucket replay lists.
    Bucket(BucketAt),
    /// A backward point of the walk's own (stage 1's, whose weights are whole).
    Backward,
    /// The optimizer step: nothing gathered but the small tensors, partitioned again too.
    Step,
}

impl RankHeld {
    /// `None` at stage 3 on a layout whose modules its coordinator replay does not know.
    pub(super) fn of(
        ds: DeepSpeed,
        s: &Shape,
        tensors: &[Tensor],
        checkpointing: bool,
    ) -> Option<RankHeld> {
        let flat = Flat::of(tensors, ds.world);
        let held = match ds.stage {
            ZeroStage::One | ZeroStage::Two => RankHeld {
                weights: BF16 * flat.padded,
                stage3: None,
                optimizer: 12 * flat.partition + 4,
                step: 12 * flat.partition,
                flat,
                gradients: 0,
                staging: 0,
                host: 0,
                norms: OffloadNorms::None,
            },
            ZeroStage::Three => {
                let z = Zero3::of(tensors, ds.world);
                RankHeld {
                    weights: z.weights(),
                    stage3: Some((z, gathered(&DenseLayout::of(s)?, checkpointing))),
                    optimizer: z.optimizer(),
                    step: z.step_extra(),
                    flat: Flat {
                        grads_in_partition: 0,
                        ..flat
                    },
                    gradients: z.gradients(),
                    staging: 0,
                    host: 0,
                    norms: OffloadNorms::None,
                }
            }
        };
        Some(if ds.offload_optimizer {
            held.offloaded(tensors, ds.world)
        } else {
            held
        })
    }

    /// ZeRO-Offload (deepspeed 0.19, `offload_optimizer.device: cpu`, pinned, torch's AdamW
    /// stepping on the host): the master partition, the optimizer and the partition of
    /// gradients leave the GPU. At stages 1 and 2 the GPU keeps, for the gradients on their
    /// way out, a bf16 buffer as large as the largest parameter; the host holds, of the rank's
    /// partition, the f32 master copy, its f32 gradients, a bf16 copy the updated weights go
    /// back through and Adam's two moments with their step count, beside a bf16 buffer as
    /// large as the largest parameter, and the step adds AdamW's two f32 temporaries and its
    /// scalars. At stage 3 the host holds what the GPU would (master pieces, moments, the bf16
    /// gradient partition, the step's sub-group), the gradient norm's scalar left on the GPU.
    /// Recorded with `measure_deepspeed.py --offload-optimizer`
    /// (`tests/fixtures/pytorch/deepspeed-*-offload.json`): the host's peak exact.
    fn offloaded(self, tensors: &[Tensor], world: u64) -> RankHeld {
        let (staging, host) = match &self.stage3 {
            Some((z, _)) => (
                0,
                z.optimizer() + z.gradients() + z.step_extra() - NORM_ON_THE_GPU,
            ),
            None => {
                let largest = tensors.iter().map(|t| t.elements()).max().unwrap_or(0);
                let host_partition = (4 + 4 + 2 + 8 + 8) * self.flat.partition;
                (
                    BF16 * largest,
                    host_partition + BF16 * largest + HOST_STEP_SCALARS,
                )
            }
        };
        RankHeld {
            optimizer: 0,
            step: 0,
            gradients: 0,
            flat: Flat {
                grads_in_partition: 0,
                ..self.flat
            },
            staging,
            host,
            norms: if self.stage3.is_some() {
                OffloadNorms::Pieces {
                    world: u128::from(world.max(1)),
                }
            } else {
                OffloadNorms::Slices {
                    partition: self.flat.partition,
                }
            },
            ..self
        }
    }

    /// Stage 3's reduce bucket, there from the start (stages 1 and 2 allocate it at
    /// backward's first gradient, counted among their backward's points).
    pub(super) fn bucket(&self) -> u128 {
        if self.stage3.is_some() {
            BUCKET_BYTES
        } else {
            0
        }
    }

    /// Stage 3's scalars in backward beside the engine's, in bytes.
    pub(super) fn backward_scalars(&self) -> u128 {
        if self.stage3.is_some() {
            STAGE3_BACKWARD_SCALARS
        } else {
            0
        }
    }

    /// Bytes of whole weights at `at` beside the held ones: stage 3's small tensors and what
    /// its coordinator holds gathered (none at stages 1 and 2, whose weights are whole).
    /// Stage 3's whole weights with `gathered` elements gathered beside the small tensors.
    pub(super) fn whole_of(&self, gathered: u128) -> u128 {
        self.stage3
            .as_ref()
            .map_or(0, |(z, _)| z.whole_bytes(gathered))
    }

    pub(super) fn whole_at(&self, at: StepAt) -> u128 {
        let Some((z, g)) = &self.stage3 else {
            return 0;
        };
        let gathered = match at {
            StepAt::Step => return 0,
            StepAt::FinalNorm => g.final_norm,
            StepAt::ForwardEnd => g.forward_end,
            StepAt::Loss => g.loss,
            StepAt::Bucket(BucketAt::Head) => g.head,
            StepAt::Bucket(BucketAt::Layer(l)) => g.layers.get(l as usize).copied().unwrap_or(0),
            StepAt::Bucket(BucketAt::Embedding | BucketAt::EmbeddingHandedOver) => g.embedding,
            StepAt::Bucket(BucketAt::End) => 0,
            StepAt::Backward => g.layers.iter().copied().max().unwrap_or(g.head),
        };
        z.whole_bytes(gathered)
    }
}

/// Where backward is when the bucket holds gradients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BucketAt {
    /// The output head's backward and the final norm's (the output end of the model).
    Head,
    /// A decoder layer's backward.
    Layer(u128),
    /// The embedding's backward (the tied head's gradient summed into it).
    Embedding,
    /// The reduction the embedding's gradient sets off: its backward done, its temporaries
    /// gone, the gradient alone handed over.
    EmbeddingHandedOver,
    /// After backward: the last, partial bucket averaged.
    End,
}

/// One moment of backward with the bucket there.
pub(super) struct BucketPoint {
    pub at: BucketAt,
    /// Bytes of gradients besides the model's: the bucket, the averaging's transient, the
    /// gradient being handed over and the partition of gradients.
    pub gradients: u128,
    /// Stage 3: the elements its coordinator holds gathered at that moment, where the trace
    /// says (else those of the moment's layer, [`RankHeld::whole_at`]).
    pub gathered: Option<u128>,
    /// A reduction a gradient's hook sets off (the gradient made, its backward's temporaries
    /// gone).
    pub reduction: bool,
}

/// A gradient handed to the bucket: where backward is, its elements, and (stage 3) the
/// elements gathered then.
#[derive(Debug, Clone, Copy)]
pub(super) struct Handed {
    pub at: BucketAt,
    pub elements: u128,
    pub gathered: Option<u128>,
}

/// Stages 1 and 2: gradients in backward's order as the walk takes it: an untied head, the
/// final norm, then the layers from the last, each in reverse registration order; the
/// embedding (the tied head's) last.
pub(super) fn registration_order(
    tensors: &[Tensor],
    layer_tensors: usize,
    tied: bool,
) -> Vec<Handed> {
    let layers = tensors.len().saturating_sub(2 + usize::from(!tied)) / layer_tensors.max(1);
    let handed = |at, t: &Tensor| Handed {
        at,
        elements: t.elements(),
        gathered: None,
    };
    let mut order = Vec::new();
    if !tied {
        order.push(handed(BucketAt::Head, &tensors[tensors.len() - 1]));
    }
    order.push(handed(BucketAt::Head, &tensors[1 + layers * layer_tensors]));
    for l in (0..layers).rev() {
        let start = 1 + l * layer_tensors;
        for t in tensors[start..start + layer_tensors].iter().rev() {
            order.push(handed(BucketAt::Layer(l as u128), t));
        }
    }
    order.push(handed(BucketAt::Embedding, &tensors[0]));
    order
}

/// Stage 3: gradients in the order its trace makes them ready, each with what is gathered
/// then.
pub(super) fn traced_order(hooks: &[Hook]) -> Vec<Handed> {
    hooks
        .iter()
        .map(|h| Handed {
            at: match h.at {
                HookAt::Head => BucketAt::Head,
                HookAt::Layer(l) => BucketAt::Layer(l),
                HookAt::Embedding => BucketAt::Embedding,
            },
            elements: h.elements,
            gathered: Some(h.gathered),
        })
        .collect()
}

/// The moments where the bucket is there and may peak: its first use, each reduction of a
/// full bucket (triggered by the gradient that no longer fits), the embedding's backward and
/// the last reduction, after backward. Under offload each reduction also takes its gradients'
/// norms ([`OffloadNorms`]): a moment of its own at stages 1 and 2 (the flattened copy gone),
/// beside the averaged bucket at stage 3.
pub(super) fn bucket_points(
    order: &[Handed],
    layers: u128,
    (flat, accumulated): (&Flat, bool),
    norms: OffloadNorms,
) -> Vec<BucketPoint> {
    let bucket = BUCKET_BYTES;
    // The rank's bf16 partition of gradients, there from the first reduction on (from the
    // start in a micro-batch after a step's first, under gradient accumulation).
    let partition = |reduced: bool| {
        if reduced || accumulated {
            BF16 * flat.grads_in_partition
        } else {
            0
        }
    };
    // The norm's own bytes for the largest gradient a reduction hands over (the fullest rank's:
    // a slice as large as the tensor or the partition), beside the f64 norms kept so far, one
    // a tensor.
    let kept = F64 * order.len() as u128;
    let norm = |largest: u128| match norms {
        OffloadNorms::None => 0,
        OffloadNorms::Slices { partition } => F64 * largest.min(partition) + kept,
        OffloadNorms::Pieces { world } => {
            let piece = largest.div_ceil(world);
            BF16 * piece + F64 * piece.min(NORM_CHUNK) + kept
        }
    };
    let stage3 = matches!(norms, OffloadNorms::Pieces { .. });
    // The averaged bucket's flattened copy, and what the norms add beside it (stage 3) or after
    // it (stages 1 and 2).
    // A gradient larger than the bucket is averaged on its own, its averaged copy kept while
    // its norm is taken (Llama-3.1-8B's 128k-vocabulary head over 4 ranks).
    let reduction = |filled: u128, largest: u128| {
        if stage3 || largest > REDUCE_BUCKET {
            BF16 * filled + norm(largest)
        } else {
            u128::max(BF16 * filled, norm(largest))
        }
    };
    // The bucket's first moments, at the output end and in the last layer, beside the largest
    // gradient being handed over there.
    let largest = |at: BucketAt| {
        order
            .iter()
            .filter(|h| h.at == at)
            .map(|h| h.elements)
            .max()
            .unwrap_or(0)
    };
    let mut points: Vec<BucketPoint> = [BucketAt::Head, BucketAt::Layer(layers.saturating_sub(1))]
        .into_iter()
        .map(|at| BucketPoint {
            at,
            gradients: bucket + BF16 * largest(at) + partition(false),
            gathered: None,
            reduction: false,
        })
        .collect();
    let (mut filled, mut largest_filled) = (0u128, 0u128);
    let mut reduced = false;
    for h in order {
        let n = h.elements;
        if filled + n > REDUCE_BUCKET && filled > 0 {
            let held_partition = partition(reduced);
            points.push(BucketPoint {
                at: match h.at {
                    BucketAt::Embedding => BucketAt::EmbeddingHandedOver,
                    other => other,
                },
                gradients: bucket + reduction(filled, largest_filled) + BF16 * n + held_partition,
                gathered: h.gathered,
                reduction: true,
            });
            reduced = true;
            (filled, largest_filled) = (0, 0);
        }
        filled += n;
        largest_filled = largest_filled.max(n);
    }
    points.push(BucketPoint {
        at: BucketAt::Embedding,
        gradients: bucket + partition(reduced),
        gathered: None,
        reduction: false,
    });
    points.push(BucketPoint {
        at: BucketAt::End,
        gradients: bucket + reduction(filled, largest_filled) + partition(reduced),
        gathered: None,
        reduction: false,
    });
    points
}

/// What the walk holds where the bucket may peak: activations and temporaries.
pub(super) struct WalkAt {
    /// The output head's backward done: the walk's activations there, and the hidden states'
    /// gradient beside a tied head's gradient (waiting for the embedding's).
    pub head: (u128, u128),
    /// Activations before the decoder layers (the ids, the rotary tables).
    pub before_layers: u128,
    /// What a layer not being walked keeps: all it saved, or under checkpointing its input.
    pub layer_kept: u128,
    /// Beside those, the layer being walked (recomputed under checkpointing; else 0, its own
    /// saved tensors counted in `layer_kept`).
    pub layer_walked: u128,
    /// A layer's backward's temporaries, and a tied head's waiting gradient.
    pub layer_temporaries: u128,
    /// Of those, the weight gradient a projection's backward is making: at a reduction it is
    /// the gradient being handed over, counted with the gradients.
    pub weight_gradient: u128,
    /// The embedding's backward: the walk's activations and temporaries there.
    pub embedding: (u128, u128),
    /// After backward: the activations left.
    pub end: u128,
}

impl WalkAt {
    /// The walk's figures for `run`: `[head, embedding]` are its points there (activations and
    /// temporaries), `layer_backward` a layer's backward's temporaries and, of them, the
    /// weight gradient being made.
    pub(super) fn new(
        s: &Shape,
        run: &TrainingRun,
        (repeated, eager): (bool, bool),
        [head, embedding]: [(u128, u128); 2],
        (layer_backward, weight_gradient): (u128, u128),
    ) -> WalkAt {
        let tokens = u128::from(run.batch) * u128::from(run.seq);
        let seq = u128::from(run.seq);
        let hidden_grads = tokens * ACT_BYTES * s.hidden;
        let pending_head = if s.tied { s.vocab * s.hidden * BF16 } else { 0 };
        let layer_full = tokens * layer_per_token(s, run.recipe, false, seq, (repeated, eager))
            + layer_fixed(s, run.recipe, false);
        WalkAt {
            head: (head.0, head.1 + hidden_grads + pending_head),
            before_layers: tokens * IDS + seq * rope_per_position(s, run.recipe),
            // Under checkpointing each layer keeps its input, the walked one recomputed.
            layer_kept: if run.checkpointing {
                tokens * layer_input(s, run.recipe)
            } else {
                layer_full
            },
            layer_walked: if run.checkpointing {
                layer_full + seq * IDS
            } else {
                0
            },
            layer_temporaries: layer_backward + 2 * hidden_grads + pending_head,
            weight_gradient,
            embedding,
            end: tokens * IDS,
        }
    }

    /// Activations and temporaries at `at`; in layer `l`, the layers up to it counted whole.
    /// At a reduction a gradient sets off: a layer's temporaries but the gradient itself.
    pub(super) fn at_reduction(&self, at: BucketAt) -> (u128, u128) {
        let (activations, temporaries) = self.at(at);
        match at {
            BucketAt::Layer(_) => (activations, temporaries - self.weight_gradient),
            _ => (activations, temporaries),
        }
    }

    pub(super) fn at(&self, at: BucketAt) -> (u128, u128) {
        match at {
            BucketAt::Head => self.head,
            BucketAt::Layer(l) => (
                self.before_layers + (l + 1) * self.layer_kept + self.layer_walked,
                self.layer_temporaries,
            ),
            BucketAt::Embedding => self.embedding,
            BucketAt::EmbeddingHandedOver | BucketAt::End => (self.end, 0),
        }
    }
}
