//! The memory estimate: weights, KV cache, activations, runtime overhead, and (training)
//! gradients and optimizer state.
//!
//! # Formulas
//! - **Weights**: parameters × bytes per parameter of the weight precision (exact for plain
//!   dtypes and GGUF block types; K-quant mixes use documented average bits per weight). A GGUF
//!   or safetensors file's own tensor bytes are used as they are unless `--dtype` is given.
//! - **KV cache**: `2 × attention layers × kv_heads × head_dim × bytes(kv_dtype) × cells × batch`, where
//!   `cells` is the context padded to 256 as llama.cpp allocates it; layers with a sliding
//!   window hold the window plus one micro-batch, padded to 256 (llama-server), or the whole
//!   context with `--swa-full`; MLA models (DeepSeek-V2/V3) cache one latent of
//!   `kv_lora_rank + qk_rope_head_dim` per token and layer.
//! - **Activations** (inference): what llama.cpp allocates for a forward pass — its compute
//!   buffer, reserved for the prompt graph of one micro-batch of `T = min(ubatch, batch ×
//!   context)` tokens, all outputs, in f32 whatever the weights' type — plus its host output
//!   buffer (`batch × vocab × 4`). For the decoders llama.cpp builds with its `llama`, `qwen2`,
//!   `qwen3`, `qwen3moe`, `openai-moe` (gpt-oss), `gemma2`, `gemma3`, `phi3`, `llama4`,
//!   `cohere2`, `glm4moe` and `deepseek2` graphs, the compute
//!   buffer is a replay of ggml's
//!   graph allocator over that graph, exact to the byte on the CPU backend. Elsewhere it is
//!   the largest of three stages, plus the
//!   graph inputs (`12·T` + 64 KiB of alignment and small tensors): the output stage (`T × vocab × 4` logits + 3 hidden states of
//!   `T × max(hidden, heads·head_dim) × 4`); the attention stage (the KQ mask `n_kv × T × 4`,
//!   f16 with `--flash-attention`, two with interleaved sliding windows, + 6 hidden states, + the
//!   f32 scores `heads × n_kv × T × 4` without flash attention), where `n_kv` is the context
//!   padded to 256 cells (the window plus `T` when every layer slides); and the feed-forward
//!   stage (`2·T·intermediate × 4` gate and up, three widths when fused as in Phi-3; routed
//!   experts: gate, up and their product per selected expert, and each one's output, plus the
//!   router's `T × experts × 4`; + 3 hidden states and the KQ mask, which stays allocated
//!   through every layer but the last). Fitted to llama.cpp's own reports, recorded in
//!   `tests/fixtures/llamacpp/` by `tools/llamacpp-reference/`. Recurrent layers (Mamba,
//!   Mamba-2, Qwen3-Next's gated DeltaNet; Nemotron-H's Mamba-2 blocks; RWKV-6 and RWKV-7's time
//!   mix, 14 and 19 model widths per token) add a mixer stage (their
//!   projections, convolution and scan per token, plus the layer's state as gathered and written
//!   back) and hold no KV cache, unless they attend beside the mixer (Falcon-H1). In a hybrid
//!   with experts the KQ mask is counted live beside the logits, and in hybrids up to twelve
//!   model-width tensors beside the scores, which llama.cpp's graph allocator needs on some
//!   shapes and not others (so those may come out up to 14 % above it, never below); hybrids
//!   without experts never showed the mask beside the logits and are counted without it.
//! - **Recurrent state**: per recurrent layer and sequence, f32
//!   `(d_conv − 1) × conv channels + d_state × d_inner` (llama.cpp's R and S buffers; in RWKV
//!   two token shifts of the model width and a head size per channel), counted with the KV
//!   cache.
//! - **Training** (mixed precision): weights and gradients in the weight dtype, fp32 master
//!   weights (unless the dtype is already f32), optimizer state of 8 bytes per parameter
//!   (Adam/AdamW: two fp32 moments) or 4 (SGD momentum), and activations after Korthikanti et
//!   al. (2022): per layer `s·b·h·(34 + 5·a·s/h)` bytes (`s·b·h·34` with flash attention);
//!   with `--checkpointing`, `2·s·b·h` per layer plus one layer recomputed in full.
//! - **Overhead**: `--overhead` per device (CUDA context, kernels, workspaces; 500 MiB default),
//!   plus `--fragmentation-reserve` percent of weights + KV cache + activations for the pool.

use serde::Serialize;

