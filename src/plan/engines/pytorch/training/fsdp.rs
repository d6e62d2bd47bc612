//! One rank's memory over an FSDP2 training step (`fully_shard` on every decoder layer, then on
//! the root module), as PyTorch's `FSDPMemTracker` counts it.
//!
//! Every parameter is sharded along its first dimension (`ceil(rows / world)` rows a rank), and
//! so are its gradient and its optimizer state; each rank runs the whole model on its own
//! micro-batch, so the activations are the unsharded step's. What a rank holds beyond its
//! shards at each point of the walk:
//!
//! - the root's parameters (embeddings, final norm, an untied head) unsharded from the forward
//!   through the backward (FSDP2 does not reshard the root after its forward);
//! - in the backward, the next layer's all-gathered parameters (prefetched) or the layer's own,
//!   its unsharded gradients and one layer's reduce-scatter buffer, which FSDP2 frees only when
//!   the next reduce-scatter is issued (so one stays to the backward's end);
//! - with `reshard_after_forward` off, every layer's unsharded parameters from the forward until
//!   the layer's backward.
//!
//! The activations and the backward's temporaries are the unsharded walk's, point by point
//! ([`super::step`]). Recorded against `FSDPMemTracker` in `tests/fixtures/pytorch/fsdp-*.json`.

use serde::Serialize;

use super::{Lora, Phase, Shape};

/// FSDP2 over `world` ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Fsdp {
    /// Ranks (GPUs) the model is sharded over.
    pub world: u64,
    /// `reshard_after_forward` (FSDP2's default, on): each layer's parameters are freed after
    /// its forward and gathered again for its backward.
    pub reshard_after_forward: bool,
}

/// What the step holds at one point, by category (the unsharded walk's points too).
pub(super) struct Tally {
    pub phase: Phase,
    /// The rank's shards and whatever is unsharded then.
    pub parameters: u128,
    pub gradients: u128,
    /// The optimizer's state and its step's temporaries.
    pub optimizer: u128,
    pub activations: u128,
    pub temporaries: u128,
}

/// The sizes the sharded walk needs, in bytes.
pub(super) struct Sizes {
    /// Every parameter.
    pub params: u128,
    /// The root module's own: embeddings, final norm, an untied head.
    pub root: u128,
    /// One decoder layer's.
    pub layer: u128,
    /// The unsharded walk's optimizer state per parameter byte (Adam: 2, SGD: 1), plus what
    /// does not shard (Adam's step counts).
    pub state_per_byte: u128,
    pub state_fixed: u128,
    /// The optimizer step's `foreach` list per parameter byte (Adam: 1, SGD: 0).
    pub step_temp_per_byte: u128,
    /// The per-tensor loop's temporaries instead (`foreach=False`), unsharded bytes of one
    /// parameter element: Adam holds two of one shard at once (the square root and its
    /// quotient), so twice the largest shard; SGD none.
    pub loop_temp: Option<u128>,
    /// One parameter's element as the layers compute with it, for the final norm's gradient.
    pub param_bytes: u128,
    /// How many times wider the sharded parameters, their gradients and the reduce-scatter
    /// are than the gathered ones: 2 under mixed precision (f32 shards gathered in bf16,
    /// gradients reduced in f32), else 1.
    pub master: u128,
    /// What has gradients: everything in bf16 or mixed precision, LoRA's adapters only.
    pub grads: Grads,
    /// The gradient of one layer's output (what the backward holds between layers).
    pub act_grad: u128,
    /// A layer's backward temporaries other than its weights' gradients.
    pub layer_act_grads: u128,
    /// A layer's backward temporaries, its largest weight gradient included.
    pub layer_backward: u128,
    /// What the forward leaves for the backward when it starts: everything saved, the loss.
    pub backward_start: u128,
    /// What one layer's forward saves for its backward.
    pub layer_saved: u128,
    /// Layers gathered at the output head's backward point: the last one and the next in
    /// flight, or (under autocast, whose peak there is the cast of the head's gradient, a step
    /// earlier in FSDP2's prefetch) only the last one's all-gather.
    pub head_gathered: u128,
    /// Gradient accumulation: after a step's first micro-batch every sharded gradient is
    /// there from the forward on, each micro-batch's reduced into it.
    pub accumulating: bool,
}

