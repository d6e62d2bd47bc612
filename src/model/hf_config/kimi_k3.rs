//! Kimi-K3's config.json (`kimi_k3`, its language model in `text_config`, written there as
//! `kimi_linear`): Kimi-Linear's fields, and what llama.cpp's converter and `kimi-k3` builder
//! read beyond them.

use serde_json::Value;

use super::super::fields::Fields;
use crate::model::arch::{K3Layout, ModelArch};
use crate::model::error::ModelError;

/// Kimi-K3's residual attention, latent experts and gates. Refused by name: a low-rank KDA
/// gate (`use_full_rank_gate` false), RoPE in the latent attention (`mla_use_nope` false) and
/// another activation than SiTU, none of which llama.cpp's `kimi-k3` builder runs.
pub(super) fn kimi_k3(f: &mut Fields<'_>, arch: &mut ModelArch) -> Result<(), ModelError> {
    let linear = f
        .map
        .get("linear_attn_config")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    if linear.get("use_full_rank_gate").and_then(Value::as_bool) == Some(false) {
        return Err(f.bad(
            "linear_attn_config.use_full_rank_gate",
            "is false: llama.cpp's kimi-k3 builder runs KDA with a full-rank output gate only \
             (Kimi-Linear's low-rank pair is the kimi_linear model type)"
                .into(),
        ));
    }
    if f.boolean("mla_use_nope") == Some(false) {
        return Err(f.bad(
            "mla_use_nope",
            "is false: llama.cpp's kimi-k3 builder runs latent attention without RoPE only".into(),
        ));
    }
    match f.map.get("hidden_act").and_then(Value::as_str) {
        None | Some("situ") => {}
        Some(other) => {
            return Err(f.bad(
                "hidden_act",
                format!("is {other:?}: llama.cpp's kimi-k3 builder runs SiTU activations only"),
            ))
        }
    }
    let bound = linear
        .get("gate_lower_bound")
        .and_then(Value::as_f64)
        .is_some_and(f64::is_finite);
    if bound {
        f.used.push("linear_attn_config.gate_lower_bound".into());
    }
    arch.kimi_k3 = Some(K3Layout {
        res_block: f.uint(&["attn_res_block_size"])?.unwrap_or(0),
        latent: f.uint(&["routed_expert_hidden_size"])?.unwrap_or(0),
        latent_norm: f.boolean("latent_moe_use_norm").unwrap_or(false),
        gate_lower_bound: bound,
        mla_gate: f.boolean("mla_use_output_gate").unwrap_or(false),
        situ_up: f
            .map
            .get("activation_situ_linear_beta")
            .and_then(Value::as_f64)
            .is_some_and(|b| b > 0.0),
        // llama.cpp's converter requires the key; K3's config sets it.
        renormalize: f.boolean("moe_renormalize").unwrap_or(true),
    });
    Ok(())
}
