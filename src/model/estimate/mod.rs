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

use super::arch::{ModelArch, ParamCount};
use super::dtype::Precision;
use super::generate::{generate_peak, GeneratePeak, GenerateRun};
use super::training::{training_peak, Optimizer, Recipe, TrainingError, TrainingPeak, TrainingRun};
use super::weights::FileWeights;

/// PyTorch's training step: the recipe it ran under and its peak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TrainingStep {
    /// Precision and copies.
    pub recipe: Recipe,
    /// The peak, by category, and where it falls.
    pub peak: TrainingPeak,
    /// FSDP2 sharding, when the figures are one rank's.
    pub fsdp: Option<crate::model::training::Fsdp>,
    /// DistributedDataParallel, when the figures are one rank's.
    pub ddp: Option<crate::model::training::Ddp>,
    /// DeepSpeed's ZeRO-2, when the figures are one rank's.
    pub deepspeed: Option<crate::model::training::DeepSpeed>,
    /// Micro-batches a step accumulates gradients over (1: none).
    pub grad_accum: u64,
}

/// Whether the estimate counts inference or mixed-precision training memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Weights, KV cache, activation scratch and overhead.
    Infer,
    /// Adds gradients, optimizer state and fp32 master weights.
    Train,
}

/// What the model runs as.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Weight precision (`None`: the file's own, or bf16).
    pub dtype: Option<Precision>,
    /// Precision of the KV cache (llama.cpp's `--cache-type-k/v`).
    pub kv_dtype: Precision,
    /// No precision was asked for the KV cache: llama.cpp takes `kv_dtype` (f16), vLLM its
    /// `--kv-cache-dtype auto`, the model's dtype.
    pub kv_dtype_auto: bool,
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
    /// Micro-batches a training step accumulates gradients over (1: none); ignored for
    /// inference.
    pub grad_accum: u64,
    /// transformers' attention implementation under training; ignored for inference.
    pub attention: crate::model::training::AttnImplementation,
    /// FSDP2 sharding under training: the figures are then one rank's.
    pub fsdp: Option<crate::model::training::Fsdp>,
    /// DistributedDataParallel under training: one rank's figures, its gradient buckets in.
    pub ddp: Option<crate::model::training::Ddp>,
    /// DeepSpeed's ZeRO-2 under training: one rank's figures.
    pub deepspeed: Option<crate::model::training::DeepSpeed>,
    /// Precision and copies under training (`None`: what the weights' precision implies,
    /// [`Recipe::for_weights`]); ignored for inference.
    pub recipe: Option<Recipe>,
    /// Under inference, transformers' `generate` of this many new tokens a sequence (the
    /// context is the prompt) instead of llama.cpp's buffers; `None`: llama.cpp.
    pub generate_new_tokens: Option<u64>,
    /// Rows of logits llama.cpp reserves a micro-batch for (`n_outputs_max`): `llama-server`
    /// keeps one a sequence (its `-np`); `None`: every token, as llama.cpp's library and
    /// `llama-fit-params` do.
    pub llamacpp_outputs: Option<u64>,
    /// The ggml backend llama.cpp's GPUs run, for how their compute buffers place tensors.
    pub llamacpp_device: LlamaDevice,
    /// llama.cpp's first devices, reached through ggml-rpc (`--rpc`; none: every device is
    /// local), by the backend behind each `rpc-server`: each follows that backend's buffer
    /// rules (ggml-rpc asks the remote for alignment and allocation sizes) but runs every op,
    /// reorders nothing and takes no op on a host weight.
    pub llamacpp_rpc: Vec<LlamaDevice>,
    /// `--no-op-offload`: a device that offloads ops takes none (llama.cpp's `op_offload`
    /// context parameter off).
    pub llamacpp_no_op_offload: bool,
    /// `GGML_VK_DISABLE_GRAPH_OPTIMIZE`, `GGML_METAL_GRAPH_OPTIMIZE_DISABLE`: ggml-vulkan and
    /// ggml-metal allocate each split in llama.cpp's graph order instead of reordering it first.
    pub llamacpp_keep_graph_order: bool,
}

