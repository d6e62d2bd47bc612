//! The recurrent and hybrid families: state-space mixers (Mamba, Mamba-2, Jamba's), Gated
//! DeltaNet (Qwen3-Next), and the hybrids that interleave them with attention (Granite-4.0-H,
//! Nemotron-H, Falcon-H1), each as its config.json writes it.

use serde_json::Value;

use super::fields::Fields;
use crate::model::arch::{Attention, GraniteScales, Mlp, ModelArch, SlidingLayers, Ssm, SsmKind};
use crate::model::error::ModelError;

/// Mamba (HF `MambaConfig`) and Mamba-2 (`Mamba2Config`): every layer a state-space mixer,
/// no attention and no separate MLP; the embeddings tied unless the config says otherwise.
/// Mamba-2's mixer has `num_heads` heads of `head_dim` and `n_groups` B/C groups.
pub(super) fn state_space(
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
        (inner, dt_rank_or_auto(f, "time_step_rank", hidden)?, 0)
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
    let mut arch = crate::model::arch::llama_like(name, hidden, 0, layers, 0, 0, vocab);
    arch.family = if kind == SsmKind::Mamba {
        "mamba"
    } else {
        "mamba2"
    }
    .into();
    arch.ssm = Some(Ssm {
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

/// A Δ rank written as a number or as "auto" (ceil(hidden / 16), as the model computes it).
fn dt_rank_or_auto(f: &mut Fields<'_>, key: &str, hidden: u64) -> Result<u64, ModelError> {
    match f.map.get(key) {
        Some(Value::String(s)) if s == "auto" => Ok(hidden.div_ceil(16)),
        Some(Value::Null) | None => Ok(hidden.div_ceil(16)),
        Some(_) => f.req(&[key]),
    }
}

/// A Mamba-2 mixer as Granite-4.0-H and Falcon-H1 write it: `mamba_`-prefixed keys, with
/// their defaults.
fn mamba_prefixed_ssm(f: &mut Fields<'_>, inner: u64, norm: bool) -> Result<Ssm, ModelError> {
    Ok(Ssm {
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

/// Qwen3-Next: Gated DeltaNet in three of every four layers (`layer_types` when listed), gated
/// attention with q/k norms in the rest.
pub(super) fn qwen3_next(
    f: &mut Fields<'_>,
    arch: &mut ModelArch,
    attention_bias: Option<bool>,
) -> Result<(), ModelError> {
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
    arch.ssm = Some(Ssm {
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
    arch.recurrent_layers = match f.layer_types("linear_attention") {
        Some(list) => SlidingLayers::Listed(list),
        None => {
            SlidingLayers::AllButEvery(f.uint(&["full_attention_interval"])?.unwrap_or(4).max(1))
        }
    };
    Ok(())
}

/// Jamba: Mamba mixers (with Δ/B/C norms) but in every attn_layer_period-th layer from
/// attn_layer_offset; experts every expert_layer_period-th from its offset.
pub(super) fn jamba(
    f: &mut Fields<'_>,
    arch: &mut ModelArch,
    hidden: u64,
    layers: u64,
) -> Result<(), ModelError> {
    let inner = f
        .uint(&["mamba_expand"])?
        .unwrap_or(2)
        .saturating_mul(hidden);
    arch.ssm = Some(Ssm {
        kind: SsmKind::JambaMamba,
        conv_kernel: f.uint(&["mamba_d_conv"])?.unwrap_or(4),
        inner,
        state: f.uint(&["mamba_d_state"])?.unwrap_or(16),
        dt_rank: dt_rank_or_auto(f, "mamba_dt_rank", hidden)?,
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
    Ok(())
}

/// Granite-4.0-H: Mamba-2 mixers, attention in the layers `layer_types` names, a shared MLP in
/// every layer (the only MLP when there are no experts).
pub(super) fn granite_moe_hybrid(
    f: &mut Fields<'_>,
    arch: &mut ModelArch,
    hidden: u64,
) -> Result<(), ModelError> {
    let inner = f
        .uint(&["mamba_expand"])?
        .unwrap_or(2)
        .saturating_mul(hidden);
    arch.ssm = Some(mamba_prefixed_ssm(f, inner, true)?);
    arch.recurrent_layers = match f.layer_types("mamba") {
        Some(list) => SlidingLayers::Listed(list),
        None => SlidingLayers::All,
    };
    if f.uint(&["num_local_experts"])?.unwrap_or(0) == 0 {
        arch.intermediate_size = f.req(&["shared_intermediate_size"])?;
    }
    // Each multiplier the converter writes (any but 0) is an op of its own in llama.cpp.
    let mut multiplier = |name: &str| {
        f.used.push(name.to_string());
        f.map
            .get(name)
            .and_then(Value::as_f64)
            .is_some_and(|m| m != 0.0)
    };
    arch.granite_scales = GraniteScales {
        embedding: multiplier("embedding_multiplier"),
        residual: multiplier("residual_multiplier"),
        logits: multiplier("logits_scaling"),
    };
    f.used.push("position_embedding_type".into());
    arch.no_rope = f.map.get("position_embedding_type").and_then(Value::as_str) == Some("nope");
    Ok(())
}

/// Nemotron-H: one block per layer as `hybrid_override_pattern` spells it (`M` a Mamba-2 mixer,
/// `*` attention, `-` a squared-ReLU MLP, `E` squared-ReLU experts), one norm before each.
/// Returns whether the pattern has expert blocks (experts are then required).
pub(super) fn nemotron_h(
    f: &mut Fields<'_>,
    arch: &mut ModelArch,
    layers: u64,
) -> Result<bool, ModelError> {
    let pattern = match f.map.get("hybrid_override_pattern") {
        Some(Value::String(p)) => p.clone(),
        _ => return Err(f.missing("hybrid_override_pattern")),
    };
    f.used.push("hybrid_override_pattern".into());
    let bad = |why: String| f.bad("hybrid_override_pattern", why);
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
            "has '{}', a block gpumem has no rules for (M: Mamba-2, *: attention, -: MLP, E: \
             experts)",
            c.escape_default()
        )));
    }
    if pattern.contains('-') && pattern.contains('E') {
        return Err(bad(
            "mixes - (MLP) and E (experts) blocks; llama.cpp gives every feed-forward block \
             experts or none"
                .into(),
        ));
    }
    if !pattern.contains(['M', '*']) {
        return Err(bad(
            "has no M or * block: every layer an MLP, nothing attends or mixes".into(),
        ));
    }
    let heads = f.uint(&["mamba_num_heads"])?.unwrap_or(128);
    arch.ssm = Some(Ssm {
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
    arch.recurrent_layers = SlidingLayers::Listed(blocks.iter().map(|&c| c == 'M').collect());
    arch.ffn_blocks_alone = true;
    arch.ffn_layers = SlidingLayers::Listed(blocks.iter().map(|&c| c == '-' || c == 'E').collect());
    arch.mlp = Mlp::Plain;
    arch.norms_per_layer = 1;
    Ok(pattern.contains('E'))
}

/// Falcon-H1: attention and a Mamba-2 mixer side by side in every layer (their outputs added),
/// then a gated MLP. The mixer's gated norm only with mamba_rms_norm.
pub(super) fn falcon_h1(
    f: &mut Fields<'_>,
    arch: &mut ModelArch,
    hidden: u64,
) -> Result<(), ModelError> {
    let inner = match f.uint(&["mamba_d_ssm"])? {
        Some(inner) => inner,
        None => f
            .uint(&["mamba_expand"])?
            .unwrap_or(2)
            .saturating_mul(hidden),
    };
    let norm = f.boolean("mamba_rms_norm").unwrap_or(false);
    arch.ssm = Some(mamba_prefixed_ssm(f, inner, norm)?);
    arch.recurrent_layers = SlidingLayers::All;
    arch.parallel_attention = true;
    if f.boolean("projectors_bias") == Some(true) {
        arch.attention = Attention::Standard {
            qkv_bias: true,
            o_bias: true,
            qk_norm: false,
        };
    }
    Ok(())
}

/// Kimi-Linear's KDA layers: heads, head size and convolution width from the checkpoint's
/// `linear_attn_config` (else transformers' flat `linear_*` fields), and which layers are
/// KDA from `layer_types`, else `linear_attn_config.full_attn_layers` (1-indexed, the layers
/// that attend, as llama.cpp's converter reads them), else transformers' default (attention in
/// every fourth layer from the fifth, 1-indexed).
pub(super) fn kimi_linear(
    f: &mut Fields<'_>,
    arch: &mut ModelArch,
    layers: u64,
) -> Result<(), ModelError> {
    let nested = f
        .map
        .get("linear_attn_config")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut inner = Fields {
        path: f.path,
        map: &nested,
        used: Vec::new(),
    };
    let heads = match inner.uint(&["num_heads"])? {
        Some(n) => n,
        None => f.uint(&["linear_num_heads"])?.unwrap_or(32),
    };
    let head = match inner.uint(&["head_dim"])? {
        Some(n) => n,
        None => f.uint(&["linear_head_dim"])?.unwrap_or(128),
    };
    let conv_kernel = match inner.uint(&["short_conv_kernel_size"])? {
        Some(n) => n,
        None => f.uint(&["linear_conv_kernel_dim"])?.unwrap_or(4),
    };
    f.used
        .extend(inner.used.iter().map(|k| format!("linear_attn_config.{k}")));
    arch.ssm = Some(Ssm {
        kind: SsmKind::Kda,
        conv_kernel,
        inner: heads.saturating_mul(head),
        state: head,
        dt_rank: heads,
        groups: heads,
        conv_bias: false,
        norm: true,
        ranks: [0; 4],
    });
    let n = layers.min(1 << 16);
    let attending = nested.get("full_attn_layers").and_then(Value::as_array);
    arch.recurrent_layers = match (f.layer_types("linear_attention"), attending) {
        (Some(list), _) => SlidingLayers::Listed(list),
        (None, Some(list)) => {
            let full: Vec<u64> = list.iter().filter_map(Value::as_u64).collect();
            SlidingLayers::Listed((1..=n).map(|i| !full.contains(&i)).collect())
        }
        (None, None) => SlidingLayers::Listed((0..n).map(|i| i == 0 || i % 4 != 0).collect()),
    };
    Ok(())
}