/// The gradients' sizes unsharded, by where they live.
pub(super) struct Grads {
    /// Every trained parameter's.
    pub all: u128,
    /// The root module's (embeddings, final norm, an untied head).
    pub root: u128,
    /// One layer's.
    pub layer: u128,
    /// An untied output head's (unsharded until the root's reduce-scatter).
    pub head: u128,
    /// The final norm's.
    pub norm: u128,
}

/// A rank's shard of `bytes`: an even split, plus at most `world − 1` padding rows a tensor
/// where a first dimension of the model does not divide by `world`.
fn shard(s: &Shape, world: u128, bytes: u128, param_bytes: u128) -> u128 {
    let even = bytes.div_ceil(world);
    let q_dim = s.heads * s.head_dim;
    let kv_dim = s.kv_heads * s.head_dim;
    let rows = [s.hidden, s.intermediate, s.vocab, q_dim, kv_dim];
    if rows.iter().all(|r| r % world == 0) {
        return even;
    }
    let widest = s.hidden.max(s.intermediate);
    even + s.param_tensors * (world - 1) * widest * param_bytes
}

/// The elements of the largest trained tensor's shard on one of `world` ranks (a stack of
/// experts splits by experts, anything else by rows), `lora`'s adapters where they alone are
/// trained; `None` where the model's tensors are not listed.
pub(super) fn largest_shard(s: &Shape, world: u128, lora: Option<Lora>) -> Option<u128> {
    let world = world.max(1);
    if let Some(l) = lora {
        let r = u128::from(l.rank);
        // PEFT's A is rank × in, its B out × rank.
        return l
            .targets
            .each(s)
            .iter()
            .filter(|(on, _, _)| *on)
            .map(|&(_, i, o)| (r.div_ceil(world) * i).max(o.div_ceil(world) * r))
            .max();
    }
    s.tensors()?
        .iter()
        .map(|t| match (t.count, t.cols) {
            (1, 0) => t.rows.div_ceil(world),
            (1, c) => t.rows.div_ceil(world) * c,
            (n, c) => n.div_ceil(world) * t.rows * c.max(1),
        })
        .max()
}