impl Settings {
    /// Inference of one sequence of `context` tokens with a `kv_dtype` cache, and nothing added:
    /// micro-batches of 512, no flash attention, no overhead or reserve. Override fields with
    /// struct update syntax.
    pub fn inference(context: u64, kv_dtype: Precision) -> Self {
        Settings {
            dtype: None,
            kv_dtype,
            kv_dtype_auto: false,
            batch: 1,
            context,
            ubatch: 512,
            flash_attention: false,
            swa_full: false,
            overhead: 0,
            fragmentation_reserve: 0.0,
            mode: Mode::Infer,
            optimizer: Optimizer::Adamw,
            checkpointing: false,
            grad_accum: 1,
            attention: Default::default(),
            recipe: None,
            fsdp: None,
            ddp: None,
            deepspeed: None,
            generate_new_tokens: None,
            llamacpp_outputs: None,
            llamacpp_device: LlamaDevice::CpuRules,
            llamacpp_rpc: Vec::new(),
            llamacpp_no_op_offload: false,
            llamacpp_keep_graph_order: false,
        }
    }
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
    /// Under training, PyTorch's step: the recipe, the peak by category and its phase (`None`
    /// where the step is not walked: see `training_unwalked`).
    pub training_step: Option<TrainingStep>,
    /// Why the training step was counted by the closed formula instead.
    #[serde(skip)]
    pub training_unwalked: Option<TrainingError>,
    /// Under `generate_new_tokens`, transformers' `generate` peak.
    pub generate: Option<GeneratePeak>,
    /// Why `generate` could not be walked (the llama.cpp figures stand instead).
    #[serde(skip)]
    pub generate_unwalked: Option<TrainingError>,
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
    /// Training: PyTorch's step walked module by module (`model::training`), its peak as
    /// PyTorch's `MemTracker` counts it; activations include backward's temporaries at the peak.
    PytorchStep,
    /// transformers' `generate` ([`crate::model::generate`]): what lives at its peak beside the
    /// weights and the KV cache.
    TransformersGenerate,
}

/// KV cells llama.cpp allocates for `context` tokens: padded to a multiple of 256.
pub const KV_CELL_PAD: u64 = 256;

// llama.cpp reserves its compute buffer for the prompt graph of one micro-batch of `ub` tokens
// with every token an output, and computes it in f32 whatever the weights' type; the graph
// allocator reuses memory between stages, so the buffer is the largest stage's live tensors
// plus the graph inputs. Fitted to, and checked against, llama.cpp's own reports
// (tests/fixtures/llamacpp/).
mod llamacpp;
mod stages;

pub use llamacpp::{
    offloaded_compute_buffers, placed_compute_buffers, LlamaDevice, Placement, RulesBasis,
    UnmeasuredRule,
};
use stages::Stages;