use super::arch::{Attention, Mlp, ModelArch, ParamCount, SsmKind};
use super::dtype::Precision;

/// Whether the estimate counts inference or mixed-precision training memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Weights, KV cache, activation scratch and overhead.
    Infer,
    /// Adds gradients, optimizer state and fp32 master weights.
    Train,
}

/// The optimizer whose state training keeps per parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Optimizer {
    /// Adam (two fp32 moments).
    Adam,
    /// AdamW (two fp32 moments).
    Adamw,
    /// SGD with momentum (one fp32 buffer).
    Sgd,
}

/// What the model runs as.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Weight precision (`None`: the file's own, or bf16).
    pub dtype: Option<Precision>,
    /// Precision of the KV cache (llama.cpp's `--cache-type-k/v`).
    pub kv_dtype: Precision,
    /// Sequences decoded at once; the KV cache grows with it.
    pub batch: u64,
    /// Tokens per sequence the KV cache holds.
    pub context: u64,
    /// Prefill chunk in tokens.
    pub ubatch: u64,
    /// Flash attention: no `heads × context²` score matrix in the activations.
    pub flash_attention: bool,
    /// llama.cpp's `--swa-full`: sliding-window layers cache the whole context (the
    /// llama-cpp-python default) instead of the window plus one micro-batch (llama-server's).
    pub swa_full: bool,
    /// Runtime overhead bytes per device.
    pub overhead: u64,
    /// Extra percentage on weights, KV cache and activations for the pool's fragmentation.
    pub fragmentation_reserve: f64,
    /// Inference or training.
    pub mode: Mode,
    /// Whose state is counted under training; ignored for inference.
    pub optimizer: Optimizer,
    /// Keep only layer inputs under training (recompute the rest); ignored for inference.
    pub checkpointing: bool,
}

/// Exact weights from a file, when the source has them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileWeights {
    /// Parameters (elements over all tensors).
    pub parameters: u64,
    /// Bytes over all tensors.
    pub bytes: u64,
}

/// What training adds over inference, by part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TrainingBytes {
    /// One gradient per parameter, at the weight precision.
    pub gradients_bytes: u64,
    /// Optimizer moments: two fp32 values per parameter for Adam, one for SGD.
    pub optimizer_bytes: u64,
    /// fp32 master copy of the weights (mixed precision).
    pub master_weights_bytes: u64,
}

/// Every part of an estimate, in bytes, and how the weights were counted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Breakdown {
    /// Parameters stored, all experts included.
    pub parameters: u64,
    /// Active parameters per token.
    pub active_parameters: u64,
    /// Weight bytes: exact from GGUF/safetensors, else parameters × precision.
    pub weights_bytes: u64,
    /// A multimodal projector's weight bytes (an mmproj GGUF), 0 without one.
    pub projector_bytes: u64,
    /// KV cache for `batch × context` tokens, and recurrent layers' state (llama.cpp's KV and
    /// RS buffers together).
    pub kv_cache_bytes: u64,
    /// The part of `kv_cache_bytes` that is recurrent state (Mamba, gated DeltaNet layers):
    /// fixed per sequence, whatever the context.
    pub recurrent_state_bytes: u64,
    /// KV cache per token.
    pub kv_bytes_per_token: u64,
    /// Activation scratch (inference) or stored activations (training).
    pub activation_bytes: u64,
    /// How `activation_bytes` was obtained.
    pub activations_basis: ActivationsBasis,
    /// Runtime overhead per device (CUDA context, cuBLAS workspace, …).
    pub overhead_bytes: u64,
    /// Bytes added for the pool's fragmentation (`fragmentation_reserve` percent).
    pub fragmentation_bytes: u64,
    /// Training-only parts; `None` for inference.
    pub training: Option<TrainingBytes>,
    /// Sum of every part above: what must fit on one device.
    pub total_bytes: u64,
    /// Bytes per layer (weights and KV) for planning layer splits.
    pub per_layer_bytes: u64,
    /// Bytes outside the layers (embeddings, output, final norm, a multimodal projector).
    pub non_layer_bytes: u64,
    /// The precision the weights were counted in.
    #[serde(skip)]
    pub weights_dtype: WeightsDtype,
}

/// The precision weights were counted in, and who chose it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightsDtype {
    /// `--dtype` named it; weights are parameters × its size.
    Chosen(Precision),
    /// The file's own tensor types, byte for byte (GGUF, safetensors).
    File,
    /// Nothing named one and the source has no tensor types: [`DEFAULT_WEIGHT_PRECISION`].
    Default(Precision),
}

