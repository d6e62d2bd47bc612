//! Hugging Face `config.json` → [`ModelArch`].

use std::path::Path;

use serde_json::{Map, Value};

use super::arch::{
    Attention, GraniteScales, Mlp, ModelArch, Moe, Norm, ShapeField, SlidingLayers, SlidingWindow,
    SsmKind,
};
use super::error::ModelError;
use super::estimate::FileWeights;
use super::ModelWarning;

/// Families whose config.json gpumem understands field by field.
pub const KNOWN_FAMILIES: &[&str] = &[
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen2_moe",
    "qwen3",
    "qwen3_moe",
    "gemma",
    "gemma2",
    "gemma3",
    "gemma3_text",
    "phi3",
    "falcon",
    "gpt_neox",
    "deepseek_v2",
    "deepseek_v3",
    "gpt_oss",
    "llama4",
    "llama4_text",
    "qwen3_next",
    "mamba",
    "mamba2",
    "granitemoehybrid",
    "kimi_k2",
    "glm4_moe",
    "jamba",
    "nemotron_h",
    "falcon_h1",
];

/// Largest accepted config.json (real ones are a few KiB).
const MAX_CONFIG_BYTES: u64 = 16 << 20;

struct Fields<'a> {
    path: &'a Path,
    map: &'a Map<String, Value>,
    used: Vec<String>,
}

impl Fields<'_> {
    fn uint(&mut self, names: &[&str]) -> Result<Option<u64>, ModelError> {
        for name in names {
            match self.map.get(*name) {
                None | Some(Value::Null) => continue,
                Some(v) => {
                    self.used.push(name.to_string());
                    return v.as_u64().map(Some).ok_or_else(|| ModelError::BadField {
                        path: self.path.to_path_buf(),
                        field: name.to_string(),
                        why: format!("is {v}, expected a non-negative integer"),
                    });
                }
            }
        }
        Ok(None)
    }

    fn req(&mut self, names: &[&str]) -> Result<u64, ModelError> {
        match self.uint(names)? {
            Some(0) => Err(ModelError::BadField {
                path: self.path.to_path_buf(),
                field: names[0].into(),
                why: "is 0".into(),
            }),
            Some(v) => Ok(v),
            None => Err(ModelError::MissingField {
                path: self.path.to_path_buf(),
                field: names[0].into(),
            }),
        }
    }

    fn boolean(&mut self, name: &str) -> Option<bool> {
        let v = self.map.get(name)?.as_bool()?;
        self.used.push(name.to_string());
        Some(v)
    }
}

/// Mamba (HF `MambaConfig`) and Mamba-2 (`Mamba2Config`): every layer a state-space mixer,
/// no attention and no separate MLP; the embeddings tied unless the config says otherwise.
/// Mamba-2's mixer has `num_heads` heads of `head_dim` and `n_groups` B/C groups.
fn state_space(
    f: &mut Fields<'_>,
    name: &str,
    hidden: u64,
    layers: u64,
    kind: SsmKind,
) -> Result<ModelArch, ModelError> {
    let vocab = f.req(&["vocab_size"])?;
    let default_state = if kind == SsmKind::Mamba { 16 } else { 128 };
    let state = f.uint(&["state_size", "d_state"])?.unwrap_or(default_state);
    let conv_kernel = f.uint(&["conv_kernel", "d_conv"])?.unwrap_or(4);
    let expand = f.uint(&["expand"])?.unwrap_or(2);
    let (inner, dt_rank, groups) = if kind == SsmKind::Mamba {
        let inner = match f.uint(&["intermediate_size", "d_inner"])? {
            Some(v) if v > 0 => v,
            _ => expand.saturating_mul(hidden),
        };
        // "auto" (HF's default) is ceil(hidden / 16), as the model computes it.
        let dt_rank = match f.map.get("time_step_rank") {
            Some(Value::String(s)) if s == "auto" => hidden.div_ceil(16),
            Some(Value::Null) | None => hidden.div_ceil(16),
            Some(_) => f.req(&["time_step_rank"])?,
        };
        (inner, dt_rank, 0)
    } else {
        let inner = expand.saturating_mul(hidden);
        let head_dim = f
            .uint(&["head_dim", "headdim"])?
            .filter(|&d| d > 0)
            .unwrap_or(64);
        let heads = f
            .uint(&["num_heads"])?
            .filter(|&n| n > 0)
            .unwrap_or(inner / head_dim);
        (inner, heads, f.uint(&["n_groups", "ngroups"])?.unwrap_or(1))
    };
    let mut arch = super::arch::llama_like(name, hidden, 0, layers, 0, 0, vocab);
    arch.family = if kind == SsmKind::Mamba {
        "mamba"
    } else {
        "mamba2"
    }
    .into();
    arch.ssm = Some(super::arch::Ssm {
        kind,
        conv_kernel,
        inner,
        state,
        dt_rank,
        groups,
        conv_bias: f.boolean("use_conv_bias").unwrap_or(true),
        norm: kind != SsmKind::Mamba,
        ranks: [0; 4],
    });
    arch.head_dim = 0;
    arch.intermediate_size = 0;
    // One RMSNorm before each mixer; no second (there is no separate MLP).
    arch.norms_per_layer = 1;
    arch.tie_word_embeddings = f.boolean("tie_word_embeddings").unwrap_or(true);
    Ok(arch)
}

/// Longest value from a file echoed in a message; real `model_type`s are under 32 characters.
const MAX_ECHOED_CHARS: usize = 64;