fn inference_activations_wide(arch: &ModelArch, s: &Settings) -> (u128, ActivationsBasis) {
    let w = u128::from;
    let ub = w(s.ubatch.min(s.batch.saturating_mul(s.context)).max(1));
    let n_kv = w(s.context.div_ceil(KV_CELL_PAD) * KV_CELL_PAD);
    let sliding = arch.sliding_window.as_ref();
    // The host output buffer: one row of logits per sequence, and an encoder's embeddings.
    let output_buffer = w(s.batch) * w(output_row_floats(arch)) * 4;
    // The cells of the sliding-window layers' own cache: the window plus a micro-batch unless
    // --swa-full.
    let swa_cells = match sliding {
        Some(win) if !s.swa_full => {
            n_kv.min((w(win.window) + ub).div_ceil(w(KV_CELL_PAD)) * w(KV_CELL_PAD))
        }
        _ => n_kv,
    };
    // Where llama.cpp's graph is modelled node by node, its allocator's own figure.
    if let Some(bytes) = super::replay::compute_buffer_of(&super::replay::Batch {
        arch,
        tokens: sat(ub),
        kv_cells: sat(n_kv),
        swa_cells: sat(swa_cells),
        flash_attention: s.flash_attention,
        kv_type: &s.kv_dtype,
        seqs: s.batch.max(1),
        outputs: s.llamacpp_outputs,
    }) {
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

/// Floats of llama.cpp's output buffer a sequence: the logits, and an encoder's embeddings
/// beside them (llama.cpp reserves both when it computes embeddings).
pub fn output_row_floats(arch: &ModelArch) -> u64 {
    match arch.encoder {
        Some(_) => arch.vocab_size.saturating_add(arch.hidden_size),
        None => arch.vocab_size,
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

/// llama.cpp's KV cells: the context padded to 256 for full-attention layers; sliding layers
/// hold the window plus one micro-batch, padded, unless `--swa-full`.
fn kv_cells(arch: &ModelArch, s: &Settings) -> (u64, u64) {
    let pad = |n: u64| n.div_ceil(KV_CELL_PAD).saturating_mul(KV_CELL_PAD);
    let cells = pad(s.context);
    let swa_cells = match &arch.sliding_window {
        Some(w) if !s.swa_full => pad(w.window.saturating_add(s.ubatch)).min(cells),
        _ => cells,
    };
    (cells, swa_cells)
}

/// Each layer's KV-cache bytes (its K and V over its cells, or a recurrent layer's f32 state)
/// for `s.batch` sequences: what llama.cpp allocates with the layer, on the layer's device.
/// They add up to [`Breakdown::kv_cache_bytes`].
pub fn kv_bytes_per_layer(arch: &ModelArch, s: &Settings) -> Vec<u64> {
    let (cells, swa_cells) = kv_cells(arch, s);
    let per = u128::from(arch.kv_elements_per_token_layer());
    let state = arch.ssm.map_or(0, |m| m.state_elements_per_layer() * 4);
    (0..arch.num_layers)
        .map(|i| {
            // A recurrent layer keeps its state, and (Falcon-H1's, attending beside the mixer)
            // a KV cache too.
            let state = if arch.is_recurrent_layer(i) { state } else { 0 };
            let kv = if arch.has_attention(i) {
                let c = if arch.is_sliding_layer(i) {
                    swa_cells
                } else {
                    cells
                };
                s.kv_dtype.bytes_for(per * u128::from(c))
            } else {
                0
            };
            sat((state + kv) * u128::from(s.batch))
        })
        .collect()
}

/// The bytes ggml-cuda adds to each attention layer's cache tensors when their type is
/// quantized and a row is not a multiple of 512 values
/// (`cuda_row_padding`); 0 on layers without attention.
pub fn kv_row_padding_per_layer(arch: &ModelArch, s: &Settings) -> Vec<u64> {
    let (k, v) = arch.kv_tensor_widths();
    let t = s.kv_dtype;
    let pad = |w: u64| {
        if w == 0 {
            0
        } else {
            crate::model::layers::cuda_row_padding(w, t.block_elems, t.block_bytes)
        }
    };
    let per = pad(k).saturating_add(pad(v));
    (0..arch.num_layers)
        .map(|i| if arch.has_attention(i) { per } else { 0 })
        .collect()
}

fn inference_memory(arch: &ModelArch, s: &Settings) -> Result<InferenceMemory, EstimateOverflow> {
    let fit = |v: u128, part: &'static str| {
        u64::try_from(v).map_err(|_| EstimateOverflow {
            part,
            batch: s.batch,
            context: s.context,
        })
    };
    let (cells, swa_cells) = kv_cells(arch, s);
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
            Optimizer::Adamw8bit => 2,
            // Factored: a matrix's rows and columns, next to nothing a parameter.
            Optimizer::Adafactor => 0,
        }),
        master_weights_bytes: if dtype.name == "f32" { 0 } else { sat(p * 4) },
    }
}