impl WeightsDtype {
    /// The name reports use: the precision's name, or `file`.
    pub fn name(&self) -> &'static str {
        match self {
            WeightsDtype::Chosen(p) | WeightsDtype::Default(p) => p.name,
            WeightsDtype::File => "file",
        }
    }
}

/// Weights are counted in bf16 when neither `--dtype` nor a file says otherwise: the dtype
/// checkpoints of current models are published in.
pub const DEFAULT_WEIGHT_PRECISION: Precision = Precision {
    name: "bf16",
    block_bytes: 2,
    block_elems: 1,
};

fn sat(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// Inference activation scratch, per the module docs (saturating at `u64::MAX`): llama.cpp's
/// compute buffer for its reserved prompt graph plus its host output buffer.
pub fn inference_activations(arch: &ModelArch, s: &Settings) -> u64 {
    sat(inference_activations_wide(arch, s).0)
}

/// How the activation figure was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ActivationsBasis {
    /// llama.cpp's prompt graph for this architecture built node by node and placed by a
    /// replay of ggml's graph allocator: its compute buffer to the byte (CPU backend).
    GraphReplay,
    /// The largest of llama.cpp's graph stages, fitted to its reports and rounded up: never
    /// below them, up to 14 % above for hybrids with experts.
    StageEstimate,
    /// Training: activations kept for the backward pass (Korthikanti et al.).
    Training,
}

/// KV cells llama.cpp allocates for `context` tokens: padded to a multiple of 256.
pub const KV_CELL_PAD: u64 = 256;

// llama.cpp reserves its compute buffer for the prompt graph of one micro-batch of `ub` tokens
// with every token an output, and computes it in f32 whatever the weights' type; the graph
// allocator reuses memory between stages, so the buffer is the largest stage's live tensors
// plus the graph inputs. Fitted to, and checked against, llama.cpp's own reports
// (tests/fixtures/llamacpp/).
fn inference_activations_wide(arch: &ModelArch, s: &Settings) -> (u128, ActivationsBasis) {
    let w = u128::from;
    let ub = w(s.ubatch.min(s.batch.saturating_mul(s.context)).max(1));
    let n_kv = w(s.context.div_ceil(KV_CELL_PAD) * KV_CELL_PAD);
    let sliding = arch.sliding_window.as_ref();
    // The host output buffer: one row of logits per sequence.
    let output_buffer = w(s.batch) * w(arch.vocab_size) * 4;
    // The cells of the sliding-window layers' own cache: the window plus a micro-batch unless
    // --swa-full.
    let swa_cells = match sliding {
        Some(win) if !s.swa_full => {
            n_kv.min((w(win.window) + ub).div_ceil(w(KV_CELL_PAD)) * w(KV_CELL_PAD))
        }
        _ => n_kv,
    };
    // Where llama.cpp's graph is modelled node by node, its allocator's own figure.
    if let Some(bytes) = super::replay::compute_buffer(
        arch,
        sat(ub),
        sat(n_kv),
        sat(swa_cells),
        s.flash_attention,
        &s.kv_dtype,
    ) {
        return (w(bytes) + output_buffer, ActivationsBasis::GraphReplay);
    }
    let st = Stages::new(arch, s, ub, n_kv, swa_cells);
    // Token ids, positions and output ids (one i32 each per token), and 64 KiB for tensor
    // alignment and the graph's small tensors, which llama.cpp rounds into its buffers.
    let inputs = ub * 12 + (64 << 10);
    let largest = st
        .output()
        .max(st.attention())
        .max(st.mixer())
        .max(st.ffn());
    (
        inputs + largest + output_buffer,
        ActivationsBasis::StageEstimate,
    )
}

/// The stage formulas' common figures: llama.cpp's graph allocator reuses memory between
/// stages, so the buffer is the largest stage's live tensors plus the graph inputs.
#[derive(Clone, Copy)]
struct Stages<'a> {
    arch: &'a ModelArch,
    flash_attention: bool,
    /// Tokens in the micro-batch.
    ub: u128,
    h: u128,
    heads: u128,
    q_dim: u128,
    /// KV cells (the context padded), and those the attention reads (the window where every
    /// layer slides).
    n_kv: u128,
    attended: u128,
    /// One hidden state of the wider of model and query (`hidden`) and of the model (`width`).
    hidden: u128,
    width: u128,
    /// The KQ mask(s).
    mask: u128,
    interleaved: bool,
    recurrent: u64,
    has_attention: bool,
    /// MLA's per-head width: the latent, or the value where the cache holds full K and V.
    mla: Option<u64>,
    small_mask_hole: bool,
}

