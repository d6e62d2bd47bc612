//! LoRA as PEFT applies it (peft 0.21): the base model frozen in bf16, an f32 adapter pair
//! (`lora_A`: rank × in, `lora_B`: out × rank) beside each targeted projection. What autograd
//! saves follows from what requires a gradient: the frozen projections save nothing, each
//! adapter saves its own f32 copy of its input and `lora_A`'s f32 output, and a module before
//! the first adapter (the frozen embedding, the first norm) saves nothing at all.

use serde::Serialize;

use super::Shape;

/// Which projections of each decoder layer carry an adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LoraTargets {
    /// `q_proj`.
    pub q: bool,
    /// `k_proj`.
    pub k: bool,
    /// `v_proj`.
    pub v: bool,
    /// `o_proj`.
    pub o: bool,
    /// `gate_proj`.
    pub gate: bool,
    /// `up_proj`.
    pub up: bool,
    /// `down_proj`.
    pub down: bool,
}

impl LoraTargets {
    /// PEFT's `all-linear`: every projection of the layers (not the output head).
    pub const ALL_LINEAR: LoraTargets = LoraTargets {
        q: true,
        k: true,
        v: true,
        o: true,
        gate: true,
        up: true,
        down: true,
    };
    /// The attention projections only (q, k, v, o).
    pub const ATTENTION: LoraTargets = LoraTargets {
        q: true,
        k: true,
        v: true,
        o: true,
        gate: false,
        up: false,
        down: false,
    };

    /// Each projection: whether targeted, its input and output widths.
    fn each(self, s: &Shape) -> [(bool, u128, u128); 7] {
        let (h, i) = (s.hidden, s.intermediate);
        let (q, kv) = (s.heads * s.head_dim, s.kv_heads * s.head_dim);
        [
            (self.q, h, q),
            (self.k, h, kv),
            (self.v, h, kv),
            (self.o, q, h),
            (self.gate, h, i),
            (self.up, h, i),
            (self.down, i, h),
        ]
    }
}

/// A LoRA run: the adapters' rank and where they sit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Lora {
    /// `r`.
    pub rank: u64,
    /// The targeted projections.
    pub targets: LoraTargets,
}

/// The adapters' parameters over all layers, and their tensors (two an adapter).
pub(super) fn adapter_params(s: &Shape, lora: Lora) -> (u128, u128) {
    let r = u128::from(lora.rank);
    let (params, tensors) = lora
        .targets
        .each(s)
        .iter()
        .filter(|(on, _, _)| *on)
        .fold((0, 0), |(p, t), (_, i, o)| (p + r * (i + o), t + 2));
    (s.layers * params, s.layers * tensors)
}

/// What one layer saves per token, bf16 base and f32 adapters, when its input does or does not
/// require a gradient; and whether its output does.
pub(super) fn layer_per_token(s: &Shape, lora: Lora, input_grad: bool) -> (u128, bool) {
    const ACT: u128 = 2;
    let r = u128::from(lora.rank);
    let t = lora.targets;
    let (h, i) = (s.hidden, s.intermediate);
    let (q, kv) = (s.heads * s.head_dim, s.kv_heads * s.head_dim);
    let adapter = |on: bool, input: u128| if on { 4 * input + 4 * r } else { 0 };
    // A frozen-weight RMSNorm saves its f32 input and rsqrt, only while the input needs a
    // gradient.
    let norm = |grad: bool| if grad { 4 * h + 4 } else { 0 };
    let mut bytes = norm(input_grad) + adapter(t.q, h) + adapter(t.k, h) + adapter(t.v, h);
    // Qwen3's per-head norms (frozen) save their f32 input and rsqrt where it needs a gradient.
    if s.qk_norm {
        if input_grad || t.q {
            bytes += 4 * q + 4 * s.heads;
        }
        if input_grad || t.k {
            bytes += 4 * kv + 4 * s.kv_heads;
        }
    }
    let qkv_grad = input_grad || t.q || t.k || t.v;
    if qkv_grad {
        bytes += ACT * (q + 2 * kv) + 4 * s.heads + ACT * q;
    }
    bytes += adapter(t.o, q);
    let grad = input_grad || qkv_grad || t.o;
    bytes += norm(grad) + adapter(t.gate, h) + adapter(t.up, h);
    let gate_grad = grad || t.gate;
    let up_grad = grad || t.up;
    // SiLU saves the gate's output; the product saves each side the other's gradient needs.
    bytes += if gate_grad { 2 * ACT * i } else { 0 } + if up_grad { ACT * i } else { 0 };
    bytes += adapter(t.down, i);
    (bytes, grad || gate_grad || up_grad || t.down)
}
