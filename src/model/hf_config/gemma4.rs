//! Gemma 4's config.json (`gemma4_text`, nested in `gemma4`'s `text_config`), as
//! transformers 5.24's `Gemma4TextConfig` reads it: sliding layers of `head_dim` and
//! `num_key_value_heads`, full layers of `global_head_dim` (a kwarg, 512 where absent) and,
//! under `attention_k_eq_v`, `num_global_key_value_heads` (or `per_layer_config`'s, the form
//! transformers saves); `layer_types` 5 sliding to 1 full, the last layer always full; under
//! `enable_moe_block` (26B-A4B) experts in every layer beside the dense MLP. What gpumem does not
//! model is refused by name.

use serde_json::Value;

use super::Fields;
use crate::model::arch::{Attention, FullAttention, ModelArch, Moe, SlidingLayers, SlidingWindow};
use crate::model::error::ModelError;

/// The full layers' own heads, four norms a layer, q/k norms and no query scale.
pub(super) fn gemma4(f: &mut Fields<'_>, arch: &mut ModelArch) -> Result<(), ModelError> {
    let refuse = |f: &Fields<'_>, field: &str, what: &str| {
        Err(f.bad(field, format!("is set: {what} are not modelled yet")))
    };
    if f.uint(&["hidden_size_per_layer_input"])?
        .is_some_and(|n| n > 0)
    {
        return refuse(
            f,
            "hidden_size_per_layer_input",
            "per-layer embeddings (Gemma 4 E2B/E4B)",
        );
    }
    if f.uint(&["num_kv_shared_layers"])?.is_some_and(|n| n > 0) {
        return refuse(
            f,
            "num_kv_shared_layers",
            "layers reusing an earlier layer's KV cache (Gemma 4 E2B/E4B)",
        );
    }
    let k_eq_v = f.boolean("attention_k_eq_v").unwrap_or(false);
    // transformers saves the full layers' widths per layer (every full layer alike).
    let per_layer: Vec<&Value> = f
        .map
        .get("per_layer_config")
        .and_then(Value::as_object)
        .map(|m| m.values().collect())
        .unwrap_or_default();
    if per_layer.windows(2).any(|w| w[0] != w[1]) {
        return Err(f.bad(
            "per_layer_config",
            "gives the full layers different widths, which gpumem does not model for Gemma 4"
                .into(),
        ));
    }
    let listed = per_layer.first().and_then(|v| v.as_object());
    let listed_uint = |key: &str| listed.and_then(|m| m.get(key)).and_then(Value::as_u64);
    let head_dim = match listed_uint("head_dim") {
        Some(d) => d,
        None => f.uint(&["global_head_dim"])?.unwrap_or(512),
    };
    let global_kv = match listed_uint("num_key_value_heads") {
        Some(n) => Some(n),
        None => f.uint(&["num_global_key_value_heads"])?.filter(|_| k_eq_v),
    };
    arch.full_attention = Some(FullAttention {
        head_dim,
        kv_heads: global_kv.unwrap_or(arch.num_kv_heads),
        k_eq_v,
    });
    arch.norms_per_layer = 4;
    arch.attention = Attention::Standard {
        qkv_bias: false,
        o_bias: false,
        qk_norm: true,
    };
    Ok(())
}

/// The window and its layers: `layer_types` as listed, else 5 sliding to 1 full; the last layer
/// full whatever the list says (`__post_init__` forces it).
pub(super) fn window(f: &mut Fields<'_>) -> Result<Option<SlidingWindow>, ModelError> {
    let Some(window) = f.uint(&["sliding_window"])?.filter(|&w| w > 0) else {
        return Ok(None);
    };
    let layers = f.req(&["num_hidden_layers"])?;
    let mut list = f
        .layer_types("sliding_attention")
        .unwrap_or_else(|| (0..layers).map(|i| (i + 1) % 6 != 0).collect());
    if let Some(last) = list.last_mut() {
        *last = false;
    }
    Ok(Some(SlidingWindow {
        window,
        layers: SlidingLayers::Listed(list),
    }))
}

/// 26B-A4B's experts (`enable_moe_block`): `num_experts` of `moe_intermediate_size`,
/// `top_k_experts` a token, in every layer beside the dense MLP of `intermediate`, which is
/// counted as the shared expert; softmax-routed, no bias. `None` without the block.
pub(in crate::model::hf_config) fn experts(
    f: &mut Fields<'_>,
    intermediate: u64,
) -> Result<Option<Moe>, ModelError> {
    if f.boolean("enable_moe_block") != Some(true) {
        return Ok(None);
    }
    Ok(Some(Moe {
        experts: f.req(&["num_experts"])?,
        experts_per_token: f.req(&["top_k_experts"])?,
        expert_intermediate: f.req(&["moe_intermediate_size"])?,
        shared_intermediate: intermediate,
        first_dense_layers: 0,
        layer_freq: 1,
        router_bias: false,
        shared_gate: false,
        scaled_weights: false,
        groups: (0, 0),
    }))
}