impl<'a> Stages<'a> {
    fn new(arch: &'a ModelArch, s: &Settings, ub: u128, n_kv: u128, swa_cells: u128) -> Self {
        let w = u128::from;
        let h = w(arch.hidden_size);
        let heads = w(arch.num_heads);
        let q_dim = heads * w(arch.head_dim);
        let sliding = arch.sliding_window.as_ref();
        let swa_layers = (0..arch.num_layers)
            .filter(|&i| arch.is_sliding_layer(i))
            .count() as u64;
        let all_sliding = sliding.is_some() && swa_layers == arch.num_layers;
        let interleaved = sliding.is_some() && swa_layers > 0 && !all_sliding;
        let attended = match sliding {
            Some(win) if all_sliding => n_kv.min(w(win.window) + ub),
            _ => n_kv,
        };
        let width = ub * h * 4;
        // The KQ mask (f32; f16 with flash attention), two with interleaved sliding windows,
        // the sliding layers' spanning their own cells (the window plus a micro-batch unless
        // --swa-full).
        let mask_bytes = if s.flash_attention { 2 } else { 4 };
        let mask = match sliding {
            Some(_) if interleaved => (n_kv + swa_cells) * ub * mask_bytes,
            _ => attended * ub * mask_bytes,
        };
        let mla = match &arch.attention {
            Attention::Mla {
                kv_lora_rank,
                v_head_dim,
                ..
            } => Some(if arch.mla_full_cache {
                *v_head_dim
            } else {
                *kv_lora_rank
            }),
            Attention::Standard { .. } => None,
        };
        Stages {
            arch,
            flash_attention: s.flash_attention,
            ub,
            h,
            heads,
            q_dim,
            n_kv,
            attended,
            hidden: ub * h.max(q_dim) * 4,
            width,
            mask,
            interleaved,
            recurrent: arch.recurrent_layer_count(),
            has_attention: arch.attention_layer_count() > 0,
            mla,
            small_mask_hole: arch.fused_projections && s.flash_attention && mask < width,
        }
    }

    /// Logits of every token of the micro-batch, with the final norm's output, its input and
    /// the residual (model width); and, where the attention is wider than the model in a model
    /// with experts or recurrent layers (GLM-4.5: 3×, Qwen3-MoE: 2×, Nemotron-H: 1.14×), a
    /// fourth model-width tensor that can stay below the logits (llama.cpp's report on
    /// GLM-4.5-Air's layout at 16384 tokens; never on the dense decoders measured, Qwen3-32B
    /// 1.6× wide and Gemma 2 9B 1.14×).
    fn output(&self) -> u128 {
        let Stages {
            arch,
            ub,
            h,
            q_dim,
            width,
            mask,
            interleaved,
            recurrent,
            has_attention,
            mla,
            small_mask_hole,
            ..
        } = *self;
        let wide = matches!(arch.attention, Attention::Standard { .. })
            && q_dim > h
            && (arch.moe.is_some() || recurrent > 0);
        let output = ub * u128::from(arch.vocab_size) * 4 + if wide { 4 } else { 3 } * width;
        // Where llama.cpp's graph allocator puts the logits depends on what the layers left
        // behind. In a hybrid with experts the mask is first needed mid-graph and the logits land
        // above it (Qwen3-Next, Jamba, Nemotron-H's MoE layout; never in the hybrids without experts
        // measured: Granite-4.0-H's dense layout, Nemotron-H, Falcon-H1, at up to four contexts); with
        // interleaved sliding windows and experts they can land above both masks and three more
        // model-width tensors (gpt-oss with flash attention and Llama 4 without, at 4096 tokens; not
        // at 16384). Both are counted, so these models may come out above llama.cpp, never below.
        // Dense models with interleaved windows never showed it (Gemma 2's 2B, 9B and 27B shapes
        // at 4096 to 32768 tokens, Gemma 3's at 4096 and 16384, flash attention on and off): experts, as in the
        // hybrids, are what the measured placements have in common. Under MLA the logits can land
        // above eight model-width tensors (DeepSeek-V2's layout at 4096 tokens).
        if recurrent > 0 && has_attention && arch.moe.is_some() {
            output + mask
        } else if interleaved && arch.moe.is_some() {
            output + mask + 3 * width
        } else if small_mask_hole {
            // Phi-3's fused layout with flash attention: where the (f16) mask's hole is too small
            // for a model-width tensor, the last layer's tensors stack above it and the logits above
            // them, four model widths up (Phi-3-mini's and Phi-4-mini's shapes at 4096 tokens); at
            // 32768 the hole takes them and the logits sit two widths up.
            output + mask + width
        } else if mla.is_some() {
            output + 8 * width
        } else {
            output
        }
    }

