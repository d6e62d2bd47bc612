//! Hugging Face `config.json` → [`ModelArch`].

mod defaults;
mod families;
mod fields;
mod language_model;
mod model_type;
mod moe;
mod recurrent;

use std::path::Path;

use serde_json::Value;

use super::arch::{Attention, Mlp, ModelArch, ShapeField, SsmKind};
use super::error::quoted;
use super::error::ModelError;
use super::weights::FileWeights;
use super::ModelWarning;
use crate::model::family::Family;
use fields::Fields;

/// Largest accepted config.json (real ones are a few KiB).
const MAX_CONFIG_BYTES: u64 = 16 << 20;

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
    // A checkpoint's config.json is named for its folder; a config saved under a name of its
    // own (qwen3.5-9b.json) is named for that file.
    let named_file = path
        .file_name()
        .filter(|f| *f != "config.json")
        .and(path.file_stem());
    let name = named_file
        .or_else(|| path.parent().and_then(|p| p.file_name()))
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "config.json".into());
    config_from_bytes(path, &name, &text)
}

/// [`read_config_with_weights`] of a config.json's bytes (read from a file or the Hub), which
/// errors name `path`.
pub(crate) fn config_from_bytes(
    path: &Path,
    name: &str,
    text: &[u8],
) -> Result<(ModelArch, Vec<ModelWarning>, Option<FileWeights>), ModelError> {
    let value: Value = serde_json::from_slice(text).map_err(|e| ModelError::Json {
        path: path.into(),
        why: e.to_string(),
    })?;
    let (arch, warnings) = parse_config(path, name, &value)?;
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
    // Kimi-K3 nests it in the language model's `text_config`.
    let nested = value
        .get("text_config")
        .and_then(|t| t.get("quantization_config"));
    let q = match value.get("quantization_config").or(nested) {
        None | Some(Value::Null) => return Ok(None),
        // DeepSeek-V4's fp8 config covers only part of its checkpoint: its routed experts are
        // the fp4 that `expert_dtype` names.
        Some(q) if arch.deepseek_v4.is_some() => return Ok(deepseek_v4_weights(value, q, arch)),
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

/// DeepSeek-V4's mixed checkpoint, as its config and shards store it: routed experts in fp4
/// (`expert_dtype: fp4`; e2m1 pairs a byte and one ue8m0 byte per 32 inputs), the embeddings
/// and the untied head in bf16, and every other weight counted as fp8 at one byte (its ue8m0
/// 128×128 block scales, one byte per 16,384 weights, and the few bf16/f32 norm and mixing
/// vectors left out: under 0.3 % of the file). Another `expert_dtype`, or none, is left to
/// --dtype.
fn deepseek_v4_weights(value: &Value, q: &Value, arch: &ModelArch) -> Option<FileWeights> {
    let fp4 = value.get("expert_dtype").and_then(Value::as_str) == Some("fp4");
    let fp8 = q.get("quant_method").and_then(Value::as_str) == Some("fp8");
    let m = arch.moe.as_ref().filter(|_| fp4 && fp8)?;
    let (h, n) = (arch.hidden_size, m.expert_intermediate);
    let scheme = super::quantized::Scheme::Fp4 {
        group: 32,
        globals: 0,
    };
    let per_expert = 2 * super::quantized::linear_bytes(scheme, h, n, 1)
        + super::quantized::linear_bytes(scheme, n, h, 1);
    let copies = u128::from(arch.moe_layers()) * u128::from(m.experts);
    let expert_params = copies * 3 * u128::from(h) * u128::from(n);
    let tables = if arch.tie_word_embeddings { 1 } else { 2 };
    let embeddings = tables * u128::from(arch.vocab_size) * u128::from(h);
    let total = u128::from(arch.params().total);
    let rest = total.saturating_sub(expert_params + embeddings);
    let bytes = copies * per_expert + embeddings * 2 + rest;
    Some(FileWeights {
        parameters: arch.params().total,
        bytes: u64::try_from(bytes).unwrap_or(u64::MAX),
    })
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
    // Multimodal configs (Gemma 3, Llama 4, LLaVA, Qwen2.5-VL…) nest the language model; the
    // vision tower is not counted, and the user is told so. Fields the config leaves out take
    // their transformers class's defaults.
    let vision = map.contains_key("vision_config");
    let lm = language_model::resolve(path, map)?;
    let ty = lm.family;
    let mut f = Fields {
        path,
        map: &lm.map,
        used: Vec::new(),
    };
    let mut warnings = Vec::new();
    if vision {
        warnings.push(match super::hf_vision::vision_of(map) {
            Some(super::HfVision::Unprofiled { parameters, .. }) => {
                ModelWarning::TowersNotCounted { parameters }
            }
            _ => ModelWarning::VisionTowerNotCounted,
        });
    }
    let hidden = f.req(&["hidden_size", "n_embd", "d_model"])?;
    let layers = f.req(&["num_hidden_layers", "n_layer", "num_layers"])?;
    let ssm = match ty {
        Family::Mamba => Some(SsmKind::Mamba),
        Family::Mamba2 => Some(SsmKind::Mamba2),
        _ => None,
    };
    if let Some(kind) = ssm {
        let arch = recurrent::state_space(&mut f, name, hidden, layers, kind)?;
        return plausible(path, &ty, arch).map(|arch| (arch, warnings));
    }
    let (mut arch, common) = decoder(&mut f, &ty, name, hidden, layers)?;
    arch.family = if lm.name.is_empty() {
        "unknown".into()
    } else {
        lm.name.clone()
    };
    let expert_blocks = families::apply(&ty, &mut f, &mut arch, &common)?;
    if ty == Family::Other {
        warnings.push(ModelWarning::UnknownModelType {
            model_type: quoted(&lm.model_type),
            fields_used: f.used.clone(),
        });
    }
    arch.moe = moe::experts(&mut f, &ty, common.intermediate)?;
    match expert_blocks {
        // Experts only where the pattern has E blocks, and E blocks only with experts.
        Some(false) => arch.moe = None,
        Some(true) if arch.moe.is_none() => return Err(f.missing("n_routed_experts")),
        _ => {}
    }
    arch.transformers_window = families::transformers_window(&ty, &mut f)?;
    if let Some(window) = families::sliding_window(&ty, &mut f)? {
        arch.sliding_window = Some(window);
    }
    plausible(path, &ty, arch).map(|arch| (arch, warnings))
}

/// The shape every decoder shares: width, layers, heads (grouped or not), vocabulary, the MLP
/// width, tied embeddings, biases; and what the family rules need of it.
fn decoder(
    f: &mut Fields<'_>,
    ty: &Family,
    name: &str,
    hidden: u64,
    layers: u64,
) -> Result<(ModelArch, families::Common), ModelError> {
    let heads = f.req(&["num_attention_heads", "n_head"])?;
    let vocab = f.req(&["vocab_size"])?;
    let intermediate = match f.uint(&["intermediate_size", "n_inner", "ffn_hidden_size"])? {
        Some(v) if v > 0 => v,
        _ => hidden.saturating_mul(4),
    };
    let mut kv_heads = f
        .uint(&["num_key_value_heads", "num_kv_heads", "n_head_kv"])?
        .unwrap_or(heads);
    if *ty == Family::Falcon
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
        return Err(f.bad(
            "num_key_value_heads",
            format!("is {kv_heads}, which does not divide num_attention_heads {heads}"),
        ));
    }
    let tie = f
        .boolean("tie_word_embeddings")
        .unwrap_or(ty.ties_by_default());
    let attention_bias = f.boolean("attention_bias");
    let mut arch =
        super::arch::llama_like(name, hidden, intermediate, layers, heads, kv_heads, vocab);
    arch.head_dim = head_dim;
    arch.tie_word_embeddings = tie;
    arch.max_position_embeddings =
        f.uint(&["max_position_embeddings", "n_positions", "model_max_length"])?;
    arch.rope_linear_factor = rope_linear_factor(f.map);
    arch.mlp_bias = f.boolean("mlp_bias").unwrap_or(false);
    arch.attention = Attention::Standard {
        qkv_bias: attention_bias.unwrap_or(false),
        o_bias: attention_bias.unwrap_or(false),
        qk_norm: false,
    };
    Ok((
        arch,
        families::Common {
            hidden,
            layers,
            heads,
            intermediate,
            attention_bias,
        },
    ))
}

/// The factor of a linearly scaled RoPE: `rope_scaling` with `rope_type` (or the older
/// `type`) `linear`, or transformers 5's `rope_parameters`, flat or per layer type (Gemma 3's
/// `full_attention`). A factor below 2 scales nothing vLLM's cache would show.
#[expect(
    clippy::cast_possible_truncation,
    reason = "a factor of at least 2, rounded: the published ones are small whole numbers"
)]
fn rope_linear_factor(map: &serde_json::Map<String, serde_json::Value>) -> Option<u64> {
    let linear = |v: &serde_json::Value| -> Option<u64> {
        let kind = v.get("rope_type").or_else(|| v.get("type"))?.as_str()?;
        let factor = v.get("factor")?.as_f64()?;
        (kind == "linear" && factor >= 2.0).then(|| factor.round() as u64)
    };
    let params = map.get("rope_parameters");
    map.get("rope_scaling")
        .and_then(linear)
        .or_else(|| params.and_then(linear))
        .or_else(|| params?.get("full_attention").and_then(linear))
}

