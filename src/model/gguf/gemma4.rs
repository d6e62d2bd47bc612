//! Gemma 4's GGUF keys (llama.cpp's `gemma4`): its sliding pattern and per-layer KV heads as
//! arrays, the full layers' head size (`key_length`) beside the sliding ones'
//! (`key_length_swa`), full layers whose V is their K projection (no `attn_v`), (26B-A4B)
//! experts in every layer beside the dense MLP, and (E2B, E4B) per-layer embeddings
//! (`embedding_length_per_layer_input`) and last layers reusing an earlier layer's KV cache
//! (`attention.shared_kv_layers`, their MLP widths per layer under E2B's double-wide MLP).
//! What gpumem does not model is refused by name: experts in some layers only or without their
//! per-expert scale, experts beside per-layer embeddings, KV sharing other than llama.cpp's
//! mapping assumes, and a fused q/k/v projection.

use super::Keys;
use crate::model::arch::{EdgeLayout, FullAttention, ModelArch, SlidingLayers, SlidingWindow};
use crate::model::error::ModelError;
use crate::model::family::Family;

/// Reads Gemma 4's layer widths and windows into `arch` (whose `head_dim` is the file's
/// `key_length`, as read for every family), or refuses what is not modelled.
pub(super) fn gemma4(k: &Keys<'_>, arch: &mut ModelArch) -> Result<(), ModelError> {
    let refuse = |key: &str, what: &str| -> Result<(), ModelError> {
        match k.get(key).filter(|&n| n > 0) {
            Some(n) => Err(k.bad(key, format!("is {n}: {what} are not modelled yet"))),
            None => Ok(()),
        }
    };
    let layers = arch.num_layers;
    arch.edge = edge(k, arch)?;
    if arch.edge.is_some() && arch.moe.is_some() {
        refuse(
            "expert_count",
            "experts beside per-layer embeddings or KV-sharing layers",
        )?;
    }
    experts(k, arch)?;
    if k.has(".attn_qkv.weight") {
        return Err(k.bad(
            "attention.head_count",
            "has a fused attn_qkv projection, which gpumem does not model for Gemma 4".into(),
        ));
    }
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
    // Every full layer alike, every sliding layer with its own V projection; the layers
    // reusing an earlier layer's cache with neither.
    let first_shared = arch.first_kv_shared_layer();
    let v_as_listed = (0..layers).all(|i| {
        let has_v = k
            .file
            .tensors
            .iter()
            .any(|t| t.name == format!("blk.{i}.attn_v.weight"));
        let swa = sliding.get(usize::try_from(i).unwrap_or(usize::MAX)) == Some(&true);
        has_v == (i < first_shared && (swa || !k_eq_v))
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
    arch.kv_sharing_ok().map_err(|why| {
        k.bad(
            "attention.shared_kv_layers",
            format!("{why}: not modelled yet"),
        )
    })
}

/// E2B's and E4B's layout: the per-layer embeddings' width, the layers reusing an earlier
/// layer's cache (without K, V or a K norm of their own), and the MLP widths per layer where
/// those layers' are twice the others' (`use_double_wide_mlp`), which set `intermediate_size`
/// to the others'. `None` for a model with neither.
fn edge(k: &Keys<'_>, arch: &mut ModelArch) -> Result<Option<EdgeLayout>, ModelError> {
    let layers = arch.num_layers;
    let per_layer_input = k.get("embedding_length_per_layer_input").unwrap_or(0);
    // An assistant (`gemma4-assistant`): every layer reads the target's caches.
    let backbone = match Family::from_gguf(k.a) {
        Family::Gemma4Assistant => assistant_backbone(k, arch)?,
        _ => 0,
    };
    let shared = match backbone {
        0 => k.get("attention.shared_kv_layers").unwrap_or(0),
        _ => layers,
    };
    let first_shared = layers.saturating_sub(shared);
    let widths = k.per_layer("feed_forward_length", layers).ok();
    let double_wide = match widths.as_deref() {
        Some([base, ..]) => {
            let width = |wide: bool| if wide { base * 2 } else { *base };
            let listed = |wide: bool| {
                widths.iter().flatten().enumerate().all(|(i, &n)| {
                    n == width(wide && u64::try_from(i).is_ok_and(|i| i >= first_shared))
                })
            };
            let (uniform, doubled) = (listed(false), shared > 0 && listed(true));
            if !uniform && !doubled {
                return Err(k.bad(
                    "feed_forward_length",
                    "varies by layer other than Gemma 4 E2B's KV-sharing layers twice the \
                     others: not modelled yet"
                        .into(),
                ));
            }
            arch.intermediate_size = u64::try_from(*base).unwrap_or(0);
            !uniform
        }
        _ => false,
    };
    if per_layer_input == 0 && shared == 0 {
        return Ok(None);
    }
    if shared >= layers && backbone == 0 {
        return Err(k.bad(
            "attention.shared_kv_layers",
            format!("is {shared}, leaving no layer a KV cache of its own"),
        ));
    }
    let own = |i: u64, t: &str| {
        let name = format!("blk.{i}.{t}");
        k.file.tensors.iter().any(|x| x.name == name)
    };
    if (first_shared..layers).any(|i| own(i, "attn_k.weight") || own(i, "attn_k_norm.weight")) {
        return Err(k.bad(
            "attention.shared_kv_layers",
            "is set, but a layer reusing an earlier layer's KV cache has K weights of its own: \
             not modelled yet"
                .into(),
        ));
    }
    let table = k
        .file
        .tensors
        .iter()
        .find(|t| t.name == "per_layer_token_embd.weight");
    let table_ok = table.is_some_and(|t| {
        t.dims.first() == Some(&per_layer_input.saturating_mul(layers))
            && t.dims.get(1) == Some(&arch.vocab_size)
    });
    if per_layer_input > 0 && !table_ok {
        return Err(k.bad(
            "embedding_length_per_layer_input",
            "is set, but per_layer_token_embd is not a table of that many values a layer for \
             every token: not modelled yet"
                .into(),
        ));
    }
    Ok(Some(EdgeLayout {
        per_layer_input,
        kv_shared_layers: shared,
        double_wide_mlp: double_wide,
        backbone,
    }))
}

/// An assistant's target width (`embedding_length_out`), which llama.cpp requires to differ
/// from its own, with every layer counted as a next-token layer (`nextn_predict_layers`) as
/// the converter writes them; other layouts are refused.
fn assistant_backbone(k: &Keys<'_>, arch: &ModelArch) -> Result<u64, ModelError> {
    let backbone = k.req("embedding_length_out")?;
    if backbone == arch.hidden_size || backbone == 0 {
        return Err(k.bad(
            "embedding_length_out",
            format!("is {backbone}: a Gemma 4 assistant's must be its target's width, not its own"),
        ));
    }
    if k.get("nextn_predict_layers") != Some(arch.num_layers) {
        return Err(k.bad(
            "nextn_predict_layers",
            "is not block_count: an assistant with layers of its own beside its next-token \
             layers is not modelled yet"
                .into(),
        ));
    }
    Ok(backbone)
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