    /// Attention: the scores (without flash attention), the masks, and the tensors live around
    /// them.
    fn attention(&self) -> u128 {
        let Stages {
            arch,
            flash_attention,
            ub,
            h,
            heads,
            q_dim,
            attended,
            hidden,
            mask,
            recurrent,
            has_attention,
            mla,
            ..
        } = *self;
        let w = u128::from;
        // A hybrid's attention layers keep more model-width tensors live around the scores
        // (Qwen3-Next's gated attention needs 10.5 and 12 of them on two shapes, Granite-4.0-H and
        // Jamba eight of the wider width) besides this
        // micro-batch's K and V; a plain decoder three of the query width and three of the model's,
        // and so does a hybrid whose attention is a block of its own, with no feed-forward beside
        // it in the layer (Nemotron-H: 5.2 of the wider width measured, 5.6 counted), or that attends
        // beside its mixer (Falcon-H1: the layer's input, its normed copy and the mixer's output are
        // the model-width three; 4.24 model widths measured, 4.5 counted).
        // MLA adds two per-head tensors of the latent width (the absorbed query and the latent
        // output; of the value width when the cache holds full K and V) and two more hidden states.
        let standalone_attention =
            (0..arch.num_layers).any(|i| arch.has_attention(i) && !arch.has_ffn(i));
        let around = if recurrent > 0 && arch.attn_output_gate {
            (12 * h + 2 * w(arch.num_kv_heads) * w(arch.head_dim)) * ub * 4
        } else if recurrent > 0 && !standalone_attention && !arch.parallel_attention {
            8 * hidden
        } else if let (Some(width), false) = (mla, arch.mla_full_cache) {
            // The absorbed query and the latent output per head, and the query and model-width
            // states around them: 2.25 query widths and 3.25 model widths per token, fitted to
            // DeepSeek-V2's layout (16 heads) and DeepSeek-V3's shape (128 heads) at 16384 and 4096
            // tokens, where the stage shows with and without flash attention (eight widths of the
            // larger, counted before, came out 1.56× on V3's 128 heads).
            2 * ub * heads * w(width) * 4
                + ub * (9 * q_dim).div_ceil(4) * 4
                + ub * (13 * h).div_ceil(4) * 4
        } else if let Some(width) = mla {
            8 * hidden + 2 * ub * heads * w(width) * 4
        } else if arch.fused_projections {
            // The fused q/k/v output, the roped query and one model-width state (Phi-3-mini's
            // shape: 5 model widths; Phi-3-medium's, with grouped K and V: 3.5).
            ub * (2 * q_dim + 2 * w(arch.num_kv_heads) * w(arch.head_dim) + h) * 4
        } else {
            // Three hidden states of each width: query-sized ones (Q, the attention output) and
            // model-sized ones (the residual and normed input); a fourth of the query's width where
            // the query is scaled by an op of its own (Gemma 2's layout at 16384 tokens without
            // flash attention: 4 query and 3 model widths beside the scores and masks).
            let q_states = if arch.query_prescaled { 4 } else { 3 };
            ub * (q_states * q_dim + 3 * h) * 4
        };
        if !has_attention {
            0
        } else if flash_attention {
            mask + around
        } else {
            heads * attended * ub * 4 + mask + around
        }
    }

