//! LoRA as PEFT applies it (peft 0.21): the base model frozen in bf16, an f32 adapter pair
//! (`lora_A`: rank × in, `lora_B`: out × rank) beside each targeted projection. What autograd
//! saves follows from what requires a gradient: the frozen projections save nothing, each
//! adapter saves its own f32 copy of its input and `lora_A`'s f32 output, and a module before
//! the first adapter (the frozen embedding, the first norm) saves nothing at all.
//!
//! QLoRA (bitsandbytes 0.50, PEFT's `prepare_model_for_kbit_training`) keeps the layers'
//! projections in NF4 and every other weight in f32, so the residual stream, the attention and
//! the MLP run in f32: each projection casts its input to bf16 for bitsandbytes' `MatMul4Bit`,
//! which saves nothing of it, and casts its output back; the adapters read the f32 input
//! itself, which is saved once however many adapters read it.

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
    /// PEFT's default for Llama, Mistral and Qwen: the query and value projections.
    pub const QUERY_VALUE: LoraTargets = LoraTargets {
        q: true,
        k: false,
        v: true,
        o: false,
        gate: false,
        up: false,
        down: false,
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
    pub(super) fn each(self, s: &Shape) -> [(bool, u128, u128); 7] {
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
    pub rank: u32,
    /// The targeted projections.
    pub targets: LoraTargets,
}

/// The adapters' parameters over all layers, and their tensors (two an adapter).
pub(crate) fn adapter_params(s: &Shape, lora: Lora) -> (u128, u128) {
    let r = u128::from(lora.rank);
    let (params, tensors) = lora
        .targets
        .each(s)
        .iter()
        .filter(|(on, _, _)| *on)
        .fold((0, 0), |(p, t), (_, i, o)| (p + r * (i + o), t + 2));
    (s.layers * params, s.layers * tensors)
}

/// bitsandbytes' NF4 storage of a weight of `n` elements (`quantize_4bit`, blocks of 64, double
/// quantization): the packed weight (two values a byte); and its quantization state: each
/// block's absmax as a uint8, an f32 scale for every 256 blocks, the 16-entry NF4 code, the
/// 256-entry code of the nested quantization and its f32 offset (the reference holds one code
/// of each a weight).
fn nf4_bytes(n: u128) -> (u128, u128) {
    let blocks = n.div_ceil(64);
    (
        n.div_ceil(2),
        blocks + 4 * blocks.div_ceil(256) + 4 * 16 + 4 * 256 + 4,
    )
}

/// The frozen model under QLoRA: its parameters' bytes (the layers' projections packed in NF4,
/// everything else f32, but biases, which bitsandbytes' forward casts to bf16 for good), and
/// the quantization states' bytes.
pub(super) fn qlora_frozen(s: &Shape) -> (u128, u128) {
    let linears = LoraTargets::ALL_LINEAR.each(s);
    let (packed, state) = linears.iter().fold((0, 0), |(p, st), &(_, i, o)| {
        let (a, b) = nf4_bytes(i * o);
        (p + a, st + b)
    });
    let quantized: u128 = linears.iter().map(|&(_, i, o)| i * o).sum();
    let biases = quantized_biases(s);
    let rest = s.params - s.layers * (quantized + biases);
    (
        4 * rest + s.layers * (packed + 2 * biases),
        s.layers * state,
    )
}

/// One layer's bias elements on its NF4 projections. bitsandbytes' `Linear4bit` turns its
/// bias to the compute dtype (bf16) in place at its first forward, which is what the walk
/// counts; FSDP2 shards and gathers the bias as loaded (f32), and the bf16 copy the forward
/// makes outlives the gathered parameter.
pub(super) fn quantized_biases(s: &Shape) -> u128 {
    let (q, kv) = (s.heads * s.head_dim, s.kv_heads * s.head_dim);
    let qkv = if s.qkv_bias { q + 2 * kv } else { 0 };
    qkv + if s.o_bias { s.hidden } else { 0 }
}

/// How a layer's adapters meet the stream they read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stream {
    /// f32 adapters on a bf16 model (PEFT's default): each adapter saves its own f32 copy of
    /// its input and `lora_A`'s f32 output.
    F32Copies,
    /// Adapters of the stream's own dtype (`act` bytes: QLoRA's f32 stream, bf16 adapters on a
    /// bf16 model under FSDP2): the input saved once however many adapters read it, and each
    /// adapter's `lora_A` output.
    Shared { act: u128 },
}

/// What one layer saves per token, the base frozen and the adapters trained, when its input
/// does or does not require a gradient; and whether its output does.
pub(super) fn layer_per_token(
    s: &Shape,
    lora: Lora,
    input_grad: bool,
    stream: Stream,
) -> (u128, bool) {
    let act: u128 = match stream {
        Stream::F32Copies => 2,
        Stream::Shared { act } => act,
    };
    let r = u128::from(lora.rank);
    let t = lora.targets;
    let (h, i) = (s.hidden, s.intermediate);
    let (q, kv) = (s.heads * s.head_dim, s.kv_heads * s.head_dim);
    // Adapters reading one input: the input (once, or an f32 copy each) and each adapter's
    // `lora_A` output.
    let shared = |ons: &[bool], input: u128| {
        let n = ons.iter().filter(|&&on| on).count() as u128;
        match (n, stream) {
            (0, _) => 0,
            (_, Stream::F32Copies) => n * (4 * input + 4 * r),
            (_, Stream::Shared { act }) => act * input + n * act * r,
        }
    };
    // A frozen-weight RMSNorm saves its f32 input and rsqrt, only while the input needs a
    // gradient.
    let norm = |grad: bool| if grad { 4 * h + 4 } else { 0 };
    let mut bytes = norm(input_grad) + shared(&[t.q, t.k, t.v], h);
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
        bytes += act * (q + 2 * kv) + 4 * s.heads + act * q;
    }
    // SDPA's output is `o_proj`'s input: where SDPA saves it and the adapter reads it as it
    // is, it is not saved again.
    bytes += match (stream, qkv_grad, t.o) {
        (_, _, false) => 0,
        (Stream::Shared { act }, true, true) => act * r,
        _ => shared(&[true], q),
    };
    let grad = input_grad || qkv_grad || t.o;
    bytes += norm(grad) + shared(&[t.gate, t.up], h);
    let gate_grad = grad || t.gate;
    let up_grad = grad || t.up;
    // SiLU saves the gate's output; the product saves each side the other's gradient needs.
    bytes += if gate_grad { 2 * act * i } else { 0 } + if up_grad { act * i } else { 0 };
    // The product is saved by nothing but `down_proj`'s adapter: its f32 copy, or itself.
    bytes += shared(&[t.down], i);
    (bytes, grad || gate_grad || up_grad || t.down)
}