/// Each point of the step on one rank.
pub(super) fn sharded_points(s: &Shape, f: Fsdp, z: &Sizes, points: &[Tally]) -> Vec<Tally> {
    let world = u128::from(f.world.max(1));
    let m = z.master;
    let own = |bytes: u128| m * shard(s, world, bytes, z.param_bytes);
    let params = own(z.params);
    let g = &z.grads;
    let trained = own(g.all);
    let state = z.state_per_byte * trained + z.state_fixed;
    let step_temp = z
        .loop_temp
        .map_or(z.step_temp_per_byte * trained, |t| m * t);
    let layers_done = own(g.all - g.root);
    // A layer's unsharded gradients, and its reduce-scatter buffer (f32 under mixed precision).
    let layer_grads = g.layer + m * g.layer;
    let norm_grad = g.norm;
    // Every gradient but the first layer's and the root's sharded, the first layer's and its
    // reduce-scatter buffer whole, the root's whole.
    let first_layer_grads = own(g.all - g.root - g.layer) + layer_grads + g.head + norm_grad;
    // Under accumulation, the sharded gradients a point does not count yet.
    let accumulated = |counted: u128| {
        if z.accumulating {
            trained - counted
        } else {
            0
        }
    };
    let mut out: Vec<Tally> = points
        .iter()
        .enumerate()
        .map(|(i, pt)| {
            // What is unsharded and what gradients exist, by the unsharded walk's points:
            // the forward at the loss, the loss's backward, the head's, the first layer's,
            // the embedding's, the optimizer step.
            let t = pt.temporaries;
            // Last, the sharded gradients each point counts already.
            let (unsharded, gradients, temporaries, step_temp, sharded) =
                match (i, f.reshard_after_forward) {
                    // The forward's end: the root gathered, the last layer's all-gather buffer
                    // still held.
                    (0, true) => (z.root + z.layer, 0, t, 0, 0),
                    // The loss's backward: the last layer's all-gather (prefetched) in flight.
                    (1, true) => (z.root + z.layer, pt.gradients, t, 0, 0),
                    // The head's backward: the last layer gathered, the next one's in flight.
                    (2, true) => (z.root + z.head_gathered * z.layer, pt.gradients, t, 0, 0),
                    // Without resharding every layer stays gathered; one all-gather buffer is
                    // still held at the forward's end.
                    (0, false) => (z.params + z.layer, 0, t, 0, 0),
                    (1 | 2, false) => (z.params, pt.gradients, t, 0, 0),
                    // The first layer's backward, at its end: the other layers' sharded
                    // gradients, its own unsharded ones, the last reduce-scatter buffer, the root's
                    // unsharded ones, the activations' gradients.
                    (3, _) => (
                        z.root + z.layer,
                        first_layer_grads,
                        z.layer_act_grads,
                        0,
                        own(g.all - g.root - g.layer),
                    ),
                    (4, _) => (z.root, layers_done + g.layer, t + norm_grad, 0, layers_done),
                    _ => (0, trained, t, step_temp, trained),
                };
            let gradients = gradients + accumulated(sharded);
            Tally {
                phase: pt.phase,
                parameters: params + unsharded,
                gradients,
                optimizer: state + step_temp,
                // FSDPMemTracker finds one more f32 scalar at the forward's end.
                activations: pt.activations + if i == 0 { 4 } else { 0 },
                temporaries,
            }
        })
        .collect();
    if let (Some(head), false) = (points.get(2), s.tied) {
        let layer_shard = own(g.layer);
        let shards = layer_shard + accumulated(layer_shard);
        out.extend(untied_head(s, f, z, head, (params, state, shards)));
    }
    if let Some(pt) = points.get(3).filter(|_| s.layers > 1) {
        // Under accumulation every sharded gradient is there.
        let sharded = own(g.all - g.root - 2 * g.layer);
        out.push(second_layer_end(
            z,
            pt,
            (params, state),
            sharded + accumulated(sharded),
        ));
    }
    // The first start counts no gradient yet, the second the first layer's sharded ones.
    let counted = [0, own(g.all - g.root - g.layer)].map(accumulated);
    out.extend(backward_starts(
        f,
        z,
        points,
        (params, state, first_layer_grads),
        counted,
    ));
    out
}

/// Past the last layer's backward, an untied head's gradient is still unsharded beside the next
/// layer's gathered parameters, the one after in flight, the last layer's reduce-scatter buffer
/// and the sharded gradients (`shards`): bounded by the head's backward's activations and a
/// layer's backward temporaries (measured 0.4 % under this for Mistral-7B). Then the next
/// layer's backward at its end: the same held, the last layer's activations released, its
/// whole weight gradients made unsharded beside its input's (experts' weights outweigh what
/// their backward holds at once: DeepSeek-V2-Lite over 8 ranks).
fn untied_head(
    s: &Shape,
    f: Fsdp,
    z: &Sizes,
    head: &Tally,
    (params, state, shards): (u128, u128, u128),
) -> [Tally; 2] {
    let g = &z.grads;
    // The next layer gathered and the one after it in flight, where there are such.
    let gathered = (s.layers.saturating_sub(1)).min(2);
    // Without resharding after the forward every layer is still gathered but the last.
    let last = if f.reshard_after_forward {
        z.root + gathered * z.layer
    } else {
        z.params - z.layer
    };
    let past_last = Tally {
        phase: head.phase,
        parameters: params + last,
        gradients: g.head + g.norm + z.master * g.layer + shards,
        optimizer: state,
        activations: head.activations,
        temporaries: z.layer_backward,
    };
    let next_end = Tally {
        activations: past_last.activations.saturating_sub(z.layer_saved),
        temporaries: g.layer + z.act_grad,
        ..past_last
    };
    [next_end, past_last]
}