/// `text` as a message quotes it: at most [`MAX_ECHOED_CHARS`] characters, the rest named by
/// its length, so a hostile file cannot make one error line megabytes long.
pub(crate) fn quoted(text: &str) -> String {
    match text.char_indices().nth(MAX_ECHOED_CHARS) {
        None => text.to_string(),
        Some((cut, _)) => format!("{}… ({} characters)", &text[..cut], text.chars().count()),
    }
}

/// Reads a config.json. Returns the architecture and warnings (e.g. an unknown `model_type`
/// read with the generic decoder formula).
pub fn read_config(path: &Path) -> Result<(ModelArch, Vec<ModelWarning>), ModelError> {
    read_config_with_weights(path).map(|(arch, warnings, _)| (arch, warnings))
}

/// [`read_config`], plus the checkpoint's weight bytes when its `quantization_config` fixes
/// them (MXFP4 experts: 17 bytes per 32 weights, everything else bf16).
pub fn read_config_with_weights(
    path: &Path,
) -> Result<(ModelArch, Vec<ModelWarning>, Option<FileWeights>), ModelError> {
    let text = crate::input::read_bounded(path, MAX_CONFIG_BYTES, "a config.json")?;
    let value: Value = serde_json::from_slice(&text).map_err(|e| ModelError::Json {
        path: path.into(),
        why: e.to_string(),
    })?;
    let name = path
        .parent()
        .and_then(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "config.json".into());
    let (arch, warnings) = parse_config(path, &name, &value)?;
    let weights = config_weights(path, &value, &arch)?;
    Ok((arch, warnings, weights))
}

/// Weight bytes a `quantization_config` implies (see [`super::quantized`]). Only methods whose
/// layout the config fixes are counted; others leave the weights to `--dtype`.
pub(crate) fn config_weights(
    path: &Path,
    value: &Value,
    arch: &ModelArch,
) -> Result<Option<FileWeights>, ModelError> {
    let q = match value.get("quantization_config") {
        None | Some(Value::Null) => return Ok(None),
        Some(q) => q,
    };
    let bad = |(field, why)| ModelError::BadField {
        path: path.into(),
        field,
        why,
    };
    match super::quantized::method(q).map_err(bad)?.as_str() {
        "mxfp4" => {
            let m = arch.moe.as_ref().ok_or_else(|| ModelError::BadField {
                path: path.into(),
                field: "quantization_config.quant_method".into(),
                why: "is mxfp4, which quantizes MoE experts, but the model has none".into(),
            })?;
            let matrices = match arch.mlp {
                Mlp::Gated => 3,
                Mlp::Plain => 2,
            };
            let expert_weights = u128::from(arch.moe_layers())
                * u128::from(m.experts)
                * matrices
                * u128::from(arch.hidden_size)
                * u128::from(m.expert_intermediate);
            let total = u128::from(arch.params().total);
            let rest = total.saturating_sub(expert_weights);
            let bytes = expert_weights.div_ceil(32) * 17 + rest * 2;
            Ok(Some(FileWeights {
                parameters: arch.params().total,
                bytes: u64::try_from(bytes).unwrap_or(u64::MAX),
            }))
        }
        _ => match super::quantized::scheme(q).map_err(bad)? {
            Some(scheme) => {
                let kept = super::quantized::kept(q);
                let bytes = super::quantized::checkpoint_bytes(arch, scheme, &kept);
                Ok(Some(FileWeights {
                    parameters: arch.params().total,
                    bytes: u64::try_from(bytes).unwrap_or(u64::MAX),
                }))
            }
            None => Ok(None),
        },
    }
}

/// HF `layer_types`, as which layers are of `kind`.
/// A Mamba-2 mixer as Granite-4.0-H and Falcon-H1 write it: `mamba_`-prefixed keys, with
/// their defaults.
fn mamba_prefixed_ssm(
    f: &mut Fields<'_>,
    inner: u64,
    norm: bool,
) -> Result<super::arch::Ssm, ModelError> {
    Ok(super::arch::Ssm {
        kind: SsmKind::Mamba2,
        conv_kernel: f.uint(&["mamba_d_conv"])?.unwrap_or(4),
        inner,
        state: f.uint(&["mamba_d_state"])?.unwrap_or(256),
        dt_rank: f.uint(&["mamba_n_heads"])?.unwrap_or(128),
        groups: f.uint(&["mamba_n_groups"])?.unwrap_or(1),
        conv_bias: f.boolean("mamba_conv_bias").unwrap_or(true),
        norm,
        ranks: [0; 4],
    })
}

fn layer_types(map: &Map<String, Value>, kind: &str) -> Option<Vec<bool>> {
    let types = map.get("layer_types")?.as_array()?;
    Some(types.iter().map(|t| t.as_str() == Some(kind)).collect())
}

