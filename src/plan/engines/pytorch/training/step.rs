//! The step's walk: the states alive at each point where the total can peak, the largest
//! taken. The second step is the one walked: the optimizer's state exists from the first
//! step's end, through the whole forward and backward.

use super::fsdp::{self, sharded_points, Fsdp, Grads, Sizes, Tally};
use super::optimizer_state::{adafactor, adamw8bit_state};
use super::saved::{
    eager_attention_remnant, head_fixed, head_per_token, labels_bytes, layer_backward_temporaries,
    layer_fixed, layer_input, layer_per_token, loss_backward_per_token, loss_forward_per_token,
    rope_per_position, up_weight_grad, ACT_BYTES, IDS,
};
use super::walked::Mask;
use super::Optimizer;
use super::{lora, Layout, Lora, Phase, Recipe, Shape, TrainingError, TrainingPeak, TrainingRun};

/// The loss itself, an f32 scalar.
const LOSS: u128 = 4;

/// What every point of the step holds: the parameters, the buffers and the optimizer's state;
/// and what the optimizer updates.
#[derive(Clone, Copy)]
pub(super) struct Held {
    pub(super) params: u128,
    pub(super) buffers: u128,
    pub(super) state: u128,
    /// Bytes of the parameters the optimizer updates (their gradients are as large).
    pub(super) trainable: u128,
    /// The foreach step's extra list.
    pub(super) step_temp: u128,
}

/// What the forward saves for backward.
pub(super) struct Saved {
    /// Everything, at the forward's end.
    total: u128,
    /// The first layer's own (recomputed under checkpointing), the last backward runs through.
    first_layer: u128,
    /// The shifted labels, released by the loss's backward.
    labels: u128,
    /// Under eager attention, what the first layer still holds when its softmax's backward
    /// runs (its input norm's, the query's, the repeated key's and the f32 softmax's), beside
    /// the causal mask the checkpoints hold; `None` under SDPA.
    eager_first_layer: Option<u128>,
}

/// A point of the walk, by category.
pub(super) struct Point {
    pub(super) phase: Phase,
    pub(super) gradients: u128,
    pub(super) optimizer_extra: u128,
    pub(super) activations: u128,
    pub(super) temporaries: u128,
}

impl Point {
    fn sum(&self) -> u128 {
        self.gradients + self.optimizer_extra + self.activations + self.temporaries
    }

    /// This point, or `other` where it holds more.
    fn larger(self, other: Option<Point>) -> Point {
        match other {
            Some(o) if o.sum() > self.sum() => o,
            _ => self,
        }
    }
}

/// The points of a micro-batch after a step's first under gradient accumulation: every
/// gradient is there from the forward on, and each new one (the head's, a layer's weight
/// gradients, the embedding's) is made beside it before it is added in place.
pub(super) fn accumulating(points: &[Point; 6], held: &Held) -> Vec<Point> {
    points[..5]
        .iter()
        .enumerate()
        .map(|(i, pt)| Point {
            gradients: held.trainable,
            // The head's backward counts its new weight gradient among the gradients.
            temporaries: pt.temporaries + if i == 2 { pt.gradients } else { 0 },
            ..*pt
        })
        .collect()
}

/// Each point's categories, the parameters and optimizer state held throughout.
pub(super) fn tallies(points: &[Point], held: &Held) -> Vec<Tally> {
    points
        .iter()
        .map(|pt| Tally {
            phase: pt.phase,
            parameters: held.params,
            gradients: pt.gradients,
            optimizer: held.state + pt.optimizer_extra,
            activations: pt.activations,
            temporaries: pt.temporaries,
        })
        .collect()
}

/// The point of `points` with the largest total, by category.
pub(super) fn largest(points: &[Tally], buffers: u128) -> Result<TrainingPeak, TrainingError> {
    let total = |pt: &Tally| {
        pt.parameters + buffers + pt.gradients + pt.optimizer + pt.activations + pt.temporaries
    };
    let top = points
        .iter()
        .max_by_key(|pt| total(pt))
        .expect("the walk has points");
    let fit = |v: u128| u64::try_from(v).map_err(|_| TrainingError::Overflow);
    Ok(TrainingPeak {
        phase: top.phase,
        parameters: fit(top.parameters)?,
        buffers: fit(buffers)?,
        gradients: fit(top.gradients)?,
        optimizer_state: fit(top.optimizer)?,
        activations: fit(top.activations)?,
        temporaries: fit(top.temporaries)?,
        total: fit(total(top))?,
        host: 0,
    })
}

