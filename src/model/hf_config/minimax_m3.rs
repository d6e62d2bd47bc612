//! MiniMax-M3's config.json (`minimax_m3`, under `minimax_m3_vl`'s `text_config` in its
//! multimodal repositories): what llama.cpp's converter (`MiniMaxM3Model`) reads beyond the
//! shared decoder's fields.

use serde_json::Value;

use super::super::fields::Fields;
use crate::model::arch::{Attention, ModelArch, Msa};
use crate::model::error::ModelError;

/// MiniMax-M3's per-head q/k norms, its leading dense layers' width
/// (`dense_intermediate_size`; the experts' is `intermediate_size`, read by `moe.rs` as the
/// width of a model without `moe_intermediate_size`) and its sparse attention
/// (`sparse_attention_config`, every field of which the converter requires).
pub(super) fn minimax_m3(f: &mut Fields<'_>, arch: &mut ModelArch) -> Result<(), ModelError> {
    arch.attention = Attention::Standard {
        qkv_bias: false,
        o_bias: false,
        qk_norm: true,
    };
    if let Some(dense) = f.uint(&["dense_intermediate_size"])? {
        arch.intermediate_size = dense;
    }
    let sac = f
        .map
        .get("sparse_attention_config")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let field = |name: &str, f: &Fields<'_>| -> Result<u64, ModelError> {
        let key = format!("sparse_attention_config.{name}");
        match sac.get(name) {
            Some(v) => v
                .as_u64()
                .ok_or_else(|| f.bad(&key, format!("is {v}, expected a non-negative integer"))),
            None => Err(f.missing(&key)),
        }
    };
    let msa = Msa {
        heads: field("sparse_num_index_heads", f)?,
        head_dim: field("sparse_index_dim", f)?,
        top_k_blocks: field("sparse_topk_blocks", f)?,
        block: field("sparse_block_size", f)?,
        local_blocks: field("sparse_local_block", f)?,
    };
    if msa.block == 0 {
        return Err(f.bad("sparse_attention_config.sparse_block_size", "is 0".into()));
    }
    f.used.push("sparse_attention_config".into());
    arch.msa = Some(msa);
    Ok(())
}