/// The second layer's backward at its end: the first layer's parameters prefetched beside its
/// own (and the root's), its gradients unsharded beside the third layer's reduce-scatter
/// buffer and the other layers' `sharded` ones, the head's unsharded; the first layer's saved
/// activations still whole beside what the second leaves (bounded by one layer's).
fn second_layer_end(
    z: &Sizes,
    first: &Tally,
    (params, state): (u128, u128),
    sharded: u128,
) -> Tally {
    let g = &z.grads;
    Tally {
        phase: first.phase,
        parameters: params + z.root + 2 * z.layer,
        gradients: sharded + g.layer + z.master * g.layer + g.head + g.norm,
        optimizer: state,
        activations: first.activations + z.layer_saved,
        temporaries: z.layer_act_grads,
    }
}

/// Two moments a layer's backward starts at, on one rank holding `params` and `state`: the
/// whole backward's, where the root, resharded after its forward, is gathered again, its
/// all-gather buffer not yet freed beside the parameters copied out of it (nothing else yet);
/// and the first layer's, its parameters gathered and the all-gather buffer not yet freed,
/// beside the last reduce-scatter buffer and `first_layer_grads`, only the output's gradient
/// yet, the loss and its backward's scalar still held. Under gradient accumulation each holds
/// the sharded gradients of `accumulated` more.
fn backward_starts(
    f: Fsdp,
    z: &Sizes,
    points: &[Tally],
    (params, state, first_layer_grads): (u128, u128, u128),
    accumulated: [u128; 2],
) -> Vec<Tally> {
    let mut out = Vec::new();
    if f.reshard_after_forward {
        out.push(Tally {
            phase: Phase::Backward,
            parameters: params + 2 * z.root,
            gradients: accumulated[0],
            optimizer: state,
            activations: z.backward_start,
            temporaries: 0,
        });
    }
    if let Some(pt) = points.get(3) {
        out.push(Tally {
            phase: pt.phase,
            parameters: params + z.root + z.layer,
            gradients: first_layer_grads + accumulated[1],
            optimizer: state,
            activations: pt.activations + 8,
            temporaries: z.act_grad,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{largest_shard, Shape};

    // FSDP2's per-tensor optimizer loop (`foreach=False`) holds twice the largest bf16 shard
    // beside the state: the second step's optimizer peak measured apart under FSDPMemTracker
    // (its running peak reset before `opt.step()`), less the shards, gradients and Adam's
    // state. (The first step's is not the real one: DTensor's sharding propagation then runs
    // each op on fake tensors of the unsharded shape, which the tracker counts.)
    #[test]
    fn the_per_tensor_loop_holds_two_of_the_largest_shard() {
        for (name, world, measured) in [
            ("llama-3.2-1b", 4, 262_668_288),
            ("qwen2.5-0.5b", 2, 272_269_312),
            ("qwen2.5-0.5b", 4, 136_134_656),
            ("qwen2.5-0.5b", 8, 68_067_328),
            // 1,536 bytes more measured: one norm's shard.
            ("phi-3-mini", 4, 98_502_144 - 1_536),
        ] {
            let arch = crate::model::find_model(name).expect(name).arch;
            let s = Shape::of(&arch).expect(name);
            let shard = largest_shard(&s, world, None).expect(name);
            assert_eq!(2 * shard * 2, measured, "{name} over {world}");
        }
    }
}