/// One rank's peak under FSDP2: the unsharded walk's points with the rank's shards and what is
/// unsharded at each ([`super::fsdp`]).
pub(super) fn sharded_peak(
    s: &Shape,
    run: &TrainingRun,
    f: Fsdp,
    (held, saved): (&Held, &Saved),
    points: &[Point; 6],
) -> Result<TrainingPeak, TrainingError> {
    // Every layer alike (all dense, or experts in every layer): one layer's bytes stand for
    // each; else the widest layer's for any (DeepSeek-V2's dense first layer is narrower).
    let uniform = s.moe.is_none_or(|m| m.layers == s.layers);
    let master = match run.recipe {
        // LoRA's adapters in bf16, as FSDP2 shards one dtype a group; under autocast the f32
        // shards are gathered and reduced in f32.
        Recipe::Bf16 | Recipe::Lora(_) | Recipe::Fp32Autocast => 1,
        // f32 shards gathered in bf16, gradients reduced in f32.
        Recipe::MixedFp32Master => 2,
        // The NF4 layers' packed bytes and the f32 rest sharded alike (FSDP2 gathers mixed
        // dtypes as bytes), the f32 adapters reduced in f32.
        Recipe::Qlora(_) => 1,
    };
    fsdp_runs(s, run, f)?;
    let tokens = u128::from(run.batch) * u128::from(run.seq);
    let p = u128::from(run.recipe.param_bytes());
    let heads = if s.tied { 1 } else { 2 };
    let root = (heads * s.vocab * s.hidden + s.hidden) * p;
    let tensors = match run.recipe.lora() {
        Some(l) => lora::adapter_params(s, l).1,
        None => s.param_tensors,
    };
    let (state_per_byte, state_fixed, step_temp_per_byte) = fsdp_state(run.optimizer, tensors)?;
    // QLoRA's biases sharded in f32, and the bf16 copies bitsandbytes leaves beside them.
    // PyTorch's per-tensor loop (`foreach=False`): Adam's two temporaries of one shard at a
    // time, measured under FSDPMemTracker (Phi-3, Llama-3.2-1B, Qwen2.5-0.5B at 2–8 ranks);
    // SGD updates in place.
    let loop_temp = match run.optimizer {
        _ if run.foreach => None,
        Optimizer::Sgd => Some(0),
        _ => fsdp::largest_shard(s, u128::from(f.world), run.recipe.lora()).map(|n| 2 * n * p),
    };
    let (params, leaked) = match run.recipe {
        Recipe::Qlora(_) => {
            let biases = s.layers * lora::quantized_biases(s);
            (held.params + 2 * biases, 2 * biases)
        }
        _ => (held.params, 0),
    };
    let layer = if uniform {
        (params - root) / s.layers.max(1)
    } else {
        s.widest_layer(root / p) * p
    };
    let grads = fsdp_grads(s, run, held, (params, root, layer));
    let frozen = run.recipe.lora().is_some();
    let sizes = Sizes {
        params,
        root,
        layer,
        grads,
        state_per_byte,
        state_fixed,
        step_temp_per_byte,
        loop_temp,
        param_bytes: p,
        master,
        act_grad: tokens * s.hidden * ACT_BYTES,
        layer_act_grads: match s.moe {
            Some(m) => tokens * m.top_k * 3 * m.intermediate * ACT_BYTES,
            None => tokens * 2 * s.intermediate * ACT_BYTES,
        },
        // A frozen layer's backward makes no weight gradient.
        layer_backward: if frozen {
            tokens * 2 * s.intermediate * ACT_BYTES
        } else {
            layer_backward_temporaries(s, p, tokens, s.moe.is_some())
        },
        // Everything the forward saved (the loss's backward point holds it but the labels,
        // and the loss), before any of it is released; FSDPMemTracker counts four f32 scalars
        // there (the loss among them).
        head_gathered: if run.recipe == Recipe::Fp32Autocast {
            1
        } else {
            2
        },
        accumulating: run.grad_accum > 1,
        layer_saved: saved.first_layer,
        backward_start: points[1].activations - LOSS
            + labels_bytes(run.batch.into(), run.seq.into())
            + 4 * LOSS,
    };
    let mut sharded = sharded_points(s, f, &sizes, &tallies(points, held));
    for t in &mut sharded {
        t.parameters += leaked;
    }
    largest(&sharded, held.buffers)
}

