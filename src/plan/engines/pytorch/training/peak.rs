//! Where a training step peaks, by how it runs: one GPU (with gradient accumulation), FSDP2,
//! DDP and ZeRO-1, DeepSpeed; each over the walk's points ([`super::step`]).

use super::fsdp::Tally;
use super::step::{
    accumulating, held, largest, points, saved, sharded_peak, tallies, Held, Point, Saved,
};
use super::walked::check;
use super::Optimizer;
use super::{Ddp, Lora, Shape, TrainingError, TrainingPeak, TrainingRun};
use crate::model::arch::ModelArch;

/// PyTorch's peak over one training step of `arch` under `run`.
pub fn training_peak(arch: &ModelArch, run: &TrainingRun) -> Result<TrainingPeak, TrainingError> {
    let run = &run.as_walked();
    let s = Shape::of(arch)?;
    let mask = check(&s, run)?;
    let lora = run.recipe.lora();
    let held = held(&s, run, lora);
    let saved = saved(&s, run, lora, mask);
    let points = points(&s, run, lora, &held, &saved);
    if let Some(f) = run.fsdp {
        return sharded_peak(&s, run, f, (&held, &saved), &points);
    }
    if let Some(world) = run.ddp.and_then(|d| d.zero1) {
        return zero1_peak(&s, run, (lora, &saved), &held, world);
    }
    if let Some(ds) = run.deepspeed {
        return super::deepspeed_step::deepspeed_peak(&s, run, ds, (&held, &points), mask);
    }
    largest(&step_tallies(run, &points, &held), held.buffers)
}

/// The step's points under `held` on one GPU or one DDP rank: a second micro-batch's too
/// under gradient accumulation, DDP's buckets beside them.
fn step_tallies(run: &TrainingRun, points: &[Point; 6], held: &Held) -> Vec<Tally> {
    let mut tallies = tallies(points, held);
    if run.grad_accum > 1 {
        tallies.extend(self::tallies(&accumulating(points, held), held));
    }
    if let Some(d) = run.ddp {
        // Micro-batches under `no_sync` make their gradients apart from the buckets, as
        // `gradient_as_bucket_view` only takes effect in a synchronised backward: accumulated,
        // every gradient stands beside the buckets.
        let d = Ddp {
            bucket_view: d.bucket_view && run.grad_accum == 1,
            ..d
        };
        super::ddp::with_buckets(&mut tallies, d, held.trainable);
    }
    tallies
}

/// The worst rank's peak under DDP with `ZeroRedundancyOptimizer` over `world` ranks: each
/// rank's optimizer state and foreach step over its share of the tensors
/// ([`super::ddp::zero_partition`]), everything else whole.
fn zero1_peak(
    s: &Shape,
    run: &TrainingRun,
    (lora, saved): (Option<Lora>, &Saved),
    held: &Held,
    world: u64,
) -> Result<TrainingPeak, TrainingError> {
    let refuse = |what| Err(TrainingError::Unsupported { what });
    let Some(elements) = s
        .dense_tensor_elements()
        .filter(|_| lora.is_none() && s.f32_params == 0)
    else {
        return refuse("ZeRO-1 with LoRA, shared experts or f32 parameters among bf16 ones");
    };
    let p = u128::from(run.recipe.param_bytes());
    let mut worst: Option<TrainingPeak> = None;
    for (n, tensors) in super::ddp::zero_partition(&elements, world) {
        let (state, step_temp) = match run.optimizer {
            Optimizer::Adam | Optimizer::Adamw => (2 * n * p + 4 * tensors, n * p),
            Optimizer::Sgd => (n * p, 0),
            Optimizer::Adamw8bit | Optimizer::Adafactor => {
                return refuse("8-bit AdamW or Adafactor under ZeRO-1")
            }
        };
        let rank = Held {
            state,
            step_temp,
            ..*held
        };
        let tallies = step_tallies(run, &points(s, run, lora, &rank, saved), &rank);
        let peak = largest(&tallies, rank.buffers)?;
        if worst.is_none_or(|w| peak.total > w.total) {
            worst = Some(peak);
        }
    }
    worst.ok_or(TrainingError::Overflow)
}
