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
//! blocks), [`recurrent`] (the state-space and DeltaNet mixers), [`deepseek4`] with
//! [`deepseek4_attention`] (DeepSeek-V4's own layer loop and attention), and [`glm5_next`]
//! with [`glm5_next_attention`] (GLM-5-next's, whose streams reuse DeepSeek-V4's mixers).

mod attention;
mod builder;
mod clip;
mod clip_gemma4;
mod clip_qwen;
mod clip_qwen3;
mod clip_vit;
mod deepseek4;
mod deepseek4_attention;
mod encoder;
mod ffn;
mod gallocr;
mod gemma4;
mod gemma4_assistant;
mod glm5_next;
mod glm5_next_attention;
mod graph;
mod inputs;
mod kda;
mod kimi_k3;
mod layer;
mod metal;
mod metal_fusion;
mod metal_reorder;
mod msa;
mod recurrent;
mod reorder;
mod sched;
mod shaped;
mod sparse;

use crate::model::layers::{LayerMove, LayerWeights};
use builder::*;
use ffn::*;
use gallocr::*;
use graph::*;
use inputs::CacheInputs;

pub(crate) use clip::clip_compute_buffer;
pub(crate) use graph::BufferRules;
use recurrent::*;

use crate::model::ModelArch;
use crate::model::Precision;

/// What every step of the replay reads: the architecture and its builder's flags, the batch's
/// tensor sizes, and the graph inputs made once before the layers.
#[derive(Clone, Copy)]
struct Ctx<'a> {
    arch: &'a ModelArch,
    b: Builder,
    /// Squared-ReLU feed-forward blocks and experts without a gate (Nemotron-H).
    plain: bool,
    tokens: u64,
    /// The KV cache's streams (a sequence each, or one): each stream's `tokens / streams`
    /// rows attend to its cells alone.
    streams: u64,
    /// Rows the last layer gathers for the output (`tokens` unless fewer are reserved).
    outputs: u64,
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
    /// Gemma 4's per-layer inputs, every layer's made contiguous layer by layer (E2B, E4B).
    per_layer: Option<usize>,
}

impl<'a> Ctx<'a> {
    /// Bytes of `n` f32 values per token.
    fn width(&self, n: u64) -> Option<u64> {
        n.checked_mul(self.tokens)?.checked_mul(4)
    }

    /// The sizes after the last layer gathers its output rows: every per-token tensor of
    /// `outputs` rows.
    fn gathered(&self) -> Option<Ctx<'a>> {
        if self.outputs == self.tokens {
            return Some(*self);
        }
        let rows = Ctx {
            tokens: self.outputs,
            ..*self
        };
        let arch = self.arch;
        Some(Ctx {
            model: rows.width(arch.hidden_size)?,
            query: rows.width(self.q_dim)?,
            kv: rows.width(self.kv_dim)?,
            ffn: rows.width(arch.intermediate_size)?,
            logits: rows.width(arch.vocab_size)?,
            moe: match &arch.moe {
                None => None,
                Some(m) => Some(routed(arch, m, &|n| rows.width(n))?),
            },
            ..rows
        })
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
    /// MiniMax-M3's sparse-attention inputs, made by its first sparse layer.
    msa: Option<msa::MsaInputs>,
    /// The last indexer's top-k and its bytes, which GLM-5.2's shared layers reuse.
    top_k: Option<(usize, u64)>,
}

/// llama.cpp's CPU compute buffer for `arch`'s prompt graph of `tokens` tokens (every one an
/// output) over `kv_cells` cached cells (`swa_cells` in sliding-window layers), with or without
/// flash attention; `None` where the architecture's graph is not modelled here, or for shapes
/// no device could hold.
#[cfg(test)]
pub(crate) fn compute_buffer(
    arch: &ModelArch,
    tokens: u64,
    kv_cells: u64,
    swa_cells: u64,
    flash_attention: bool,
    kv_type: &Precision,
) -> Option<u64> {
    compute_buffer_of(&Batch {
        arch,
        tokens,
        kv_cells,
        swa_cells,
        flash_attention,
        kv_type,
        seqs: 1,
        parallel: 1,
        outputs: None,
    })
}

/// [`compute_buffer`] for one micro-batch as one value.
pub(crate) fn compute_buffer_of(b: &Batch<'_>) -> Option<u64> {
    Some(reserve(&whole(Shape::from_batch(b)?)?, BufferRules::CPU))
}

/// One micro-batch of the prompt graph: what [`compute_buffer`] takes, as one value.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Batch<'a> {
    pub arch: &'a ModelArch,
    pub tokens: u64,
    pub kv_cells: u64,
    pub swa_cells: u64,
    pub flash_attention: bool,
    pub kv_type: &'a Precision,
    /// Sequences the graph is reserved for (llama.cpp's `n_seq_max`): an encoder pools each;
    /// the KV streams of a decoder (one under `--kv-unified`).
    pub seqs: u64,
    /// llama-server's `-np`, whatever the streams: the sequences of llama.cpp's reserve
    /// micro-batch (`n_seq_max`), which DeepSeek-V4 keeps a cache stream each of even under
    /// `--kv-unified`, and GLM-5-next a recurrent state each.
    pub parallel: u64,
    /// Rows of logits (`n_outputs_max`; `None`: every token): the last layer gathers them.
    pub outputs: Option<u64>,
}