/// The gradients FSDP2 holds: the adapters' alone under LoRA, else every parameter's, with
/// the root's, a layer's, the head's and the final norm's shares (`sizes`: all parameters'
/// bytes, the root's and a layer's).
fn fsdp_grads(s: &Shape, run: &TrainingRun, held: &Held, sizes: (u128, u128, u128)) -> Grads {
    let (params, root, layer) = sizes;
    let p = u128::from(run.recipe.param_bytes());
    match run.recipe.lora() {
        Some(_) => Grads {
            all: held.trainable,
            root: 0,
            layer: held.trainable / s.layers.max(1),
            head: 0,
            norm: 0,
        },
        None => Grads {
            all: params,
            root,
            layer,
            head: s.vocab * s.hidden * p,
            norm: s.hidden * p,
        },
    }
}

/// FSDP2 setups that do not run: a bf16 model keeping some parameters in f32 (fully_shard
/// asserts one dtype among a group's trained parameters, torch 2.15's `_init_mp_dtypes`, at
/// the first forward), or no rank.
fn fsdp_runs(s: &Shape, run: &TrainingRun, f: Fsdp) -> Result<(), TrainingError> {
    if s.f32_params > 0 && run.recipe == Recipe::Bf16 {
        return Err(TrainingError::DoesNotRun {
            what: "FSDP2 on a bf16 model that keeps some parameters in f32 (DeepSeek-V2's \
                   router): fully_shard asserts one dtype among the trained parameters at the \
                   first forward; --recipe mixed trains them all in f32",
        });
    }
    if f.world == 0 {
        return Err(TrainingError::Unsupported {
            what: "FSDP2 over no rank",
        });
    }
    Ok(())
}

/// The optimizer's state under FSDP2: bytes a parameter byte, fixed bytes (Adam's step
/// counters, a tensor each of `tensors`), and the step's temporaries a parameter byte.
/// bitsandbytes 0.50's blockwise update takes its plain quantization maps beside the DTensor
/// state, and transformers 5.24's Adafactor adds a plain tensor to a DTensor: both fail in
/// their first step.
fn fsdp_state(optimizer: Optimizer, tensors: u128) -> Result<(u128, u128, u128), TrainingError> {
    match optimizer {
        Optimizer::Adam | Optimizer::Adamw => Ok((2, 4 * tensors, 1)),
        Optimizer::Sgd => Ok((1, 0, 0)),
        Optimizer::Adamw8bit => Err(TrainingError::DoesNotRun {
            what: "bitsandbytes' 8-bit AdamW under FSDP2: its first step mixes plain tensors \
                   with FSDP2's DTensor shards and fails",
        }),
        Optimizer::Adafactor => Err(TrainingError::DoesNotRun {
            what: "transformers' Adafactor under FSDP2: its first step mixes plain tensors \
                   with FSDP2's DTensor shards and fails",
        }),
    }
}

/// How the adapters meet the stream: QLoRA's f32 stream; under FSDP2, which shards one dtype a
/// group, bf16 adapters on the bf16 model; else PEFT's f32 adapters on a bf16 model.
fn lora_stream(run: &TrainingRun) -> lora::Stream {
    match (run.recipe, run.fsdp) {
        (Recipe::Qlora(_), _) => lora::Stream::Shared { act: 4 },
        (_, Some(_)) => lora::Stream::Shared { act: 2 },
        _ => lora::Stream::F32Copies,
    }
}

