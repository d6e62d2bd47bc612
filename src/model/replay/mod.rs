//! llama.cpp's compute buffer by replay: the prompt graph llama.cpp reserves, built node by node
//! as its graph builder does, and placed by a model of ggml's graph allocator (`ggml-alloc.c`:
//! inputs first, tensors in graph order, parents freed after their last consumer, in-place
//! reuse of a sole consumer's parent, best fit over the free blocks with the last block
//! growing the buffer). The buffer is the highest offset any tensor reaches.
//!
//! Where llama.cpp's graph for an architecture is modelled here, the figure is llama.cpp's own
//! to the byte (CPU backend, 32-byte alignment: `tests/fixtures/llamacpp/`); elsewhere
//! [`compute_buffer`] returns `None` and the estimate falls back to its stage formulas.
//!
//! The rooms: [`graph`] (the graph and the allocator), [`builder`] (which builder an
//! architecture runs), [`layer`] (one decoder layer, and the graph's inputs and output),
//! [`attention`] (grouped-query and latent attention), [`ffn`] (dense and routed feed-forward
//! blocks) and [`recurrent`] (the state-space and DeltaNet mixers).

mod attention;
mod builder;
mod ffn;
mod graph;
mod layer;
mod recurrent;
mod sched;

use attention::*;
use builder::*;
use ffn::*;
use graph::*;
use recurrent::*;

use super::arch::ModelArch;
use super::dtype::Precision;

/// What every step of the replay reads: the architecture and its builder's flags, the batch's
/// tensor sizes, and the graph inputs made once before the layers.
struct Ctx<'a> {
    arch: &'a ModelArch,
    b: Builder,
    /// Squared-ReLU feed-forward blocks and experts without a gate (Nemotron-H).
    plain: bool,
    tokens: u64,
    flash_attention: bool,
    kv_type: &'a Precision,
    kv_cells: u64,
    q_dim: u64,
    kv_dim: u64,
    /// Bytes of one f32 row per token of: the model width, the query, K or V, the MLP, the
    /// vocabulary.
    model: u64,
    query: u64,
    kv: u64,
    ffn: u64,
    logits: u64,
    /// Bytes of one i32 per token.
    ids: u64,
    pos: usize,
    out_ids: usize,
    /// The full and the sliding-window cache's inputs.
    full: CacheInputs,
    swa: CacheInputs,
    state_inputs: Option<StateInputs>,
    moe: Option<Routed>,
}

impl Ctx<'_> {
    /// Bytes of `n` f32 values per token.
    fn width(&self, n: u64) -> Option<u64> {
        n.checked_mul(self.tokens)?.checked_mul(4)
    }
}

/// Inputs the layers make on first use.
#[derive(Default)]
struct Lazy {
    /// Llama 4's per-token attention temperature.
    attn_scale: Option<usize>,
    /// The transposed V cache's per-element indices when they are wider than a grouped V
    /// (DeepSeek's unsplit attn_kv_b caches every head's V).
    full_v_idxs: Option<usize>,
}

/// llama.cpp's CPU compute buffer for `arch`'s prompt graph of `tokens` tokens (every one an
/// output) over `kv_cells` cached cells (`swa_cells` in sliding-window layers), with or without
/// flash attention; `None` where the architecture's graph is not modelled here, or for shapes
/// no device could hold.
pub(crate) fn compute_buffer(
    arch: &ModelArch,
    tokens: u64,
    kv_cells: u64,
    swa_cells: u64,
    flash_attention: bool,
    kv_type: &Precision,
) -> Option<u64> {
    let shape = Shape::of(arch, tokens, kv_cells, swa_cells, flash_attention, kv_type)?;
    Some(reserve(&whole(shape)?))
}

/// The compute buffers of llama.cpp's scheduler when layers from `first_offloaded` on and the
/// output layer run on one device, the rest and the input layer on the CPU (`-ngl`): the
/// host's and the device's, the graph split as [`sched`] splits it. `None` where
/// [`compute_buffer`] is.
pub(crate) fn compute_buffers_offloaded(
    arch: &ModelArch,
    tokens: u64,
    kv_cells: u64,
    swa_cells: u64,
    flash_attention: bool,
    kv_type: &Precision,
    first_offloaded: u64,
) -> Option<Buffers> {
    let shape = Shape::of(arch, tokens, kv_cells, swa_cells, flash_attention, kv_type)?;
    let g = whole(shape)?;
    if first_offloaded > arch.num_layers {
        return Some(Buffers {
            host: reserve(&g),
            device: 0,
        });
    }
    let on_device = |p: Part| match p {
        Part::Input => false,
        Part::Layer(l) => l >= first_offloaded,
        Part::Output => true,
    };
    let (host, device) = sched::split_buffers(&g, &on_device);
    Some(Buffers { host, device })
}

/// The whole prompt graph, each tensor tagged with the part of the model it was built in.
fn whole(shape: Shape<'_>) -> Option<Graph> {
    let arch = shape.arch;
    let mut g = Graph::default();
    let (c, embd) = layer::inputs(&mut g, shape)?;
    let mut lazy = Lazy::default();
    let mut inp = embd;
    // Gemma's embeddings are scaled by √width, Granite's by its embedding multiplier.
    if c.b.gemma || arch.granite_scales.embedding {
        inp = g.op(Kind::InPlace, c.model, MODEL, &[inp]);
    }
    for l in 0..arch.num_layers {
        g.part = Part::Layer(l);
        inp = layer::layer(&c, &mut g, &mut lazy, inp, l)?;
    }
    g.part = Part::Output;
    layer::output(&c, &mut g, inp);
    Some(g)
}

/// A host's and one device's compute buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Buffers {
    pub host: u64,
    pub device: u64,
}

/// What the replay is asked for.
#[derive(Clone, Copy)]
struct Shape<'a> {
    arch: &'a ModelArch,
    b: Builder,
    tokens: u64,
    kv_cells: u64,
    swa_cells: u64,
    flash_attention: bool,
    kv_type: &'a Precision,
}

impl<'a> Shape<'a> {
    /// The token-path graph of `arch`, or `None` where it is not modelled or no device could
    /// hold it (the estimate's own plausibility checks refuse those first, so this is never the
    /// figure a user sees).
    fn of(
        arch: &'a ModelArch,
        tokens: u64,
        kv_cells: u64,
        swa_cells: u64,
        flash_attention: bool,
        kv_type: &'a Precision,
    ) -> Option<Self> {
        let b = modelled(arch)?;
        if arch.num_layers > 4096 || tokens == 0 {
            return None;
        }
        Some(Shape {
            arch,
            b,
            tokens,
            kv_cells,
            swa_cells,
            flash_attention,
            kv_type,
        })
    }
}

/// A norm over `x` as the architecture's builder makes it: ggml computes RMSNorm in place where
/// it can, LayerNorm (`ggml_norm`) never; then the weight, and (LayerNorm in Falcon and
/// GPT-NeoX) the bias.
fn norm(c: &Ctx<'_>, g: &mut Graph, x: usize, bytes: u64, layout: u64) -> usize {
    let Builder {
        cohere,
        falcon,
        neox,
        ..
    } = c.b;
    let kind = if cohere || falcon || neox {
        Kind::Fresh
    } else {
        Kind::InPlace
    };
    let n = g.op(kind, bytes, layout, &[x]);
    let w = g.external();
    let n = g.op(Kind::InPlace, bytes, layout, &[n, w]);
    if !(falcon || neox) {
        return n;
    }
    let b = g.external();
    g.op(Kind::InPlace, bytes, layout, &[n, b])
}

#[cfg(test)]
mod tests;
