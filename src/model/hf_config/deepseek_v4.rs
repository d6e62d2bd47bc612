//! DeepSeek-V4's config.json (`deepseek_v4`): what llama.cpp's converter
//! (`conversion/deepseek.py`, `DeepseekV4Model`) writes as the `deepseek4` keys its builder
//! reads.

use serde_json::Value;

use super::super::fields::Fields;
use crate::model::arch::{Compression, ModelArch, V4Layout};
use crate::model::error::ModelError;

/// DeepSeek-V4's compressed attention, grouped output, hyper-connections and hash routing.
/// Refused by name: a router scored other than by sqrt-softplus, and a compression ratio other
/// than 0, 4 or 128, which llama.cpp's `deepseek4` loader refuses.
pub(super) fn deepseek_v4(
    f: &mut Fields<'_>,
    arch: &mut ModelArch,
    layers: u64,
) -> Result<(), ModelError> {
    match f.map.get("scoring_func").and_then(Value::as_str) {
        None | Some("sqrtsoftplus") => {}
        Some(other) => {
            return Err(f.bad(
                "scoring_func",
                format!(
                "is {other:?}: llama.cpp's deepseek4 loader scores experts by sqrtsoftplus only"
            ),
            ))
        }
    }
    let ratios: Vec<u64> = match f.map.get("compress_ratios").and_then(Value::as_array) {
        Some(list) => list.iter().filter_map(Value::as_u64).collect(),
        None => return Err(f.missing("compress_ratios")),
    };
    if (ratios.len() as u64) < layers {
        return Err(f.bad(
            "compress_ratios",
            format!("lists {} ratios for {layers} layers", ratios.len()),
        ));
    }
    f.used.push("compress_ratios".into());
    let compression = ratios
        .iter()
        .take(usize::try_from(layers).unwrap_or(usize::MAX))
        .map(|&r| {
            Compression::of(r).ok_or_else(|| {
                f.bad(
                    "compress_ratios",
                    format!("holds {r}: llama.cpp compresses by 0, 4 or 128"),
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    arch.attention_sinks = true;
    arch.deepseek_v4 = Some(V4Layout {
        q_lora: f.req(&["q_lora_rank"])?,
        o_lora: f.req(&["o_lora_rank"])?,
        o_groups: f.req(&["o_groups"])?,
        hc_mult: f.req(&["hc_mult"])?,
        hash_layers: f.uint(&["num_hash_layers"])?.unwrap_or(0),
        indexer_heads: f.uint(&["index_n_heads"])?.unwrap_or(0),
        indexer_dim: f.uint(&["index_head_dim"])?.unwrap_or(0),
        indexer_top_k: f.uint(&["index_topk"])?.unwrap_or(0),
        compression,
    });
    Ok(())
}