    /// The recurrent mixer's stage.
    fn mixer(&self) -> u128 {
        let Stages {
            arch,
            ub,
            n_kv,
            hidden,
            recurrent,
            has_attention,
            ..
        } = *self;
        let w = u128::from;
        // In a Mamba hybrid the recurrent layers after the first attention layer run with its masks
        // still allocated: two f32 masks' worth (Jamba's layout: 7.3 bytes per token and cell; the
        // Qwen3-Next and Granite-4.0-H shapes show nothing of the kind).
        let mamba_kind = arch
            .ssm
            .is_some_and(|m| matches!(m.kind, SsmKind::Mamba | SsmKind::JambaMamba));
        let masks_beside_mixer = if has_attention && recurrent > 0 && mamba_kind {
            n_kv * ub * 8
        } else {
            0
        };
        masks_beside_mixer
            + match arch.ssm.filter(|_| recurrent > 0) {
                None => 0,
                Some(m) => {
                    let (inner, conv) = (w(m.inner), m.conv_channels());
                    let state = w(m.state) * inner * 4;
                    let conv_state = w(m.conv_kernel.saturating_sub(1)) * conv * 4;
                    match m.kind {
                        // In-projection (x and z), the convolution's input and output, the x→(Δ, B, C)
                        // projection, Δ, the scan output and the gated output, all f32, plus the hidden
                        // states around it (Jamba's layout shows ten inner widths live; Mamba-370M's
                        // logits hide this stage).
                        SsmKind::Mamba | SsmKind::JambaMamba => {
                            ub * (10 * inner + w(m.dt_rank) + 2 * w(m.state)) * 4 + 3 * hidden
                        }
                        // The in-projection (z, x, B, C, Δ), convolution output, scan output and the
                        // gated norm; the layer's state as gathered and as written back (scan and
                        // convolution); and the hidden states around it.
                        SsmKind::Mamba2 => {
                            ub * ((2 * inner + 2 * w(m.groups) * w(m.state) + w(m.dt_rank))
                                + conv
                                + 2 * inner)
                                * 4
                                + 2 * (state + conv_state)
                                + 3 * hidden
                        }
                        // llama.cpp's chunked delta rule (chunks of 64): the qkvz and βα projections and
                        // their split copies, the convolution's input and output, the output before the
                        // gated norm, the 64-wide intra-chunk products per value head, and the new
                        // state; plus 256 KiB for the chunk masks. Fitted to llama.cpp's reports (within
                        // 0.2 % of its per-token slope on Qwen3-Next's shape).
                        SsmKind::GatedDeltaNet => {
                            let qkvz = conv + inner;
                            ub * (2 * qkvz + 2 * conv + inner + w(m.dt_rank) * 64) * 4
                                + state
                                + (256 << 10)
                        }
                        // The time mix's interpolated inputs, LoRA outputs, projections and WKV
                        // output, f32 per token: 14 model widths for RWKV-6 and 19 plus 100 values
                        // for RWKV-7, measured (llama.cpp's per-token slope on the 1.6B and 7B
                        // RWKV-6 and the 1.5B and 2.9B RWKV-7 shapes, to 0.01 MiB); and the layer's
                        // state as gathered and written back. RWKV-6 at a 128-token micro-batch
                        // shows a third copy of the WKV state (its WKV output carries the new state
                        // beside the tokens'), so it is counted at every size.
                        SsmKind::Rwkv6 => ub * 14 * inner * 4 + 3 * state + 2 * conv_state,
                        SsmKind::Rwkv7 => ub * (19 * inner + 100) * 4 + 2 * (state + conv_state),
                    }
                }
            }
    }

    /// The feed-forward block: dense or routed, with the hidden states and the mask beside it.
    fn ffn(&self) -> u128 {
        let Stages {
            arch,
            ub,
            h,
            hidden,
            width,
            mask,
            has_attention,
            small_mask_hole,
            ..
        } = *self;
        let w = u128::from;
        let ffn_width = |inter: u64| -> u128 {
            let i = w(inter);
            match arch.mlp {
                Mlp::Gated => 2 * ub * i * 4,
                Mlp::Plain => ub * i * 4,
            }
        };
        // A fused gate-and-up projection (Phi-3) is one tensor of twice the width, and its
        // activation a third one (Phi-3-mini's shape at 32768 tokens with flash attention).
        let dense = if arch.fused_projections {
            3 * ub * w(arch.intermediate_size) * 4
        } else {
            ffn_width(arch.intermediate_size)
        };
        // Routed experts with a gate keep the gate, the up projection and their product for every
        // selected expert, then each expert's output before they are weighted and summed
        // (Mixtral's shape with flash attention: 3 × 14336 × 2 + 4096 × 2 per token).
        let moe = arch.moe.as_ref().map_or(0, |m| {
            let k = w(m.experts_per_token);
            let routed = match arch.mlp {
                Mlp::Gated => 3 * ub * w(m.expert_intermediate) * 4 * k + ub * h * 4 * k,
                Mlp::Plain => ffn_width(m.expert_intermediate) * k,
            };
            routed + ffn_width(m.shared_intermediate) + ub * w(m.experts) * 4
        });
        // The KQ mask stays allocated through every layer's feed-forward block but the last one's;
        // in Phi-3's layout with flash attention, a mask too small to take a model-width tensor in
        // its hole costs one more above it (Phi-3-medium's shape at 4096 tokens).
        let mask_live = match has_attention {
            false => 0,
            true if small_mask_hole => mask + width,
            true => mask,
        };
        dense.max(moe) + 3 * hidden + mask_live
    }
}

