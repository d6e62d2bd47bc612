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

use super::breakdown::{
    ActivationsBasis, Breakdown, EstimateOverflow, TrainingBytes, TrainingStep,
};
use super::llamacpp::activations::inference_activations_wide;
use super::llamacpp::kv::kv_cells;
use super::pytorch::assisted::{assisted_peak, Assistant};
use super::pytorch::generate::{generate_peak, GeneratePeak, GenerateRun};
use super::pytorch::training::{training_peak, Optimizer, Recipe, TrainingError, TrainingRun};
use super::settings::{Mode, Settings};
use crate::model::{
    FileWeights, ModelArch, ModelSource, ParamCount, Precision, WeightsDtype,
    DEFAULT_WEIGHT_PRECISION,
};

fn sat(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

impl ModelSource {
    /// The model's memory under `settings`, its projector's weights (if any) and the buffer
    /// it encodes an image in included.
    pub fn estimate(&self, settings: &Settings) -> Result<Breakdown, EstimateOverflow> {
        let projector = self.projector.as_ref();
        estimate_with_projector(
            &self.arch,
            self.file_weights,
            ProjectorBytes {
                weights: projector.map_or(0, |p| p.bytes),
                compute: projector.map_or(0, |p| {
                    super::llamacpp::projector_compute(p, settings.flash_attention)
                }),
                largest_compute: projector.map_or(0, |p| {
                    super::llamacpp::projector_largest_compute(p, settings.flash_attention)
                }),
            },
            settings,
        )
    }
}

/// What a multimodal projector adds beside the language model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProjectorBytes {
    /// Its weights.
    pub weights: u64,
    /// The compute buffer it reserves at warm-up.
    pub compute: u64,
    /// The buffer once it has encoded the largest image it accepts (no less than `compute`),
    /// which the estimate counts.
    pub largest_compute: u64,
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
    if s.pytorch.checkpointing {
        layers * 2 * sq * b * h + per_layer
    } else {
        layers * per_layer
    }
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
    estimate_with_projector(arch, file, ProjectorBytes::default(), s)
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
    let (cells, swa_cells) = kv_cells(arch, s);
    let elems = arch.kv_elements_in_cells(cells, swa_cells) * u128::from(s.batch);
    // Layers of different widths (Gemma 4): each layer's K and V as llama.cpp allocates them,
    // V padded to the widest layer's without flash attention; DeepSeek-V4's window, compressed
    // caches and compressor states.
    let cache = match arch.full_attention.is_some() || arch.deepseek_v4.is_some() {
        true => super::llamacpp::kv::kv_bytes_per_layer(arch, s)
            .iter()
            .map(|&b| u128::from(b))
            .sum(),
        false => s.kv_dtype.bytes_for(elems),
    };
    // Recurrent layers keep an f32 state per sequence instead of a KV cache.
    let state = arch.ssm.map_or(0, |m| {
        m.state_elements_per_layer() * u128::from(arch.recurrent_layer_count()) * 4
    }) * u128::from(s.batch);
    let recurrent_state = fit(state, "KV cache")?;
    let (activations, basis) = inference_activations_wide(arch, s);
    Ok(InferenceMemory {
        kv_cache: fit(cache + state, "KV cache")?,
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

/// [`estimate`] for a multimodal model: a projector's weights (an mmproj GGUF) and the buffer it
/// encodes an image in are loaded beside the language model's, on the same device, under the
/// same fragmentation reserve.
#[expect(
    clippy::cast_possible_truncation,
    reason = "a float cast saturates; a share of the model's bytes; a float cast saturates; the reserve is a fraction of a u64"
)]
pub fn estimate_with_projector(
    arch: &ModelArch,
    file: Option<FileWeights>,
    projector: ProjectorBytes,
    s: &Settings,
) -> Result<Breakdown, EstimateOverflow> {
    let projector_bytes = projector.weights;
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
    let kv_bytes_per_token = sat(s.kv_dtype.bytes_for(kv_elements_per_token(arch)));
    let mut parts = closed_parts(arch, s, weights, parameters, dtype)?;
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
        + u128::from(projector.largest_compute)
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
        projector_compute_bytes: projector.compute,
        projector_largest_image_compute_bytes: projector.largest_compute,
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
            .saturating_add(projector_bytes)
            .saturating_add(projector.largest_compute),
        weights_dtype,
    })
}

/// The KV cache's elements a token adds across the layers.
fn kv_elements_per_token(arch: &ModelArch) -> u128 {
    match (&arch.deepseek_v4, arch.full_attention) {
        // DeepSeek-V4: what its compressed caches add a token (its window is fixed).
        (Some(v), _) => v.kv_elements_per_token(arch.head_dim),
        // Each layer at its own widths (Gemma 4).
        (None, Some(_)) => arch.kv_elements_in_cells(1, 1),
        // GLM-5-next's indexer rows, only in the layers with an indexer of their own.
        (None, None) if arch.glm5_next.is_some() => arch.kv_elements_in_cells(1, 1),
        (None, None) => {
            u128::from(arch.kv_elements_per_token_layer())
                * u128::from(arch.attention_layer_count())
        }
    }
}

/// The parts before any walk: llama.cpp's inference figures, or training's closed formula.
fn closed_parts(
    arch: &ModelArch,
    s: &Settings,
    weights: u64,
    parameters: u64,
    dtype: Precision,
) -> Result<Parts, EstimateOverflow> {
    Ok(match s.mode {
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
            activations: u64::try_from(training_activations_wide(arch, s)).map_err(|_| {
                EstimateOverflow {
                    part: "activations",
                    batch: s.batch,
                    context: s.context,
                }
            })?,
            basis: ActivationsBasis::Training,
            training: Some(training_bytes(parameters, dtype, s.pytorch.optimizer)),
        },
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
    let recipe = s.pytorch.recipe.unwrap_or_else(|| {
        Recipe::for_weights((dtype.block_elems == 1).then_some(dtype.block_bytes))
    });
    let run = TrainingRun {
        recipe,
        optimizer: s.pytorch.optimizer,
        // PyTorch's default on CUDA.
        foreach: true,
        batch: s.batch,
        seq: s.context,
        checkpointing: s.pytorch.checkpointing,
        grad_accum: s.pytorch.grad_accum,
        fsdp: s.pytorch.fsdp,
        ddp: s.pytorch.ddp,
        deepspeed: s.pytorch.deepspeed,
        attention: s.pytorch.attention,
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
                ddp: s.pytorch.ddp,
                deepspeed: s.pytorch.deepspeed,
                grad_accum: s.pytorch.grad_accum,
            };
            (Some(step), None)
        }
        Err(e) => (None, Some(e)),
    }
}

/// Under `generate_new_tokens`, transformers' `generate` walked (with its assistant model and
/// adapter): its peak replaces the llama.cpp figures, or the reason it could not be walked
/// comes back.
fn walk_generate(
    arch: &ModelArch,
    s: &Settings,
    parts: &mut Parts,
) -> (Option<GeneratePeak>, Option<TrainingError>) {
    let (Mode::Infer, Some(new_tokens)) = (s.mode, s.pytorch.generate_new_tokens) else {
        return (None, None);
    };
    let run = GenerateRun {
        batch: s.batch,
        prompt: s.context,
        new_tokens,
        lora: s.pytorch.generate_lora,
    };
    let peak = match &s.generate_assistant {
        None => generate_peak(arch, &run),
        Some(a) => assisted_peak(
            arch,
            &run,
            Assistant {
                arch: &a.arch,
                tokens: a.tokens,
            },
        ),
    };
    match peak {
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