/// The architecture, once it passes [`ModelArch::check_plausible`], or the field that fails.
fn plausible(path: &Path, ty: &Family, arch: ModelArch) -> Result<ModelArch, ModelError> {
    arch.check_plausible()
        .map_err(|(field, why)| ModelError::BadField {
            path: path.into(),
            field: config_key(ty, field).into(),
            why,
        })?;
    Ok(arch)
}

/// The config.json key a shape field came from in `family` (the recurrent mixers' fields are
/// named differently in each; the inner width of Qwen3-Next and Granite is derived, so the
/// factor the user wrote is named).
fn config_key(ty: &Family, field: ShapeField) -> &'static str {
    use Family as T;
    use ShapeField::*;
    match (ty, field) {
        (T::Qwen3Next | T::Qwen35, SsmConvKernel) => "linear_conv_kernel_dim",
        (T::Qwen3Next | T::Qwen35, SsmInner) => "linear_value_head_dim",
        (T::Qwen3Next | T::Qwen35, SsmState) => "linear_key_head_dim",
        (T::Qwen3Next | T::Qwen35, SsmDtRank) => "linear_num_value_heads",
        (T::Qwen3Next | T::Qwen35, SsmGroups) => "linear_num_key_heads",
        (T::GraniteHybrid | T::Jamba, SsmConvKernel) => "mamba_d_conv",
        (T::GraniteHybrid | T::Jamba, SsmInner) => "mamba_expand",
        (T::GraniteHybrid | T::Jamba, SsmState) => "mamba_d_state",
        (T::GraniteHybrid, SsmDtRank) => "mamba_n_heads",
        (T::Jamba, SsmDtRank) => "mamba_dt_rank",
        (T::GraniteHybrid, SsmGroups) => "mamba_n_groups",
        (T::Mamba2, SsmDtRank) => "num_heads",
        (T::FalconH1, SsmConvKernel) => "mamba_d_conv",
        (T::FalconH1, SsmInner) => "mamba_d_ssm",
        (T::FalconH1, SsmState) => "mamba_d_state",
        (T::FalconH1, SsmDtRank) => "mamba_n_heads",
        (T::FalconH1, SsmGroups) => "mamba_n_groups",
        (T::NemotronH, SsmConvKernel) => "conv_kernel",
        (T::NemotronH, SsmInner) => "mamba_head_dim",
        (T::NemotronH, SsmState) => "ssm_state_size",
        (T::NemotronH, SsmDtRank) => "mamba_num_heads",
        (T::NemotronH, SsmGroups) => "n_groups",
        _ => field.config_name(),
    }
}

#[cfg(test)]
mod tests;
