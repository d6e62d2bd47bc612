//! Gemma 4's GGUF keys (llama.cpp's `gemma4`): its sliding pattern and per-layer KV heads as
//! arrays, the full layers' head size (`key_length`) beside the sliding ones'
//! (`key_length_swa`), full layers whose V is their K projection (no `attn_v`), and (26B-A4B)
//! experts in every layer beside the dense MLP. What gpumem does not model is refused by name:
//! per-layer embeddings (E2B, E4B), layers sharing an earlier layer's KV cache, experts in some
//! layers only or without their per-expert scale, and a fused q/k/v projection.

use super::Keys;
use crate::model::arch::{FullAttention, ModelArch, SlidingLayers, SlidingWindow};
use crate::model::error::ModelError;

/// Reads Gemma 4's layer widths and windows into `arch` (whose `head_dim` is the file's
/// `key_length`, as read for every family), or refuses what is not modelled.
pub(super) fn gemma4(k: &Keys<'_>, arch: &mut ModelArch) -> Result<(), ModelError> {
    let refuse = |key: &str, what: &str| -> Result<(), ModelError> {
        match k.get(key).filter(|&n| n > 0) {
            Some(n) => Err(k.bad(key, format!("is {n}: {what} are not modelled yet"))),
            None => Ok(()),
        }
    };
    refuse(
        "embedding_length_per_layer_input",
        "per-layer embeddings (Gemma 4 E2B/E4B)",
    )?;
    refuse(
        "attention.shared_kv_layers",
        "layers reusing an earlier layer's KV cache (Gemma 4 E2B/E4B)",
    )?;
    experts(k, arch)?;
    if k.has(".attn_qkv.weight") {
        return Err(k.bad(
            "attention.head_count",
            "has a fused attn_qkv projection, which gpumem does not model for Gemma 4".into(),
        ));
    }
    let layers = arch.num_layers;
    let sliding: Vec<bool> = k
        .per_layer("attention.sliding_window_pattern", layers)?
        .iter()
        .map(|&s| s != 0)
        .collect();
    let kv: Vec<i128> = match k.per_layer("attention.head_count_kv", layers) {
        Ok(v) => v,
        Err(_) => vec![i128::from(k.req("attention.head_count_kv")?); sliding.len()],
    };
    // One KV head count for each kind of layer.
    let heads_of = |swa: bool| -> Result<Option<u64>, ModelError> {
        let mut counts = sliding.iter().zip(&kv).filter(|(&s, _)| s == swa);
        let Some((_, &first)) = counts.next() else {
            return Ok(None);
        };
        if counts.any(|(_, &n)| n != first) || first <= 0 {
            return Err(k.bad(
                "attention.head_count_kv",
                "varies within one kind of layer (sliding or full), which gpumem does not \
                 model for Gemma 4"
                    .into(),
            ));
        }
        Ok(u64::try_from(first).ok())
    };
    let (swa_kv, full_kv) = (heads_of(true)?, heads_of(false)?);
    let full_head = arch.head_dim;
    let swa_head = k.req("attention.key_length_swa")?;
    let first_full = sliding.iter().position(|&s| !s).unwrap_or(0);
    let k_eq_v = !k
        .file
        .tensors
        .iter()
        .any(|t| t.name == format!("blk.{first_full}.attn_v.weight"));
    // Every full layer alike, every sliding layer with its own V projection.
    let v_as_listed = (0..layers).all(|i| {
        let has_v = k
            .file
            .tensors
            .iter()
            .any(|t| t.name == format!("blk.{i}.attn_v.weight"));
        let swa = sliding.get(usize::try_from(i).unwrap_or(usize::MAX)) == Some(&true);
        has_v == (swa || !k_eq_v)
    });
    if !v_as_listed {
        return Err(k.bad(
            "attention.head_count_kv",
            "has layers of one kind with and without attn_v, which gpumem does not model for \
             Gemma 4"
                .into(),
        ));
    }
    arch.head_dim = swa_head;
    arch.num_kv_heads = swa_kv.or(full_kv).unwrap_or(arch.num_heads);
    arch.full_attention = Some(FullAttention {
        head_dim: full_head,
        kv_heads: full_kv.unwrap_or(arch.num_kv_heads),
        k_eq_v,
    });
    arch.attn_output_gate = false;
    arch.qk_norm_full_width = false;
    arch.sliding_window = Some(SlidingWindow {
        window: k.req("attention.sliding_window")?,
        layers: SlidingLayers::Listed(sliding),
    });
    Ok(())
}

/// 26B-A4B's experts: in every layer, beside the dense MLP (counted as the shared expert, of
/// `feed_forward_length`), each layer with its router's input scale and its experts' output
/// scales. Experts in some layers only, or without those scales, are refused.
fn experts(k: &Keys<'_>, arch: &mut ModelArch) -> Result<(), ModelError> {
    let Some(moe) = arch.moe.as_mut() else {
        return Ok(());
    };
    let every = |suffix: &str| {
        (0..arch.num_layers).all(|i| {
            let name = format!("blk.{i}.{suffix}");
            k.file.tensors.iter().any(|t| t.name == name)
        })
    };
    let complete = [
        "ffn_gate_inp.weight",
        "ffn_gate_inp.scale",
        "ffn_down_exps.scale",
    ]
    .iter()
    .all(|s| every(s));
    if !complete || moe.first_dense_layers != 0 || moe.layer_freq > 1 {
        return Err(k.bad(
            "expert_count",
            "is set, but not every layer has experts with ffn_gate_inp.scale and \
             ffn_down_exps.scale as Gemma 4 26B-A4B's do: not modelled yet"
                .into(),
        ));
    }
    moe.shared_intermediate = arch.intermediate_size;
    Ok(())
}
