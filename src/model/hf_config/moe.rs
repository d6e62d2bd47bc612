//! Mixture of experts, whatever the family calls it: how many experts, how many a token uses,
//! their width, the shared expert, and which layers have them.

use serde_json::Value;

use super::fields::Fields;
use crate::model::arch::Moe;
use crate::model::error::ModelError;
use crate::model::family::Family;

/// The config's experts, or `None` for a dense model. `intermediate` is the dense MLP width
/// (the expert width when the config gives none).
pub(super) fn experts(
    f: &mut Fields<'_>,
    ty: &Family,
    intermediate: u64,
) -> Result<Option<Moe>, ModelError> {
    if *ty == Family::Gemma4 {
        return super::families::gemma4::experts(f, intermediate);
    }
    let experts = f
        .uint(&["num_local_experts", "n_routed_experts", "num_experts"])?
        .unwrap_or(0);
    if experts == 0 {
        return Ok(None);
    }
    let per_token = f.req(&["num_experts_per_tok", "num_experts_per_token"])?;
    let expert_intermediate = f.uint(&["moe_intermediate_size"])?.unwrap_or(intermediate);
    let shared = shared_width(f, ty, expert_intermediate)?;
    // MiniMax-M3 lists each layer's (0 dense, 1 experts): llama.cpp's converter counts the
    // leading zeros as dense layers, the rest all routed.
    let listed = f
        .map
        .get("moe_layer_freq")
        .and_then(Value::as_array)
        .map(|l| l.iter().take_while(|v| v.as_u64() == Some(0)).count() as u64);
    let freq = match ty {
        _ if listed.is_some() => 1,
        Family::Jamba => f.uint(&["expert_layer_period"])?.unwrap_or(2).max(1),
        _ => f
            .uint(&[
                "moe_layer_freq",
                "decoder_sparse_step",
                "interleave_moe_layer_step",
            ])?
            .unwrap_or(1)
            .max(1),
    };
    // Llama 4 and Qwen2/3-MoE count MoE layers from the end of each step ((i + 1) % step
    // == 0); DeepSeek's first_k_dense_replace counts dense layers from the start.
    let first_dense = match listed {
        Some(leading) => Some(leading),
        None => f.uint(&["first_k_dense_replace", "expert_layer_offset"])?,
    };
    let first_dense = match first_dense {
        Some(k) => k,
        None if ty.moe_counts_from_step_end() => freq - 1,
        None => 0,
    };
    Ok(Some(Moe {
        experts,
        experts_per_token: per_token,
        expert_intermediate,
        shared_intermediate: shared,
        first_dense_layers: first_dense,
        layer_freq: freq,
        router_bias: ty.router_bias(),
        shared_gate: ty.gated_shared_expert() && shared > 0,
        scaled_weights: f
            .map
            .get("routed_scaling_factor")
            .and_then(Value::as_f64)
            .is_some_and(|v| v != 0.0 && v != 1.0),
        groups: (
            ["n_group", "num_expert_group"]
                .iter()
                .find_map(|k| f.map.get(*k).and_then(Value::as_u64))
                .unwrap_or(0),
            f.map.get("topk_group").and_then(Value::as_u64).unwrap_or(0),
        ),
    }))
}

/// The shared expert's width, as each family writes it (0: none).
fn shared_width(
    f: &mut Fields<'_>,
    ty: &Family,
    expert_intermediate: u64,
) -> Result<u64, ModelError> {
    let per_expert = |f: &mut Fields<'_>| -> Result<u64, ModelError> {
        Ok(f.uint(&["n_shared_experts", "num_shared_experts"])?
            .unwrap_or(0)
            .saturating_mul(expert_intermediate))
    };
    Ok(match ty {
        Family::Qwen2Moe | Family::Qwen3Next | Family::Qwen35 => {
            f.uint(&["shared_expert_intermediate_size"])?.unwrap_or(0)
        }
        Family::GraniteHybrid => f.uint(&["shared_intermediate_size"])?.unwrap_or(0),
        Family::NemotronH => match f.uint(&["moe_shared_expert_intermediate_size"])? {
            Some(width) => width,
            None => per_expert(f)?,
        },
        Family::Llama4 => expert_intermediate,
        _ => per_expert(f)?,
    })
}