/// Where llama.cpp runs each part: `layer_devices[l]` for layer `l` and, last, the output layer
/// (`None`: the CPU), over `devices` devices; `pipeline` for its pipeline parallelism (every
/// layer on several devices), whose scheduler keeps four copies of every input.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Placed<'a> {
    pub layer_devices: &'a [Option<usize>],
    pub devices: usize,
    pub pipeline: bool,
    /// Each layer's feed-forward weights moved off its device (`-ot`, `--n-cpu-moe`).
    pub moves: &'a [LayerMove],
    /// How the local devices' buffer type places tensors, and which ops they run.
    pub device_rules: BufferRules,
    /// The first devices, reached through ggml-rpc (llama.cpp orders them before the local
    /// ones): each one's remote backend's rules, which it follows as
    /// [`BufferRules::over_rpc`] says.
    pub rpc_rules: &'a [BufferRules],
    /// How the host's compute buffer places them (the CPU's, or the first device's pinned
    /// host buffer type).
    pub host_rules: BufferRules,
    /// The local devices run ops on the host's weights, copying them (`offload_op`): the
    /// first local device takes them.
    pub op_offload: bool,
    /// The devices reorder each split before allocating it (ggml-vulkan's default).
    pub reorders: bool,
    /// The weights' bytes (what an offloaded op copies).
    pub weights: Option<&'a LayerWeights>,
}

/// The compute buffers of the host (first) and each device under `placed`, the graph split as
/// [`sched`] splits it. `None` where [`compute_buffer`] is.
pub(crate) fn compute_buffers_placed(b: &Batch<'_>, placed: &Placed<'_>) -> Option<Vec<u64>> {
    let mut g = whole(Shape::from_batch(b)?)?;
    if let Some(w) = placed.weights {
        for t in &mut g.tensors {
            if let Some(x) = t.weight {
                let layer = match t.part {
                    Part::Layer(l) => Some(l),
                    Part::Input | Part::Output => None,
                };
                t.bytes = w.weight_bytes(layer, x.name, x.elements, x.matrix);
                t.row_pad = w.weight_row_padding(layer, x.name);
            }
        }
    }
    let to_backend =
        |d: Option<usize>| d.map_or(sched::HOST, |d| u8::try_from(d + 1).unwrap_or(u8::MAX));
    let device_of = |l: usize| placed.layer_devices.get(l).copied().flatten();
    let backend_of = |p: Part, ffn: Option<(FfnClass, bool)>| match p {
        Part::Input => sched::HOST,
        Part::Layer(l) => {
            let moved = LayerMove::of(placed.moves, l);
            match ffn {
                Some((class, experts)) if moved.what.moves(class, experts) => to_backend(moved.to),
                _ => to_backend(usize::try_from(l).ok().and_then(device_of)),
            }
        }
        Part::Output => to_backend(placed.layer_devices.last().copied().flatten()),
    };
    // Backend ids are bytes: more devices than that are not replayed.
    u8::try_from(placed.devices + 1).ok()?;
    let copies = if placed.pipeline { 4 } else { 1 };
    let rules = std::iter::once(placed.host_rules)
        .chain((0..placed.devices).map(|d| match placed.rpc_rules.get(d) {
            Some(remote) => remote.over_rpc(),
            None => placed.device_rules,
        }))
        .collect();
    let rpc = placed.rpc_rules.len();
    let first_local = u8::try_from(rpc + 1).ok()?;
    let offloads = placed.op_offload && placed.weights.is_some();
    Some(sched::split_buffers(
        &g,
        &sched::Sched {
            backend_of: &backend_of,
            copies,
            rules,
            offload_to: (offloads && rpc < placed.devices).then_some(first_local),
            reorders: placed.reorders,
        },
    ))
}