/// The parameters (all trained, or LoRA's f32 adapters beside the frozen bf16 model), buffers
/// and optimizer state.
pub(super) fn held(s: &Shape, run: &TrainingRun, lora: Option<Lora>) -> Held {
    let p = u128::from(run.recipe.param_bytes());
    let (frozen, quant_state) = match run.recipe {
        Recipe::Qlora(_) => lora::qlora_frozen(s),
        _ => (s.params * p, 0),
    };
    let (frozen, trainable, trainable_tensors) = match lora {
        Some(l) => {
            let (adapters, tensors) = lora::adapter_params(s, l);
            let bytes = match lora_stream(run) {
                lora::Stream::Shared { act } => act,
                lora::Stream::F32Copies => 4,
            };
            (frozen, adapters * bytes, tensors)
        }
        // DeepSeek-V2 keeps its expert gates' weights in f32 whatever the model's dtype.
        None => (0, s.params * p + s.f32_params * (4 - p), s.param_tensors),
    };
    // Adam keeps two moments and a step count (an f32 tensor) a parameter tensor; SGD with
    // momentum one buffer. Their foreach step allocates one more parameter-sized list.
    let (state, step_temp) = match run.optimizer {
        Optimizer::Adam | Optimizer::Adamw => (2 * trainable + 4 * trainable_tensors, trainable),
        Optimizer::Sgd => (trainable, 0),
        // bitsandbytes updates in place, in one kernel: no step temporaries.
        Optimizer::Adamw8bit => (adamw8bit_state(s), 0),
        Optimizer::Adafactor => adafactor(s, p),
    };
    // The rotary embedding's inverse frequencies and their original, f32, half a head (or
    // half the rotary dimensions) each; Gemma's embedding scale, a bf16 scalar.
    let rotary = match (s.mla, s.layout) {
        (Some(m), _) => 4 * m.rope,
        (None, _) => s.rotary_tables * 4 * s.head_dim,
    };
    let scale = if matches!(s.layout, Layout::Gemma2 | Layout::Gemma3) {
        2
    } else {
        0
    };
    Held {
        params: frozen + trainable,
        buffers: rotary + scale + quant_state,
        state,
        trainable,
        step_temp,
    }
}

/// What the forward saves for backward.
pub(super) fn saved(s: &Shape, run: &TrainingRun, lora: Option<Lora>, mask: Mask) -> Saved {
    let seq = u128::from(run.seq);
    let tokens = u128::from(run.batch) * seq;
    let full = |experts: bool| {
        tokens * layer_per_token(s, run.recipe, experts, seq, (mask.repeated, mask.eager))
            + layer_fixed(s, run.recipe, experts)
    };
    let moe_layers = s.moe.map_or(0, |m| m.layers);
    let mut first_layer = full(s.moe.is_some_and(|m| m.first_layer));
    // Under checkpointing a layer keeps only its input (the residual stream: f32 under
    // autocast), beside the position ids and an f32 scalar the checkpoint holds.
    let (mut layers, checkpoint) = if run.checkpointing {
        (
            s.layers * tokens * layer_input(s, run.recipe),
            seq * IDS + LOSS,
        )
    } else {
        (
            (s.layers - moe_layers) * full(false) + moe_layers * full(true),
            0,
        )
    };
    let mut head = tokens * head_per_token(s, run.recipe);
    // Under LoRA nothing before the first adapter needs a gradient: the first layer saves less,
    // the final norm no bf16 output (the head is frozen).
    // Under checkpointing transformers makes the embedding's output require a gradient
    // (`enable_input_require_grads`), so the first layer saves what the others do.
    if let Some(l) = lora {
        let stream = lora_stream(run);
        let (first, grad) = lora::layer_per_token(s, l, run.checkpointing, stream);
        let (rest, grad_after) = lora::layer_per_token(s, l, grad, stream);
        first_layer = tokens * first;
        if !run.checkpointing {
            layers = tokens * (first + (s.layers - 1) * rest);
        }
        let norm = if grad_after || grad {
            4 * s.hidden + 4
        } else {
            0
        };
        head = tokens * (IDS + norm + 4 * s.vocab);
    }
    // The sliding mask, bf16, a row per query and a column per key of each sequence: every
    // layer's SDPA saves a copy of its own. Gemma 2's eager attention always takes masks, a
    // causal and a sliding one, which the checkpoints hold as their layers' inputs.
    let masks = if mask.masked {
        s.layers * 2 * tokens * seq
    } else if s.layout == Layout::Gemma2 && run.checkpointing {
        2 * 2 * tokens * seq
    } else if mask.eager && run.checkpointing {
        // Eager attention's one causal mask, held by the checkpoints.
        2 * tokens * seq
    } else {
        0
    };
    let labels = labels_bytes(u128::from(run.batch), seq);
    let eager_first_layer = mask
        .eager
        .then(|| tokens * eager_attention_remnant(s, seq) + masks);
    Saved {
        total: layers
            + masks
            + head
            + seq * rope_per_position(s, run.recipe)
            + checkpoint
            + head_fixed(s, run.recipe)
            + labels
            + LOSS,
        first_layer,
        labels,
        eager_first_layer,
    }
}

