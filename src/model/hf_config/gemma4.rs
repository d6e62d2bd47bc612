//! Gemma 4's config.json (`gemma4_text`, nested in `gemma4`'s `text_config`), as
//! transformers 5.24's `Gemma4TextConfig` reads it: sliding layers of `head_dim` and
//! `num_key_value_heads`, full layers of `global_head_dim` (a kwarg, 512 where absent) and,
//! under `attention_k_eq_v`, `num_global_key_value_heads` (or `per_layer_config`'s, the form
//! transformers saves); `layer_types` 5 sliding to 1 full, the last layer always full; under
//! `enable_moe_block` (26B-A4B) experts in every layer beside the dense MLP; (E2B, E4B)
//! per-layer embeddings of `hidden_size_per_layer_input` (256 where absent) and the last
//! `num_kv_shared_layers` reusing an earlier layer's KV cache, their MLP twice as wide under
//! `use_double_wide_mlp`. What gpumem does not model is refused by name.

use serde_json::Value;

use super::Fields;
use crate::model::arch::{
    Attention, EdgeLayout, FullAttention, ModelArch, Moe, SlidingLayers, SlidingWindow,
};
use crate::model::error::ModelError;

/// The full layers' own heads, four norms a layer, q/k norms and no query scale.
pub(super) fn gemma4(f: &mut Fields<'_>, arch: &mut ModelArch) -> Result<(), ModelError> {
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
    // convert_hf_to_gguf.py maps the checkpoint's fused `experts.gate_up_proj` to one
    // `ffn_gate_up_exps` (its tensor map's gemma4 row), as published 26B-A4B GGUFs hold it.
    arch.fused_gate_up_exps = f.boolean("enable_moe_block") == Some(true);
    arch.attention = Attention::Standard {
        qkv_bias: false,
        o_bias: false,
        qk_norm: true,
    };
    arch.edge = edge(f, arch)?;
    Ok(())
}

/// E2B's and E4B's per-layer embeddings and KV-sharing layers (`None` with neither), checked
/// against what llama.cpp builds: the per-layer table over the whole vocabulary, a layer of
/// each kind left with a cache of its own, the sharing layers reading the last sliding and full
/// ones before them.
fn edge(f: &mut Fields<'_>, arch: &ModelArch) -> Result<Option<EdgeLayout>, ModelError> {
    let per_layer_input = f.uint(&["hidden_size_per_layer_input"])?.unwrap_or(0);
    let shared = f.uint(&["num_kv_shared_layers"])?.unwrap_or(0);
    let double_wide_mlp = f.boolean("use_double_wide_mlp").unwrap_or(false) && shared > 0;
    if per_layer_input == 0 && shared == 0 {
        return Ok(None);
    }
    if f.boolean("enable_moe_block") == Some(true) {
        return Err(f.bad(
            "enable_moe_block",
            "is set beside per-layer embeddings or KV-sharing layers: not modelled yet".into(),
        ));
    }
    if per_layer_input > 0 {
        let vocab = f.uint(&["vocab_size_per_layer_input"])?;
        if vocab.is_some_and(|v| v != arch.vocab_size) {
            return Err(f.bad(
                "vocab_size_per_layer_input",
                "differs from vocab_size, which llama.cpp's per-layer table takes: not modelled \
                 yet"
                .into(),
            ));
        }
    }
    let edge = EdgeLayout {
        per_layer_input,
        kv_shared_layers: shared,
        double_wide_mlp,
        backbone: 0,
    };
    if shared >= arch.num_layers {
        return Err(f.bad(
            "num_kv_shared_layers",
            "leaves no layer a KV cache of its own (an assistant model): not modelled yet".into(),
        ));
    }
    let laid_out = ModelArch {
        sliding_window: window(f)?,
        edge: Some(edge),
        ..arch.clone()
    };
    laid_out
        .kv_sharing_ok()
        .map_err(|why| f.bad("num_kv_shared_layers", format!("{why}: not modelled yet")))?;
    Ok(Some(edge))
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