/// Training activations after Korthikanti et al., per the module docs (saturating at
/// `u64::MAX`).
pub fn training_activations(arch: &ModelArch, s: &Settings) -> u64 {
    sat(training_activations_wide(arch, s))
}

fn training_activations_wide(arch: &ModelArch, s: &Settings) -> u128 {
    let sq = u128::from(s.context);
    let b = u128::from(s.batch);
    let h = u128::from(arch.hidden_size);
    let heads = u128::from(arch.num_heads);
    let layers = u128::from(arch.num_layers);
    let per_layer = sq * b * h * 34
        + if s.flash_attention {
            0
        } else {
            5 * heads * sq * sq * b
        };
    if s.checkpointing {
        layers * 2 * sq * b * h + per_layer
    } else {
        layers * per_layer
    }
}

/// A part of the estimate that would not fit in 64 bits: settings no device can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the {part} would exceed 2^64 bytes (16 EiB) at batch {batch} and context {context}; lower \
     --batch or --context"
)]
pub struct EstimateOverflow {
    /// Which part: `KV cache`, `activations` or `total`.
    pub part: &'static str,
    /// The batch asked for.
    pub batch: u64,
    /// The context asked for.
    pub context: u64,
}

/// Computes the breakdown for an architecture (and exact file weights, if known). Every part
/// is computed in 128 bits; one that does not fit in 64 is refused rather than clamped, so no
/// figure is ever below the true one. Shapes are assumed to have passed
/// [`ModelArch::check_plausible`] (every model source checks them).
pub fn estimate(
    arch: &ModelArch,
    file: Option<FileWeights>,
    s: &Settings,
) -> Result<Breakdown, EstimateOverflow> {
    estimate_with_projector(arch, file, 0, s)
}

/// The weights' bytes and where their type came from: `--dtype`, else the file's own bytes,
/// else the default precision.
fn weights_of(s: &Settings, file: Option<FileWeights>, parameters: u64) -> (u64, WeightsDtype) {
    match (s.dtype, file) {
        (Some(p), _) => (
            sat(p.bytes_for(u128::from(parameters))),
            WeightsDtype::Chosen(p),
        ),
        (None, Some(f)) => (f.bytes, WeightsDtype::File),
        (None, None) => (
            sat(DEFAULT_WEIGHT_PRECISION.bytes_for(u128::from(parameters))),
            WeightsDtype::Default(DEFAULT_WEIGHT_PRECISION),
        ),
    }
}

/// Inference's KV cache (recurrent states included), the states alone, and the activations.
struct InferenceMemory {
    kv_cache: u64,
    recurrent_state: u64,
    activations: u64,
    basis: ActivationsBasis,
}

fn inference_memory(arch: &ModelArch, s: &Settings) -> Result<InferenceMemory, EstimateOverflow> {
    let fit = |v: u128, part: &'static str| {
        u64::try_from(v).map_err(|_| EstimateOverflow {
            part,
            batch: s.batch,
            context: s.context,
        })
    };
    // llama.cpp's cells: the context padded to 256; sliding layers hold the window plus one
    // micro-batch, padded, unless --swa-full.
    let pad = |n: u64| n.div_ceil(KV_CELL_PAD).saturating_mul(KV_CELL_PAD);
    let cells = pad(s.context);
    let swa_cells = match &arch.sliding_window {
        Some(w) if !s.swa_full => pad(w.window.saturating_add(s.ubatch)).min(cells),
        _ => cells,
    };
    let elems = arch.kv_elements_in_cells(cells, swa_cells) * u128::from(s.batch);
    // Recurrent layers keep an f32 state per sequence instead of a KV cache.
    let state = arch.ssm.map_or(0, |m| {
        m.state_elements_per_layer() * u128::from(arch.recurrent_layer_count()) * 4
    }) * u128::from(s.batch);
    let recurrent_state = fit(state, "KV cache")?;
    let (activations, basis) = inference_activations_wide(arch, s);
    Ok(InferenceMemory {
        kv_cache: fit(s.kv_dtype.bytes_for(elems) + state, "KV cache")?,
        recurrent_state,
        activations: fit(activations, "activations")?,
        basis,
    })
}