/// Eager attention's softmax backward in the first layer (its last backward, recomputed under
/// checkpointing): the MLP's and o_proj's gradients are there, and beside what the layer
/// still holds, the f32 gradients of the probabilities and of the scores, and the bf16
/// gradients of the stream. Every gradient is counted as there.
fn eager_softmax_backward(
    s: &Shape,
    run: &TrainingRun,
    held: &Held,
    saved: &Saved,
) -> Option<Point> {
    let remnant = saved.eager_first_layer?;
    let seq = u128::from(run.seq);
    let tokens = u128::from(run.batch) * seq;
    let p = u128::from(run.recipe.param_bytes());
    Some(Point {
        phase: Phase::Backward,
        gradients: if s.tied {
            held.trainable
        } else {
            held.trainable - s.vocab * s.hidden * p
        },
        optimizer_extra: 0,
        activations: tokens * IDS
            + seq * rope_per_position(s, run.recipe)
            + remnant
            + if run.checkpointing {
                tokens * layer_input(s, run.recipe) + seq * IDS
            } else {
                0
            },
        temporaries: tokens * (2 * 4 * s.heads * seq + 2 * ACT_BYTES * s.hidden),
    })
}

/// The output head's backward: the log-softmax output is gone, the head's weight gradient is
/// there, beside the logits' bf16 gradient. Under autocast the peak is a step later, the cast of
/// the weight's bf16 gradient into the f32 one: the product's backward has released what it
/// saved (the weight's bf16 copy and its bf16 input) and the logits' gradient, and the final
/// norm's output has its f32 gradient.
fn head_backward(s: &Shape, run: &TrainingRun, saved: &Saved, head_grad: u128) -> Point {
    let tokens = u128::from(run.batch) * u128::from(run.seq);
    let after_loss = saved.total - saved.labels - tokens * 4 * s.vocab;
    let (activations, temporaries) = if run.recipe == Recipe::Fp32Autocast {
        let weight_copy = ACT_BYTES * s.vocab * s.hidden;
        (
            after_loss - weight_copy - tokens * ACT_BYTES * s.hidden,
            weight_copy + tokens * 4 * s.hidden,
        )
    } else {
        let act = if matches!(run.recipe, Recipe::Qlora(_)) {
            4
        } else {
            ACT_BYTES
        };
        (
            after_loss,
            tokens * act * (s.vocab + s.hidden) + head_fixed(s, run.recipe),
        )
    };
    Point {
        phase: Phase::Backward,
        gradients: head_grad,
        optimizer_extra: 0,
        activations,
        temporaries,
    }
}