/// Parses an already decoded config.json.
pub fn parse_config(
    path: &Path,
    name: &str,
    value: &Value,
) -> Result<(ModelArch, Vec<ModelWarning>), ModelError> {
    let map = value.as_object().ok_or_else(|| ModelError::Json {
        path: path.into(),
        why: "the top level is not an object".into(),
    })?;
    // Multimodal configs (Gemma 3, Llama 4) nest the language model; the vision tower is not
    // counted, and the user is told so.
    let vision = map.contains_key("vision_config");
    let map = match map.get("text_config").and_then(Value::as_object) {
        Some(text) if !text.contains_key("model_type") || text.get("hidden_size").is_some() => text,
        _ => map,
    };
    let family = map
        .get("model_type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let mut f = Fields {
        path,
        map,
        used: Vec::new(),
    };
    let mut warnings = Vec::new();
    if vision {
        warnings.push(ModelWarning::VisionTowerNotCounted);
    }

    let hidden = f.req(&["hidden_size", "n_embd", "d_model"])?;
    let layers = f.req(&["num_hidden_layers", "n_layer", "num_layers"])?;
    if let Some(kind) = match family.as_str() {
        "mamba" => Some(SsmKind::Mamba),
        "mamba2" => Some(SsmKind::Mamba2),
        _ => None,
    } {
        let arch = state_space(&mut f, name, hidden, layers, kind)?;
        return plausible(path, arch).map(|arch| (arch, warnings));
    }
    let heads = f.req(&["num_attention_heads", "n_head"])?;
    let vocab = f.req(&["vocab_size"])?;
    let intermediate = match f.uint(&["intermediate_size", "n_inner", "ffn_hidden_size"])? {
        Some(v) if v > 0 => v,
        _ => hidden.saturating_mul(4),
    };
    let mut kv_heads = f
        .uint(&["num_key_value_heads", "num_kv_heads", "n_head_kv"])?
        .unwrap_or(heads);
    if family == "falcon"
        && f.boolean("multi_query") == Some(true)
        && f.boolean("new_decoder_architecture") != Some(true)
    {
        kv_heads = 1;
    }
    let head_dim = f
        .uint(&["head_dim"])?
        .filter(|&d| d > 0)
        .unwrap_or(hidden / heads);
    if kv_heads == 0 || heads % kv_heads != 0 {
        return Err(ModelError::BadField {
            path: path.into(),
            field: "num_key_value_heads".into(),
            why: format!("is {kv_heads}, which does not divide num_attention_heads {heads}"),
        });
    }
    let tie_default = matches!(
        family.as_str(),
        "gemma" | "gemma2" | "gemma3" | "gemma3_text" | "falcon"
    );
    let tie = f.boolean("tie_word_embeddings").unwrap_or(tie_default);
    let attention_bias = f.boolean("attention_bias");
    let mut arch =
        super::arch::llama_like(name, hidden, intermediate, layers, heads, kv_heads, vocab);
    arch.family = if family.is_empty() {
        "unknown".into()
    } else {
        family.clone()
    };
    arch.head_dim = head_dim;
    arch.tie_word_embeddings = tie;
    arch.max_position_embeddings = f.uint(&["max_position_embeddings", "n_positions"])?;
    arch.mlp_bias = f.boolean("mlp_bias").unwrap_or(false);
    arch.attention = Attention::Standard {
        qkv_bias: attention_bias.unwrap_or(false),
        o_bias: attention_bias.unwrap_or(false),
        qk_norm: false,
    };

    // Nemotron-H's E blocks: whether the pattern has any (experts then required), or `None`
    // for other families.
    let mut expert_blocks = None;
    match family.as_str() {
        "llama" | "mistral" | "mixtral" => {}
        // Phi-3's gate_up_proj: llama.cpp keeps the fused output beside the activation.
        "phi3" => arch.fused_projections = true,
        "qwen2" | "qwen2_moe" => {
            arch.attention = Attention::Standard {
                qkv_bias: true,
                o_bias: false,
                qk_norm: false,
            };
        }
        "llama4" | "llama4_text" => {
            // Dense layers use intermediate_size_mlp; experts (and the one shared expert) use
            // intermediate_size. The query/key norm is a weightless L2 norm.
            if let Some(dense) = f.uint(&["intermediate_size_mlp"])? {
                arch.intermediate_size = dense;
            }
            // Chunked attention on the RoPE layers (3 of every 4), a cache of one chunk.
            if let Some(chunk) = f.uint(&["attention_chunk_size"])?.filter(|&c| c > 0) {
                arch.sliding_window = Some(SlidingWindow {
                    window: chunk,
                    layers: SlidingLayers::AllButEvery(4),
                });
            }
        }
        "gpt_oss" => {
            arch.attention = Attention::Standard {
                qkv_bias: attention_bias.unwrap_or(true),
                o_bias: attention_bias.unwrap_or(true),
                qk_norm: false,
            };
            arch.attention_sinks = true;
            // Expert gate/up and down projections carry biases; every layer is MoE.
            arch.mlp_bias = true;
            arch.active_without_embedding = true;
        }
        "qwen3" | "qwen3_moe" => {
            arch.attention = Attention::Standard {
                qkv_bias: attention_bias.unwrap_or(false),
                o_bias: false,
                qk_norm: true,
            };
        }
        "qwen3_next" => {
            // Gated DeltaNet in three of every four layers (`layer_types` when listed), gated
            // attention with q/k norms in the rest.
            arch.attention = Attention::Standard {
                qkv_bias: attention_bias.unwrap_or(false),
                o_bias: false,
                qk_norm: true,
            };
            arch.attn_output_gate = true;
            let key_heads = f.req(&["linear_num_key_heads"])?;
            let value_heads = f.req(&["linear_num_value_heads"])?;
            let key_dim = f.req(&["linear_key_head_dim"])?;
            let value_dim = f.req(&["linear_value_head_dim"])?;
            arch.ssm = Some(super::arch::Ssm {
                kind: SsmKind::GatedDeltaNet,
                conv_kernel: f.uint(&["linear_conv_kernel_dim"])?.unwrap_or(4),
                inner: value_heads.saturating_mul(value_dim),
                state: key_dim,
                dt_rank: value_heads,
                groups: key_heads,
                conv_bias: false,
                norm: true,
                ranks: [0; 4],
            });
            arch.recurrent_layers = match layer_types(map, "linear_attention") {
                Some(list) => SlidingLayers::Listed(list),
                None => SlidingLayers::AllButEvery(
                    f.uint(&["full_attention_interval"])?.unwrap_or(4).max(1),
                ),
            };
        }
        "jamba" => {
            // Jamba: Mamba mixers (with Δ/B/C norms) but in every attn_layer_period-th layer
            // from attn_layer_offset; experts every expert_layer_period-th from its offset.
            let inner = f
                .uint(&["mamba_expand"])?
                .unwrap_or(2)
                .saturating_mul(hidden);
            let dt_rank = match f.map.get("mamba_dt_rank") {
                Some(Value::String(s)) if s == "auto" => hidden.div_ceil(16),
                Some(Value::Null) | None => hidden.div_ceil(16),
                Some(_) => f.req(&["mamba_dt_rank"])?,
            };
            arch.ssm = Some(super::arch::Ssm {
                kind: SsmKind::JambaMamba,
                conv_kernel: f.uint(&["mamba_d_conv"])?.unwrap_or(4),
                inner,
                state: f.uint(&["mamba_d_state"])?.unwrap_or(16),
                dt_rank,
                groups: 0,
                conv_bias: true,
                norm: true,
                ranks: [0; 4],
            });
            let period = f.uint(&["attn_layer_period"])?.unwrap_or(8).max(1);
            let offset = f.uint(&["attn_layer_offset"])?.unwrap_or(4);
            arch.recurrent_layers = SlidingLayers::Listed(
                (0..layers.min(1 << 16))
                    .map(|i| i % period != offset)
                    .collect(),
            );
        }
        "granitemoehybrid" => {
            // Granite-4.0-H: Mamba-2 mixers, attention in the layers `layer_types` names, a
            // shared MLP in every layer (the only MLP when there are no experts).
            let inner = f
                .uint(&["mamba_expand"])?
                .unwrap_or(2)
                .saturating_mul(hidden);
            arch.ssm = Some(mamba_prefixed_ssm(&mut f, inner, true)?);
            arch.recurrent_layers = match layer_types(map, "mamba") {
                Some(list) => SlidingLayers::Listed(list),
                None => SlidingLayers::All,
            };
            if f.uint(&["num_local_experts"])?.unwrap_or(0) == 0 {
                arch.intermediate_size = f.req(&["shared_intermediate_size"])?;
            }
            // Each multiplier the converter writes (any but 0) is an op of its own in llama.cpp.
            let mut multiplier = |name: &str| {
                f.used.push(name.to_string());
                map.get(name)
                    .and_then(Value::as_f64)
                    .is_some_and(|m| m != 0.0)
            };
            arch.granite_scales = GraniteScales {
                embedding: multiplier("embedding_multiplier"),
                residual: multiplier("residual_multiplier"),
                logits: multiplier("logits_scaling"),
            };
            f.used.push("position_embedding_type".into());
            arch.no_rope =
                map.get("position_embedding_type").and_then(Value::as_str) == Some("nope");
        }
        "nemotron_h" => {
            // Nemotron-H: one block per layer as `hybrid_override_pattern` spells it (M a
            // Mamba-2 mixer, * attention, - a squared-ReLU MLP, E squared-ReLU experts), one
            // norm before each.
            let pattern = match map.get("hybrid_override_pattern") {
                Some(Value::String(p)) => p.clone(),
                _ => {
                    return Err(ModelError::MissingField {
                        path: path.into(),
                        field: "hybrid_override_pattern".into(),
                    })
                }
            };
            f.used.push("hybrid_override_pattern".into());
            let bad = |why: String| ModelError::BadField {
                path: path.into(),
                field: "hybrid_override_pattern".into(),
                why,
            };
            if pattern.chars().count() as u64 != layers {
                return Err(bad(format!(
                    "has {} blocks for {layers} layers (num_hidden_layers)",
                    pattern.chars().count()
                )));
            }
            if let Some(c) = pattern
                .chars()
                .find(|c| !matches!(c, 'M' | '*' | '-' | 'E'))
            {
                return Err(bad(format!(
                    "has '{}', a block gpumem has no rules for (M: Mamba-2, *: attention, -: \
                     MLP, E: experts)",
                    c.escape_default()
                )));
            }
            if pattern.contains('-') && pattern.contains('E') {
                return Err(bad(
                    "mixes - (MLP) and E (experts) blocks; llama.cpp gives every feed-forward \
                     block experts or none"
                        .into(),
                ));
            }
            expert_blocks = Some(pattern.contains('E'));
            if !pattern.contains(['M', '*']) {
                return Err(bad(
                    "has no M or * block: every layer an MLP, nothing attends or mixes".into(),
                ));
            }
            let heads = f.uint(&["mamba_num_heads"])?.unwrap_or(128);
            arch.ssm = Some(super::arch::Ssm {
                kind: SsmKind::Mamba2,
                conv_kernel: f.uint(&["conv_kernel", "mamba_d_conv"])?.unwrap_or(4),
                inner: heads.saturating_mul(f.uint(&["mamba_head_dim"])?.unwrap_or(64)),
                state: f.uint(&["ssm_state_size", "mamba_d_state"])?.unwrap_or(128),
                dt_rank: heads,
                groups: f
                    .uint(&["n_groups", "mamba_n_groups", "mamba_num_groups"])?
                    .unwrap_or(8),
                conv_bias: f.boolean("use_conv_bias").unwrap_or(true),
                norm: true,
                ranks: [0; 4],
            });
            let blocks: Vec<char> = pattern.chars().collect();
            arch.recurrent_layers =
                SlidingLayers::Listed(blocks.iter().map(|&c| c == 'M').collect());
            let mlp: Vec<bool> = blocks.iter().map(|&c| c == '-' || c == 'E').collect();
            arch.ffn_blocks_alone = true;
            arch.ffn_layers = SlidingLayers::Listed(mlp);
            arch.mlp = Mlp::Plain;
            arch.norms_per_layer = 1;
        }
        "falcon_h1" => {
            // Falcon-H1: attention and a Mamba-2 mixer side by side in every layer (their
            // outputs added), then a gated MLP. The mixer's gated norm only with mamba_rms_norm.
            let inner = match f.uint(&["mamba_d_ssm"])? {
                Some(inner) => inner,
                None => f
                    .uint(&["mamba_expand"])?
                    .unwrap_or(2)
                    .saturating_mul(hidden),
            };
            let norm = f.boolean("mamba_rms_norm").unwrap_or(false);
            arch.ssm = Some(mamba_prefixed_ssm(&mut f, inner, norm)?);
            arch.recurrent_layers = SlidingLayers::All;
            arch.parallel_attention = true;
            if f.boolean("projectors_bias") == Some(true) {
                arch.attention = Attention::Standard {
                    qkv_bias: true,
                    o_bias: true,
                    qk_norm: false,
                };
            }
        }
        "gemma" => arch.query_prescaled = true,
        "gemma2" => {
            arch.norms_per_layer = 4;
            arch.query_prescaled = true;
        }
        "gemma3" | "gemma3_text" => {
            arch.norms_per_layer = 4;
            arch.query_prescaled = true;
            arch.attention = Attention::Standard {
                qkv_bias: false,
                o_bias: false,
                qk_norm: true,
            };
        }
        "falcon" => {
            let bias = f.boolean("bias").unwrap_or(false);
            arch.attention = Attention::Standard {
                qkv_bias: bias,
                o_bias: bias,
                qk_norm: false,
            };
            arch.mlp = Mlp::Plain;
            arch.mlp_bias = bias;
            arch.norm = Norm::Layer;
            let new_arch = f.boolean("new_decoder_architecture") == Some(true);
            let parallel = f.boolean("parallel_attn").unwrap_or(true);
            // llama.cpp's Falcon graph has only the parallel layout.
            arch.parallel_attention = new_arch || parallel;
            arch.norms_per_layer = if new_arch {
                2
            } else if parallel {
                1
            } else {
                2
            };
            if f.uint(&["ffn_hidden_size"])?.is_none() {
                arch.intermediate_size = hidden.saturating_mul(4);
            }
        }
        "gpt_neox" => {
            arch.attention = Attention::Standard {
                qkv_bias: true,
                o_bias: true,
                qk_norm: false,
            };
            arch.mlp = Mlp::Plain;
            arch.mlp_bias = true;
            arch.norm = Norm::Layer;
            arch.parallel_attention = f.boolean("use_parallel_residual").unwrap_or(true);
        }
        "glm4_moe" => {
            // GLM-4.5: biased q/k/v (not o), optional q/k norms, a DeepSeek-V3-style MoE with a
            // routing bias after first_k_dense_replace dense layers.
            arch.attention = Attention::Standard {
                qkv_bias: attention_bias.unwrap_or(true),
                o_bias: false,
                qk_norm: f.boolean("use_qk_norm").unwrap_or(false),
            };
        }
        // Kimi-K2 is DeepSeek-V3's architecture under another name.
        "deepseek_v2" | "deepseek_v3" | "kimi_k2" => {
            let kv_lora_rank = f.req(&["kv_lora_rank"])?;
            let qk_rope_head_dim = f.req(&["qk_rope_head_dim"])?;
            let qk_nope_head_dim = f.req(&["qk_nope_head_dim"])?;
            let v_head_dim = f.req(&["v_head_dim"])?;
            let q_lora_rank = f.uint(&["q_lora_rank"])?;
            arch.head_dim = qk_nope_head_dim.saturating_add(qk_rope_head_dim);
            arch.num_kv_heads = heads;
            arch.attention = Attention::Mla {
                q_lora_rank,
                kv_lora_rank,
                qk_nope_head_dim,
                qk_rope_head_dim,
                v_head_dim,
            };
        }
        other => {
            warnings.push(ModelWarning::UnknownModelType {
                model_type: quoted(other),
                fields_used: f.used.clone(),
            });
        }
    }

    // Mixture of experts, whatever the family calls it.
    let experts = f
        .uint(&["num_local_experts", "n_routed_experts", "num_experts"])?
        .unwrap_or(0);
    if experts > 0 {
        let per_token = f.req(&["num_experts_per_tok", "num_experts_per_token"])?;
        let expert_intermediate = f.uint(&["moe_intermediate_size"])?.unwrap_or(intermediate);
        let shared = match family.as_str() {
            "qwen2_moe" | "qwen3_next" => {
                f.uint(&["shared_expert_intermediate_size"])?.unwrap_or(0)
            }
            "granitemoehybrid" => f.uint(&["shared_intermediate_size"])?.unwrap_or(0),
            "nemotron_h" => match f.uint(&["moe_shared_expert_intermediate_size"])? {
                Some(width) => width,
                None => f
                    .uint(&["n_shared_experts"])?
                    .unwrap_or(0)
                    .saturating_mul(expert_intermediate),
            },
            "llama4" | "llama4_text" => expert_intermediate,
            _ => f
                .uint(&["n_shared_experts"])?
                .unwrap_or(0)
                .saturating_mul(expert_intermediate),
        };
        let freq = f
            .uint(&[
                "moe_layer_freq",
                "decoder_sparse_step",
                "interleave_moe_layer_step",
            ])?
            .unwrap_or(1)
            .max(1);
        // Llama 4 and Qwen2/3-MoE count MoE layers from the end of each step ((i + 1) % step
        // == 0); DeepSeek's first_k_dense_replace counts dense layers from the start.
        let freq = match family.as_str() {
            "jamba" => f.uint(&["expert_layer_period"])?.unwrap_or(2).max(1),
            _ => freq,
        };
        let first_dense = match f.uint(&["first_k_dense_replace", "expert_layer_offset"])? {
            Some(k) => k,
            None if matches!(
                family.as_str(),
                "llama4" | "llama4_text" | "qwen2_moe" | "qwen3_moe" | "qwen3_next"
            ) =>
            {
                freq - 1
            }
            None => 0,
        };
        arch.moe = Some(Moe {
            experts,
            experts_per_token: per_token,
            expert_intermediate,
            shared_intermediate: shared,
            first_dense_layers: first_dense,
            layer_freq: freq,
            router_bias: matches!(
                family.as_str(),
                "deepseek_v3" | "kimi_k2" | "glm4_moe" | "gpt_oss" | "nemotron_h"
            ),
            shared_gate: matches!(family.as_str(), "qwen2_moe" | "qwen3_next") && shared > 0,
            scaled_weights: f
                .map
                .get("routed_scaling_factor")
                .and_then(Value::as_f64)
                .is_some_and(|v| v != 0.0 && v != 1.0),
            groups: (
                f.map.get("n_group").and_then(Value::as_u64).unwrap_or(0),
                f.map.get("topk_group").and_then(Value::as_u64).unwrap_or(0),
            ),
        });
    }

    match expert_blocks {
        // Experts only where the pattern has E blocks, and E blocks only with experts.
        Some(false) => arch.moe = None,
        Some(true) if arch.moe.is_none() => {
            return Err(ModelError::MissingField {
                path: path.into(),
                field: "n_routed_experts".into(),
            })
        }
        _ => {}
    }

    // Sliding windows: explicit layer_types win; otherwise the family's rule. llama.cpp builds
    // Mistral (as `llama`) and Qwen2/Qwen3 without any window, caching the whole context, so
    // their `sliding_window` / `use_sliding_window` are not applied: counting the window would
    // put the KV cache below what llama.cpp allocates (Mistral-7B-v0.1 at 32768 tokens: 576 MiB
    // counted, 4 GiB allocated).
    let window = f.uint(&["sliding_window"])?.filter(|&w| w > 0);
    if let Some(window) = window {
        let listed = layer_types(map, "sliding_attention");
        let layers = match (listed, family.as_str()) {
            (
                _,
                "llama" | "mistral" | "mixtral" | "qwen2" | "qwen2_moe" | "qwen3" | "qwen3_moe",
            ) => None,
            (Some(list), _) => Some(SlidingLayers::Listed(list)),
            (None, "gemma2") => Some(SlidingLayers::Even),
            (None, "gemma3" | "gemma3_text") => Some(SlidingLayers::AllButEvery(
                f.uint(&["sliding_window_pattern"])?.unwrap_or(6),
            )),
            _ => None,
        };
        if let Some(layers) = layers {
            arch.sliding_window = Some(SlidingWindow { window, layers });
        }
    }
    plausible(path, arch).map(|arch| (arch, warnings))
}