/// Training's gradients (in the weights' precision), optimizer state and f32 master weights
/// (none when the weights are f32 already).
fn training_bytes(parameters: u64, dtype: Precision, optimizer: Optimizer) -> TrainingBytes {
    let p = u128::from(parameters);
    TrainingBytes {
        gradients_bytes: sat(dtype.bytes_for(p)),
        optimizer_bytes: sat(p * match optimizer {
            Optimizer::Adam | Optimizer::Adamw => 8,
            Optimizer::Sgd => 4,
        }),
        master_weights_bytes: if dtype.name == "f32" { 0 } else { sat(p * 4) },
    }
}

/// [`estimate`] for a multimodal model: `projector_bytes` of projector weights (an mmproj GGUF)
/// are loaded beside the language model's, on the same device, under the same fragmentation
/// reserve.
pub fn estimate_with_projector(
    arch: &ModelArch,
    file: Option<FileWeights>,
    projector_bytes: u64,
    s: &Settings,
) -> Result<Breakdown, EstimateOverflow> {
    let fit = |v: u128, part: &'static str| {
        u64::try_from(v).map_err(|_| EstimateOverflow {
            part,
            batch: s.batch,
            context: s.context,
        })
    };
    let ParamCount {
        total: arch_params,
        active,
        embedding,
    } = arch.params();
    let parameters = file.map_or(arch_params, |f| f.parameters);
    let (weights, weights_dtype) = weights_of(s, file, parameters);
    let dtype = s.dtype.unwrap_or(DEFAULT_WEIGHT_PRECISION);
    let kv_elems_token =
        u128::from(arch.kv_elements_per_token_layer()) * u128::from(arch.attention_layer_count());
    let kv_bytes_per_token = sat(s.kv_dtype.bytes_for(kv_elems_token));
    let (kv_cache, recurrent_state, activations, activations_basis, training) = match s.mode {
        Mode::Infer => {
            let m = inference_memory(arch, s)?;
            (m.kv_cache, m.recurrent_state, m.activations, m.basis, None)
        }
        Mode::Train => (
            0,
            0,
            fit(training_activations_wide(arch, s), "activations")?,
            ActivationsBasis::Training,
            Some(training_bytes(parameters, dtype, s.optimizer)),
        ),
    };
    let training_sum = training.map_or(0, |t| {
        t.gradients_bytes
            .saturating_add(t.optimizer_bytes)
            .saturating_add(t.master_weights_bytes)
    });
    let reservable = u128::from(weights)
        + u128::from(projector_bytes)
        + u128::from(kv_cache)
        + u128::from(activations)
        + u128::from(training_sum);
    let fragmentation = fit(
        (reservable as f64 * s.fragmentation_reserve / 100.0).round() as u128,
        "total",
    )?;
    let total = fit(
        reservable + u128::from(s.overhead) + u128::from(fragmentation),
        "total",
    )?;
    // Split weights between layers and the rest in proportion to parameters, for planners.
    let layer_params = parameters.saturating_sub(embedding + arch.hidden_size);
    let weight_per_param = weights as f64 / parameters.max(1) as f64;
    let layers = arch.num_layers.max(1);
    let per_layer_weights = (layer_params as f64 * weight_per_param / layers as f64).ceil() as u64;
    let per_layer_kv = kv_cache.div_ceil(layers);
    Ok(Breakdown {
        parameters,
        active_parameters: if file.is_some() {
            parameters - (arch_params - active).min(parameters)
        } else {
            active
        },
        weights_bytes: weights,
        projector_bytes,
        kv_cache_bytes: kv_cache,
        recurrent_state_bytes: recurrent_state,
        kv_bytes_per_token,
        activation_bytes: activations,
        activations_basis,
        overhead_bytes: s.overhead,
        fragmentation_bytes: fragmentation,
        training,
        total_bytes: total,
        per_layer_bytes: per_layer_weights.saturating_add(per_layer_kv),
        // The projector sits whole on one device, beside the embeddings.
        non_layer_bytes: weights
            .saturating_sub(per_layer_weights.saturating_mul(layers))
            .saturating_add(projector_bytes),
        weights_dtype,
    })
}
