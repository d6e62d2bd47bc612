//! The step's walk: the states alive at each point where the total can peak, the largest
//! taken. The second step is the one walked: the optimizer's state exists from the first
//! step's end, through the whole forward and backward.

use super::saved::{
    head_fixed, head_per_token, labels_bytes, layer_fixed, layer_input, layer_per_token,
    loss_backward_per_token, loss_forward_per_token, rope_per_position, ACT_BYTES, IDS,
};
use super::{Phase, Shape, TrainingError, TrainingPeak, TrainingRun};
use crate::model::arch::ModelArch;
use crate::model::estimate::Optimizer;

/// The loss itself, an f32 scalar.
const LOSS: u128 = 4;

/// What every point of the step holds: the parameters, the buffers and the optimizer's state.
struct Held {
    params: u128,
    buffers: u128,
    state: u128,
}

/// A point of the walk, by category.
struct Point {
    phase: Phase,
    gradients: u128,
    optimizer_extra: u128,
    activations: u128,
    temporaries: u128,
}

/// PyTorch's peak over one training step of `arch` under `run`.
pub fn training_peak(arch: &ModelArch, run: &TrainingRun) -> Result<TrainingPeak, TrainingError> {
    if run.recipe == super::Recipe::MixedFp32Master {
        return Err(TrainingError::Unsupported {
            what: "an f32 master copy of bf16 weights",
        });
    }
    let s = Shape::of(arch)?;
    if s.window.is_some_and(|w| u128::from(run.seq) >= w) {
        return Err(TrainingError::Unsupported {
            what: "a sliding window within the sequence (SDPA then takes a mask)",
        });
    }
    let p = u128::from(run.recipe.param_bytes());
    let seq = u128::from(run.seq);
    let tokens = u128::from(run.batch) * seq;
    let params = s.params * p;
    // Adam keeps two moments and a step count (an f32 tensor) a parameter tensor; SGD with
    // momentum one buffer. Their foreach step allocates one more parameter-sized list.
    let (state, step_temp) = match run.optimizer {
        Optimizer::Adam | Optimizer::Adamw => (2 * params + 4 * s.param_tensors, params),
        Optimizer::Sgd => (params, 0),
    };
    let held = Held {
        params,
        // The rotary embedding's inverse frequencies and their original, f32, head_dim / 2 each;
        // Gemma's embedding scale, a bf16 scalar.
        buffers: 4 * s.head_dim
            + if s.layout == super::Layout::Gemma2 {
                2
            } else {
                0
            },
        state,
    };
    let labels = labels_bytes(u128::from(run.batch), u128::from(run.seq));
    if (s.moe.is_some() || s.layout != super::Layout::Llama)
        && run.recipe == super::Recipe::Fp32Autocast
    {
        return Err(TrainingError::Unsupported {
            what: "experts or Gemma 2 under autocast",
        });
    }
    let full = |experts: bool| {
        tokens * layer_per_token(&s, run.recipe, experts, seq)
            + layer_fixed(&s, run.recipe, experts)
    };
    let moe_layers = s.moe.map_or(0, |m| m.layers);
    let dense_layers = s.layers - moe_layers;
    // The first layer is the last one backward runs through.
    let first_layer_experts = s.moe.is_some_and(|m| m.first_layer);
    let layer_full = full(first_layer_experts);
    // Under checkpointing a layer keeps only its input (the residual stream: f32 under
    // autocast), beside the position ids and an f32 scalar the checkpoint holds.
    let (layers_saved, checkpoint_extra) = if run.checkpointing {
        (
            s.layers * tokens * layer_input(&s, run.recipe),
            seq * IDS + LOSS,
        )
    } else {
        (dense_layers * full(false) + moe_layers * full(true), 0)
    };
    let saved = layers_saved
        + tokens * head_per_token(&s, run.recipe)
        + seq * rope_per_position(&s, run.recipe)
        + checkpoint_extra
        + head_fixed(&s, run.recipe)
        + labels
        + LOSS;
    let head_grad = s.vocab * s.hidden * p;
    let autocast_copy = head_fixed(&s, run.recipe);
    let points = [
        Point {
            phase: Phase::Forward,
            gradients: 0,
            optimizer_extra: 0,
            activations: saved + tokens * loss_forward_per_token(&s),
            temporaries: 0,
        },
        Point {
            phase: Phase::Backward,
            gradients: 0,
            optimizer_extra: 0,
            // The labels are released; an f32 scalar of the loss's backward is held instead.
            activations: saved - labels + LOSS,
            temporaries: tokens * loss_backward_per_token(&s),
        },
        // The output head's backward: the log-softmax output is gone, the head's weight
        // gradient is there, beside the logits' bf16 gradient (and, under autocast, the
        // gradient of the weight's bf16 copy before it is cast into the f32 one).
        Point {
            phase: Phase::Backward,
            gradients: head_grad,
            optimizer_extra: 0,
            activations: saved - labels - tokens * 4 * s.vocab,
            temporaries: tokens * 2 * (s.vocab + s.hidden) + autocast_copy,
        },
        // The first layer's backward (recomputed under checkpointing), bounded from above:
        // every gradient but the embedding's (the head's shares it when tied) is counted as
        // there, the layer's activations as whole, beside the largest gradients its
        // feed-forward block's backward holds at once.
        Point {
            phase: Phase::Backward,
            gradients: if s.tied { params } else { params - head_grad },
            optimizer_extra: 0,
            activations: tokens * IDS
                + seq * rope_per_position(&s, run.recipe)
                + layer_full
                + if run.checkpointing {
                    tokens * layer_input(&s, run.recipe) + seq * IDS
                } else {
                    0
                },
            temporaries: layer_backward_temporaries(&s, p, tokens, first_layer_experts)
                .max(tokens * 2 * ACT_BYTES * s.hidden),
        },
        Point {
            phase: Phase::Optimizer,
            gradients: params,
            optimizer_extra: step_temp,
            activations: tokens * IDS,
            temporaries: 0,
        },
    ];
    let total = |pt: &Point| {
        held.params
            + held.buffers
            + held.state
            + pt.gradients
            + pt.optimizer_extra
            + pt.activations
            + pt.temporaries
    };
    let top = points
        .iter()
        .max_by_key(|pt| total(pt))
        .expect("the walk has points");
    let fit = |v: u128| u64::try_from(v).map_err(|_| TrainingError::Overflow);
    Ok(TrainingPeak {
        phase: top.phase,
        parameters: fit(held.params)?,
        buffers: fit(held.buffers)?,
        gradients: fit(top.gradients)?,
        optimizer_state: fit(held.state + top.optimizer_extra)?,
        activations: fit(top.activations)?,
        temporaries: fit(top.temporaries)?,
        total: fit(total(top))?,
    })
}

/// The gradients a layer's feed-forward backward holds at once beside the saved activations: its
/// up projection's weight gradient (all experts' under grouped experts) and the gradients of
/// its intermediate activations.
fn layer_backward_temporaries(s: &Shape, param_bytes: u128, tokens: u128, experts: bool) -> u128 {
    match s.moe.filter(|_| experts) {
        Some(m) => {
            m.experts * 2 * m.intermediate * s.hidden * param_bytes
                + tokens * m.top_k * 3 * m.intermediate * ACT_BYTES
        }
        None => s.hidden * s.intermediate * param_bytes + tokens * 2 * s.intermediate * ACT_BYTES,
    }
}