/// The whole prompt graph, each tensor tagged with the part of the model it was built in.
fn whole(shape: Shape<'_>) -> Option<Graph> {
    let arch = shape.arch;
    if let Some(e) = arch.encoder {
        return encoder::whole(shape, e, shape.seqs);
    }
    if let Some(v4) = &arch.deepseek_v4 {
        return deepseek4::whole(shape, v4);
    }
    if let Some(g5n) = &arch.glm5_next {
        return glm5_next::whole(shape, g5n);
    }
    if let Some(backbone) = arch.edge.map(|e| e.backbone).filter(|&b| b > 0) {
        return gemma4_assistant::whole(shape, backbone);
    }
    let mut g = Graph::default();
    let (c, embd) = layer::inputs(&mut g, shape)?;
    let mut lazy = Lazy::default();
    let mut inp = embd;
    // Gemma's embeddings are scaled by √width, Granite's by its embedding multiplier, in the
    // graph ahead of the first layer's recurrent states.
    // Gemma 4's per-layer inputs go in the graph first, the scale where the first layer
    // reads it.
    let per_layer = arch.edge.is_some_and(|e| e.per_layer_input > 0);
    if c.b.gemma || arch.granite_scales.embedding {
        inp = g.op(Kind::InPlace, c.model, MODEL, &[inp]);
        g.tag(inp, Op::Scale);
        if !per_layer {
            g.expand(inp);
        }
    }
    let c = Ctx {
        per_layer: gemma4::per_layer_inputs(&c, &mut g, inp)?,
        ..c
    };
    if let Some(k3) = c.b.k3 {
        kimi_k3::layers_and_output(&c, &mut g, &mut lazy, inp, k3)?;
        return Some(g);
    }
    // Gemma 4's full layers are of heads of their own.
    let full_arch = gemma4::full_layers(arch);
    let full = match &full_arch {
        Some(a) => Some(gemma4::full_ctx(&c, a)?),
        None => None,
    };
    for l in 0..arch.num_layers {
        g.part = Part::Layer(l);
        let c = match &full {
            Some(f) if !arch.is_sliding_layer(l) => f,
            _ => &c,
        };
        inp = layer::layer(c, &mut g, &mut lazy, inp, l)?;
    }
    g.part = Part::Output;
    layer::output(&c, &mut g, inp)?;
    Some(g)
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
    seqs: u64,
    parallel: u64,
    /// Rows the last layer gathers (every token unless fewer outputs are reserved).
    outputs: u64,
}

impl<'a> Shape<'a> {
    /// The token-path graph of `b`'s micro-batch, or `None` where the architecture is not
    /// modelled or no device could hold it (the estimate's own plausibility checks refuse those
    /// first, so this is never the figure a user sees).
    fn from_batch(b: &Batch<'a>) -> Option<Self> {
        let arch = b.arch;
        let mut builder = modelled(arch)?;
        if arch.num_layers > 4096 || b.tokens == 0 {
            return None;
        }
        // MiniMax-M3's sparse attention anchors its blocks to a stream's cells: several
        // sequences in one cache (`--kv-unified`) make llama.cpp attend densely.
        if b.seqs == 1 && b.parallel > 1 {
            builder.msa = None;
        }
        Some(Shape {
            arch,
            b: builder,
            tokens: b.tokens,
            kv_cells: b.kv_cells,
            swa_cells: b.swa_cells,
            flash_attention: b.flash_attention,
            kv_type: b.kv_type,
            seqs: b.seqs,
            parallel: b.parallel.max(b.seqs).max(1),
            outputs: b.outputs.map_or(b.tokens, |o| o.clamp(1, b.tokens)),
        })
    }
}

/// A norm over `x` as the architecture's builder makes it: ggml computes RMSNorm in place where
/// it can, LayerNorm (`ggml_norm`) never; then the weight, and (LayerNorm in Falcon and
/// GPT-NeoX) the bias.
fn norm(
    c: &Ctx<'_>,
    g: &mut Graph,
    x: usize,
    (bytes, layout): (u64, u64),
    (names, n): (NormNames, u64),
) -> usize {
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
    let t = g.op(kind, bytes, layout, &[x]);
    g.tag(
        t,
        if kind == Kind::InPlace {
            Op::RmsNorm
        } else {
            Op::Norm
        },
    );
    let w = g.vector(names.0, n);
    let t = g.op(Kind::InPlace, bytes, layout, &[t, w]);
    if !(falcon || neox) {
        return t;
    }
    let b = g.vector(names.1, n);
    g.op(Kind::InPlace, bytes, layout, &[t, b])
}

/// A norm's weight and bias names.
type NormNames = (&'static str, &'static str);

const ATTN_NORM: NormNames = ("attn_norm.weight", "attn_norm.bias");
const ATTN_NORM_2: NormNames = ("attn_norm_2.weight", "attn_norm_2.bias");
const FFN_NORM: NormNames = ("ffn_norm.weight", "ffn_norm.bias");
const POST_ATTN_NORM: NormNames = ("post_attention_norm.weight", "post_attention_norm.bias");
const POST_FFN_NORM: NormNames = ("post_ffw_norm.weight", "post_ffw_norm.bias");
const OUTPUT_NORM: NormNames = ("output_norm.weight", "output_norm.bias");
const Q_NORM: NormNames = ("attn_q_norm.weight", "attn_q_norm.bias");
const K_NORM: NormNames = ("attn_k_norm.weight", "attn_k_norm.bias");
const Q_A_NORM: NormNames = ("attn_q_a_norm.weight", "attn_q_a_norm.bias");
const KV_A_NORM: NormNames = ("attn_kv_a_norm.weight", "attn_kv_a_norm.bias");

#[cfg(test)]
mod tests;
