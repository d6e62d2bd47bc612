//! GLM-5-next's config.json (`glm5_next`, its language model in `text_config` as
//! `glm5_next_text`): what llama.cpp's converter (`Glm5NextModel`) reads beyond the latent
//! attention and KDA fields Kimi-Linear shares, refusing what its `glm5-next` builder does not
//! run.

use serde_json::Value;

use super::super::fields::Fields;
use super::super::recurrent;
use super::Common;
use crate::model::arch::{Attention, G5nLayout, Indexer, ModelArch};
use crate::model::error::ModelError;

/// Latent attention without RoPE, KDA in the `linear_attention` layers, the pooled indexer and
/// the residual streams. The converter requires `layer_types`, `first_k_dense_replace` and the
/// indexer's and mHC's fields, and asserts nope-only attention, KDA heads equal to the
/// attention heads and (llama.cpp's loader) four streams: each is refused by name otherwise.
pub(super) fn glm5_next(
    f: &mut Fields<'_>,
    arch: &mut ModelArch,
    c: &Common,
) -> Result<(), ModelError> {
    let rope = f.uint(&["qk_rope_head_dim"])?.unwrap_or(0);
    if rope != 0 || f.boolean("mla_use_nope") == Some(false) {
        return Err(f.bad(
            "qk_rope_head_dim",
            "is not 0: llama.cpp's glm5-next builder runs latent attention without RoPE only"
                .into(),
        ));
    }
    let nope = f.req(&["qk_nope_head_dim"])?;
    arch.head_dim = nope;
    arch.num_kv_heads = c.heads;
    arch.attention = Attention::Mla {
        q_lora_rank: Some(f.req(&["q_lora_rank"])?),
        kv_lora_rank: f.req(&["kv_lora_rank"])?,
        qk_nope_head_dim: nope,
        qk_rope_head_dim: 0,
        v_head_dim: f.req(&["v_head_dim"])?,
    };
    if f.layer_types("linear_attention").is_none() {
        return Err(f.missing("layer_types"));
    }
    recurrent::kimi_linear(f, arch, c.layers)?;
    if arch.ssm.is_some_and(|s| s.dt_rank != c.heads) {
        return Err(f.bad(
            "linear_attn_config.num_heads",
            "differs from num_attention_heads: llama.cpp's glm5-next runs KDA at the attention \
             heads"
                .into(),
        ));
    }
    // The converter reads the leading dense layers from this field alone.
    f.req(&["first_k_dense_replace"])?;
    let hc_mult = f.req(&["hc_mult"])?;
    if hc_mult != 4 {
        return Err(f.bad(
            "hc_mult",
            format!("is {hc_mult}: llama.cpp's glm5-next mixes 4 residual streams only"),
        ));
    }
    let full_indexer = match f.map.get("indexer_types").and_then(Value::as_array) {
        Some(types) => {
            f.used.push("indexer_types".into());
            types.iter().map(|t| t.as_str() != Some("shared")).collect()
        }
        // llama.cpp's default: an indexer in every layer.
        None => Vec::new(),
    };
    arch.glm5_next = Some(G5nLayout {
        hc_mult,
        kpool: f.req(&["index_kpool"])?,
        indexer: Indexer {
            heads: f.req(&["index_n_heads"])?,
            head_dim: f.req(&["index_head_dim"])?,
            top_k: f.req(&["index_topk"])?,
        },
        full_indexer,
    });
    Ok(())
}