/// The architecture, once it passes [`ModelArch::check_plausible`], or the field that fails.
fn plausible(path: &Path, arch: ModelArch) -> Result<ModelArch, ModelError> {
    arch.check_plausible()
        .map_err(|(field, why)| ModelError::BadField {
            path: path.into(),
            field: config_key(&arch.family, field).into(),
            why,
        })?;
    Ok(arch)
}

/// The config.json key a shape field came from in `family` (the recurrent mixers' fields are
/// named differently in each; the inner width of Qwen3-Next and Granite is derived, so the
/// factor the user wrote is named).
fn config_key(family: &str, field: ShapeField) -> &'static str {
    use ShapeField::*;
    match (family, field) {
        ("qwen3_next", SsmConvKernel) => "linear_conv_kernel_dim",
        ("qwen3_next", SsmInner) => "linear_value_head_dim",
        ("qwen3_next", SsmState) => "linear_key_head_dim",
        ("qwen3_next", SsmDtRank) => "linear_num_value_heads",
        ("qwen3_next", SsmGroups) => "linear_num_key_heads",
        ("granitemoehybrid" | "jamba", SsmConvKernel) => "mamba_d_conv",
        ("granitemoehybrid" | "jamba", SsmInner) => "mamba_expand",
        ("granitemoehybrid" | "jamba", SsmState) => "mamba_d_state",
        ("granitemoehybrid", SsmDtRank) => "mamba_n_heads",
        ("jamba", SsmDtRank) => "mamba_dt_rank",
        ("granitemoehybrid", SsmGroups) => "mamba_n_groups",
        ("mamba2", SsmDtRank) => "num_heads",
        ("falcon_h1", SsmConvKernel) => "mamba_d_conv",
        ("falcon_h1", SsmInner) => "mamba_d_ssm",
        ("falcon_h1", SsmState) => "mamba_d_state",
        ("falcon_h1", SsmDtRank) => "mamba_n_heads",
        ("falcon_h1", SsmGroups) => "mamba_n_groups",
        ("nemotron_h", SsmConvKernel) => "conv_kernel",
        ("nemotron_h", SsmInner) => "mamba_head_dim",
        ("nemotron_h", SsmState) => "ssm_state_size",
        ("nemotron_h", SsmDtRank) => "mamba_num_heads",
        ("nemotron_h", SsmGroups) => "n_groups",
        _ => field.config_name(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<(ModelArch, Vec<ModelWarning>), ModelError> {
        parse_config(Path::new("config.json"), "test", &v)
    }

    #[test]
    fn mistral_config_json() {
        // mistralai/Mistral-7B-v0.1 config.json, verbatim fields.
        let (arch, warnings) = parse(json!({
            "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
            "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
            "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
            "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
            "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096,
            "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.34.0.dev0",
            "use_cache": true, "vocab_size": 32000
        }))
        .unwrap();
        assert!(warnings.is_empty());
        assert_eq!(arch.params().total, 7_241_732_096);
        assert_eq!(
            arch.kv_elements_per_token_layer() * arch.num_layers * 2,
            131_072
        );
        // llama.cpp caches the whole context for Mistral: its window is not applied.
        assert!(!arch.is_sliding_layer(5));
        assert!(arch.sliding_window.is_none());
    }

    #[test]
    fn unknown_family_warns_with_fields() {
        let (arch, warnings) = parse(json!({
            "model_type": "brand_new", "hidden_size": 1024, "num_hidden_layers": 2,
            "num_attention_heads": 8, "vocab_size": 1000, "intermediate_size": 4096
        }))
        .unwrap();
        assert_eq!(arch.family, "brand_new");
        let ModelWarning::UnknownModelType { fields_used, .. } = &warnings[0] else {
            panic!("{warnings:?}")
        };
        assert_eq!(
            fields_used[..5],
            [
                "hidden_size",
                "num_hidden_layers",
                "num_attention_heads",
                "vocab_size",
                "intermediate_size"
            ]
        );
    }

    #[test]
    fn bad_fields_are_named() {
        let err = parse(json!({"hidden_size": 1024})).unwrap_err();
        assert_eq!(
            err.to_string(),
            "config.json: missing field 'num_hidden_layers'"
        );
        let err = parse(json!({"hidden_size": "big", "num_hidden_layers": 2})).unwrap_err();
        assert_eq!(
            err.to_string(),
            "config.json: field 'hidden_size' is \"big\", expected a non-negative integer"
        );
        let err = parse(json!({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 3, "vocab_size": 10})).unwrap_err();
        assert!(err.to_string().contains("does not divide"));
        assert!(parse(json!([1, 2])).is_err());
    }

    #[test]
    fn qwen3_next_layers_follow_layer_types_and_missing_fields_are_named() {
        let config = |extra: Value| {
            let mut v = json!({
                "model_type": "qwen3_next", "hidden_size": 256, "num_hidden_layers": 4,
                "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
                "vocab_size": 1000, "intermediate_size": 512, "linear_num_key_heads": 2,
                "linear_num_value_heads": 4, "linear_key_head_dim": 32,
                "linear_value_head_dim": 32, "num_experts": 8, "num_experts_per_tok": 2,
                "moe_intermediate_size": 64, "shared_expert_intermediate_size": 64
            });
            v.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            v
        };
        let (arch, _) = parse(config(json!({}))).unwrap();
        assert_eq!(arch.recurrent_layer_count(), 3);
        assert!(!arch.is_recurrent_layer(3));
        let listed = json!({"layer_types": ["full_attention", "linear_attention",
                                            "full_attention", "linear_attention"]});
        let (arch, _) = parse(config(listed)).unwrap();
        assert_eq!(arch.attention_layer_count(), 2);
        assert!(arch.is_recurrent_layer(1) && !arch.is_recurrent_layer(0));
        let mut broken = config(json!({}));
        broken
            .as_object_mut()
            .unwrap()
            .remove("linear_num_value_heads");
        assert_eq!(
            parse(broken).unwrap_err().to_string(),
            "config.json: missing field 'linear_num_value_heads'"
        );
    }

    #[test]
    fn glm4_moe_biases_q_k_v_and_routes_with_a_bias() {
        let (arch, warnings) = parse(json!({
            "model_type": "glm4_moe", "hidden_size": 256, "intermediate_size": 512,
            "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 64, "attention_bias": true, "use_qk_norm": false,
            "n_routed_experts": 8, "n_shared_experts": 1, "num_experts_per_tok": 2,
            "moe_intermediate_size": 128, "first_k_dense_replace": 1, "vocab_size": 1000
        }))
        .unwrap();
        assert!(warnings.is_empty());
        // Embeddings, final norm; per layer 2 norms, q/k/v/o with q/k/v biases.
        let attention = 256 * 256 * 2 + 2 * 256 * 128 + 256 + 2 * 128;
        let dense = 3 * 256 * 512;
        let moe = 8 * 3 * 256 * 128 + 3 * 256 * 128 + 8 * 256 + 8;
        let expected = 2 * 1000 * 256 + 256 + 3 * (2 * 256 + attention) + dense + 2 * moe;
        assert_eq!(arch.params().total, expected);
    }

    #[test]
    fn recurrent_fields_are_named_as_each_family_writes_them() {
        let err = parse(json!({
            "model_type": "granitemoehybrid", "hidden_size": 256, "num_hidden_layers": 2,
            "num_attention_heads": 4, "vocab_size": 100, "shared_intermediate_size": 64,
            "num_local_experts": 0, "mamba_n_groups": 100000
        }))
        .unwrap_err();
        assert!(err.to_string().contains("field 'mamba_n_groups'"), "{err}");
        let err = parse(json!({
            "model_type": "qwen3_next", "hidden_size": 256, "num_hidden_layers": 4,
            "num_attention_heads": 4, "vocab_size": 100, "linear_num_key_heads": 2,
            "linear_num_value_heads": 4, "linear_key_head_dim": 100000,
            "linear_value_head_dim": 32
        }))
        .unwrap_err();
        assert!(
            err.to_string().contains("field 'linear_key_head_dim'"),
            "{err}"
        );
    }

    #[test]
    fn nemotron_h_layers_are_one_block_each() {
        let config = |pattern: &str| {
            json!({
                "model_type": "nemotron_h", "hidden_size": 256, "num_hidden_layers": 4,
                "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
                "intermediate_size": 512, "vocab_size": 1000, "tie_word_embeddings": false,
                "hybrid_override_pattern": pattern, "mamba_num_heads": 8,
                "mamba_head_dim": 32, "n_groups": 2, "ssm_state_size": 16, "conv_kernel": 4
            })
        };
        let (arch, warnings) = parse(config("M-*-")).unwrap();
        assert!(warnings.is_empty());
        assert_eq!(
            (arch.recurrent_layer_count(), arch.attention_layer_count()),
            (1, 1)
        );
        assert_eq!(arch.ffn_layer_count(), 2);
        // Embeddings and output, final norm; one norm per layer; the Mamba-2 mixer (in_proj to
        // z, x, B, C and Δ; the convolution with bias; Δ bias, A, D; the gated norm; out_proj),
        // q/k/v/o, and two squared-ReLU MLPs of up and down projections.
        let inner = 8 * 32;
        let conv = inner + 2 * 2 * 16;
        let mixer = 256 * (inner + conv + 8) + conv * 4 + conv + 3 * 8 + inner + inner * 256;
        let attention = 2 * 256 * 256 + 2 * 256 * 128;
        let mlp = 2 * 256 * 512;
        let expected = 2 * 1000 * 256 + 256 + 4 * 256 + mixer + attention + 2 * mlp;
        assert_eq!(arch.params().total, expected);
        // Only the attention block caches K and V.
        assert_eq!(arch.kv_elements(100), 2 * 2 * 64 * 100);

        let err = parse(config("M-*")).unwrap_err().to_string();
        assert_eq!(
            err,
            "config.json: field 'hybrid_override_pattern' has 3 blocks for 4 layers \
             (num_hidden_layers)"
        );
        let err = parse(config("----")).unwrap_err().to_string();
        assert!(err.contains("has no M or * block"), "{err}");
        let err = parse(config("MX*-")).unwrap_err().to_string();
        assert!(
            err.contains("field 'hybrid_override_pattern' has 'X'"),
            "{err}"
        );
        let err = parse(config("ME*-")).unwrap_err().to_string();
        assert!(err.contains("mixes - (MLP) and E (experts)"), "{err}");
        assert_eq!(
            parse(config("ME*E")).unwrap_err().to_string(),
            "config.json: missing field 'n_routed_experts'"
        );
        // E blocks: 8 squared-ReLU experts of 64 (up and down, no gate), 2 routed, one shared
        // expert of 128, a router with a correction bias per expert.
        let mut moe = config("ME*E");
        for (k, v) in [
            ("n_routed_experts", 8),
            ("num_experts_per_tok", 2),
            ("moe_intermediate_size", 64),
            ("moe_shared_expert_intermediate_size", 128),
        ] {
            moe[k] = v.into();
        }
        let (arch, _) = parse(moe).unwrap();
        assert_eq!(arch.moe_layers(), 2);
        let experts = 256 * 8 + 8 + 8 * 2 * 256 * 64 + 2 * 256 * 128;
        let expected_moe = 2 * 1000 * 256 + 256 + 4 * 256 + mixer + attention + 2 * experts;
        assert_eq!(arch.params().total, expected_moe);
        let mut missing = config("M-*-");
        missing
            .as_object_mut()
            .unwrap()
            .remove("hybrid_override_pattern");
        assert_eq!(
            parse(missing).unwrap_err().to_string(),
            "config.json: missing field 'hybrid_override_pattern'"
        );
    }

    #[test]
    fn falcon_h1_attends_beside_its_mixer_in_every_layer() {
        let config = |rms_norm: bool| {
            json!({
                "model_type": "falcon_h1", "hidden_size": 256, "num_hidden_layers": 3,
                "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
                "intermediate_size": 512, "vocab_size": 1000, "mamba_d_ssm": 256,
                "mamba_n_heads": 8, "mamba_n_groups": 1, "mamba_d_state": 16,
                "mamba_d_conv": 4, "mamba_rms_norm": rms_norm
            })
        };
        let (with_norm, warnings) = parse(config(true)).unwrap();
        assert!(warnings.is_empty());
        // Every layer holds a KV cache and a recurrent state.
        assert_eq!(with_norm.attention_layer_count(), 3);
        assert_eq!(with_norm.recurrent_layer_count(), 3);
        assert_eq!(with_norm.kv_elements(100), 3 * 2 * 2 * 64 * 100);
        let conv = 256 + 2 * 16;
        let mixer = 256 * (256 + conv + 8) + conv * 4 + conv + 3 * 8 + 256 + 256 * 256;
        let attention = 2 * 256 * 256 + 2 * 256 * 128;
        let mlp = 3 * 256 * 512;
        let layer = 2 * 256 + mixer + attention + mlp;
        assert_eq!(with_norm.params().total, 2 * 1000 * 256 + 256 + 3 * layer);
        // Without mamba_rms_norm the mixer has no gated norm.
        let (without, _) = parse(config(false)).unwrap();
        assert_eq!(with_norm.params().total - without.params().total, 3 * 256);
    }
}