/// The points where the step can peak.
pub(super) fn points(
    s: &Shape,
    run: &TrainingRun,
    lora: Option<Lora>,
    held: &Held,
    saved: &Saved,
) -> [Point; 6] {
    let p = u128::from(run.recipe.param_bytes());
    let seq = u128::from(run.seq);
    let tokens = u128::from(run.batch) * seq;
    let head_grad = if lora.is_some() {
        0
    } else {
        s.vocab * s.hidden * p
    };
    let first_layer_experts = s.moe.is_some_and(|m| m.first_layer);
    // QLoRA's activations are f32, its output head too (the logits need no upcast), and its
    // projections' backward dequantizes each weight to bf16.
    let (act, logits, dequant) = match run.recipe {
        Recipe::Qlora(_) => (4, 4 * s.vocab, 2 * s.hidden * s.intermediate),
        _ => (ACT_BYTES, loss_forward_per_token(s), 0),
    };
    let layer_temporaries = match lora {
        Some(_) => tokens * 2 * s.intermediate * act + dequant,
        None => layer_backward_temporaries(s, p, tokens, first_layer_experts),
    };
    [
        forward_point(s, run, saved, tokens * logits),
        Point {
            phase: Phase::Backward,
            gradients: 0,
            optimizer_extra: 0,
            // The labels are released; an f32 scalar of the loss's backward is held instead.
            activations: saved.total - saved.labels + LOSS,
            temporaries: tokens * loss_backward_per_token(s),
        },
        head_backward(s, run, saved, head_grad),
        // The first layer's backward (recomputed under checkpointing), bounded from above:
        // every gradient but the embedding's (the head's shares it when tied) is counted as
        // there, the layer's activations as whole, beside the largest gradients its
        // feed-forward block's backward holds at once.
        Point {
            phase: Phase::Backward,
            // The up projection's weight gradient the temporaries count is the layer's own,
            // not accumulated yet: it is not also counted among the gradients.
            gradients: if s.tied || lora.is_some() {
                held.trainable
            } else {
                held.trainable - head_grad
            }
            .saturating_sub(if lora.is_some() {
                0
            } else {
                up_weight_grad(s, p, first_layer_experts)
            }),
            optimizer_extra: 0,
            activations: tokens * IDS
                + seq * rope_per_position(s, run.recipe)
                + saved.first_layer
                + if run.checkpointing {
                    tokens * layer_input(s, run.recipe) + seq * IDS
                } else {
                    0
                },
            temporaries: layer_temporaries.max(tokens * 2 * act * s.hidden),
        }
        .larger(eager_softmax_backward(s, run, held, saved)),
        embedding_backward(s, lora.is_some(), (held, saved), (tokens, p)),
        Point {
            phase: Phase::Optimizer,
            gradients: held.trainable,
            optimizer_extra: held.step_temp,
            activations: tokens * IDS,
            temporaries: 0,
        },
    ]
}

/// The forward's peak, at the loss: everything saved and the logits. Under autocast the final
/// norm's f32 output, which the head reads as a bf16 copy, is still held by the model's output
/// while the loss is computed, and autocast's cache keeps the projections' biases in bf16
/// (which nothing saves); with checkpointing the layers save only their inputs, but the cache
/// keeps every projection's bf16 weight copy too, to the forward's end.
fn forward_point(s: &Shape, run: &TrainingRun, saved: &Saved, logits: u128) -> Point {
    let tokens = u128::from(run.batch) * u128::from(run.seq);
    let biases = u128::from(s.qkv_bias) * (s.heads + 2 * s.kv_heads) * s.head_dim
        + u128::from(s.o_bias) * s.hidden;
    let cached_biases = s.layers * ACT_BYTES * biases;
    Point {
        phase: Phase::Forward,
        gradients: 0,
        optimizer_extra: 0,
        activations: saved.total
            + logits
            + match (run.recipe, run.checkpointing) {
                (Recipe::Fp32Autocast, false) => tokens * 4 * s.hidden + cached_biases,
                (Recipe::Fp32Autocast, true) => {
                    tokens * 4 * s.hidden
                        + cached_biases
                        + s.layers * ACT_BYTES * s.layer_linear_params
                }
                _ => 0,
            },
        temporaries: 0,
    }
}

/// The embedding's backward, last: every other gradient is there; the embedding's is being
/// made (and, when the head shares the matrix, summed with the head's: both contributions and
/// their sum at once). Frozen under LoRA (`frozen`).
fn embedding_backward(
    s: &Shape,
    frozen: bool,
    (held, saved): (&Held, &Saved),
    (tokens, p): (u128, u128),
) -> Point {
    Point {
        phase: Phase::Backward,
        gradients: if frozen {
            0
        } else {
            held.trainable - s.vocab * s.hidden * p
        },
        optimizer_extra: 0,
        // The ids, as long as the shifted labels.
        activations: saved.labels,
        temporaries: match (frozen, s.tied) {
            (true, _) => 0,
            (false, true) => 3 * s.vocab * s.hidden * p,
            (false, false) => s.vocab * s.hidden * p + tokens * ACT_BYTES * s.hidden,
        },
    }
}