/// [`estimate`] for a multimodal model: `projector_bytes` of projector weights (an mmproj GGUF)
/// are loaded beside the language model's, on the same device, under the same fragmentation
/// reserve.
#[expect(
    clippy::cast_possible_truncation,
    reason = "a float cast saturates; a share of the model's bytes; a float cast saturates; the reserve is a fraction of a u64"
)]
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
    let mut parts = match s.mode {
        Mode::Infer => {
            let m = inference_memory(arch, s)?;
            Parts {
                weights,
                kv_cache: m.kv_cache,
                recurrent_state: m.recurrent_state,
                activations: m.activations,
                basis: m.basis,
                training: None,
            }
        }
        Mode::Train => Parts {
            weights,
            kv_cache: 0,
            recurrent_state: 0,
            activations: fit(training_activations_wide(arch, s), "activations")?,
            basis: ActivationsBasis::Training,
            training: Some(training_bytes(parameters, dtype, s.optimizer)),
        },
    };
    let (training_step, training_unwalked) = walk_training(arch, s, dtype, &mut parts);
    let (generate, generate_unwalked) = walk_generate(arch, s, &mut parts);
    let Parts {
        weights,
        kv_cache,
        recurrent_state,
        activations,
        basis: activations_basis,
        training,
    } = parts;
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
        training_step,
        training_unwalked,
        generate,
        generate_unwalked,
        total_bytes: total,
        per_layer_bytes: per_layer_weights.saturating_add(per_layer_kv),
        // The projector sits whole on one device, beside the embeddings.
        non_layer_bytes: weights
            .saturating_sub(per_layer_weights.saturating_mul(layers))
            .saturating_add(projector_bytes),
        weights_dtype,
    })
}

/// The parts of a [`Breakdown`] a walked step replaces.
struct Parts {
    weights: u64,
    kv_cache: u64,
    recurrent_state: u64,
    activations: u64,
    basis: ActivationsBasis,
    training: Option<TrainingBytes>,
}

/// Under training, PyTorch's step walked tensor by tensor: its peak replaces the closed
/// formula's parts, or the reason it could not be walked comes back.
fn walk_training(
    arch: &ModelArch,
    s: &Settings,
    dtype: Precision,
    parts: &mut Parts,
) -> (Option<TrainingStep>, Option<TrainingError>) {
    if s.mode != Mode::Train {
        return (None, None);
    }
    let recipe = s.recipe.unwrap_or_else(|| {
        Recipe::for_weights((dtype.block_elems == 1).then_some(dtype.block_bytes))
    });
    let run = TrainingRun {
        recipe,
        optimizer: s.optimizer,
        // PyTorch's default on CUDA.
        foreach: true,
        batch: s.batch,
        seq: s.context,
        checkpointing: s.checkpointing,
        grad_accum: s.grad_accum,
        fsdp: s.fsdp,
        ddp: s.ddp,
        deepspeed: s.deepspeed,
        attention: s.attention,
    }
    .as_walked();
    match training_peak(arch, &run) {
        Ok(peak) => {
            parts.weights = peak.parameters.saturating_add(peak.buffers);
            parts.activations = peak.activations.saturating_add(peak.temporaries);
            parts.basis = ActivationsBasis::PytorchStep;
            parts.training = Some(TrainingBytes {
                gradients_bytes: peak.gradients,
                optimizer_bytes: peak.optimizer_state,
                master_weights_bytes: 0,
            });
            let step = TrainingStep {
                recipe,
                peak,
                fsdp: run.fsdp,
                ddp: s.ddp,
                deepspeed: s.deepspeed,
                grad_accum: s.grad_accum,
            };
            (Some(step), None)
        }
        Err(e) => (None, Some(e)),
    }
}

/// Under `generate_new_tokens`, transformers' `generate` walked: its peak replaces the
/// llama.cpp figures, or the reason it could not be walked comes back.
fn walk_generate(
    arch: &ModelArch,
    s: &Settings,
    parts: &mut Parts,
) -> (Option<GeneratePeak>, Option<TrainingError>) {
    let (Mode::Infer, Some(new_tokens)) = (s.mode, s.generate_new_tokens) else {
        return (None, None);
    };
    let run = GenerateRun {
        batch: s.batch,
        prompt: s.context,
        new_tokens,
    };
    match generate_peak(arch, &run) {
        Ok(g) => {
            parts.weights = g.parameters.saturating_add(g.buffers);
            parts.kv_cache = g.kv_cache;
            parts.recurrent_state = 0;
            parts.activations = g.activations;
            parts.basis = ActivationsBasis::TransformersGenerate;
            (Some(g), None)
        }
        Err(e) => (None, Some(e)),
    }
}
