//! What each family's config.json says beyond the shape every decoder shares: its attention
//! biases and norms, its feed-forward layout, its windows, its recurrent layers.

use super::fields::Fields;
use super::recurrent;
use crate::model::arch::{
    Attention, Indexer, Mlp, ModelArch, MtpLayers, Norm, SlidingLayers, SlidingWindow,
};
use crate::model::error::ModelError;
use crate::model::family::Family;
use serde_json::Value;

#[path = "deepseek_v4.rs"]
mod deepseek_v4;
#[path = "gemma4.rs"]
pub(super) mod gemma4;
#[path = "glm5_next.rs"]
mod glm5_next;
#[path = "kimi_k3.rs"]
mod kimi_k3;
#[path = "minimax_m3.rs"]
mod minimax_m3;

/// The shape every family shares, as the config wrote it.
pub(super) struct Common {
    pub hidden: u64,
    pub layers: u64,
    pub heads: u64,
    /// The MLP width the config gives (4 × hidden when it gives none), before a family
    /// rule replaces it: the experts' width when the config gives none of theirs.
    pub intermediate: u64,
    pub attention_bias: Option<bool>,
}

/// Applies `ty`'s rules to `arch`. Returns, for Nemotron-H, whether its blocks include experts
/// (`None` for other families); `Ok(false)` for a family without rules, which the caller warns
/// about.
pub(super) fn apply(
    ty: &Family,
    f: &mut Fields<'_>,
    arch: &mut ModelArch,
    c: &Common,
) -> Result<Option<bool>, ModelError> {
    let bias = c.attention_bias;
    match ty {
        Family::Llama | Family::Mistral | Family::Mixtral => {}
        // Phi-3's gate_up_proj: llama.cpp keeps the fused output beside the activation.
        Family::Phi3 => arch.fused_projections = true,
        Family::Qwen2 | Family::Qwen2Moe => arch.attention = standard(true, false, false),
        Family::Qwen3 | Family::Qwen3Moe => {
            arch.attention = standard(bias.unwrap_or(false), false, true)
        }
        // MiniMax-M2: no attention biases; q and k RMS-normed over their whole width
        // (`q_norm` of heads × head_dim, `k_norm` of KV heads × head_dim). Its experts are
        // `intermediate_size` wide, read by `moe.rs` as the width of a model without
        // `moe_intermediate_size`; `rotary_dim` (partial RoPE) sets no memory.
        Family::MinimaxM2 => {
            arch.attention = standard(false, false, true);
            arch.qk_norm_full_width = true;
        }
        // MiniMax-M3: per-head q/k norms, a dense width of its own, sparse attention.
        Family::MinimaxM3 => minimax_m3::minimax_m3(f, arch)?,
        Family::Llama4 => llama4(f, arch)?,
        Family::GptOss => {
            arch.attention = standard(bias.unwrap_or(true), bias.unwrap_or(true), false);
            arch.attention_sinks = true;
            // Expert gate/up and down projections carry biases; every layer is MoE.
            arch.mlp_bias = true;
            arch.active_without_embedding = true;
        }
        Family::Qwen3Next | Family::Qwen35 => recurrent::qwen3_next(f, arch, bias)?,
        Family::Jamba => recurrent::jamba(f, arch, c.hidden, c.layers)?,
        Family::GraniteHybrid => recurrent::granite_moe_hybrid(f, arch, c.hidden)?,
        Family::NemotronH => return recurrent::nemotron_h(f, arch, c.layers).map(Some),
        Family::FalconH1 => recurrent::falcon_h1(f, arch, c.hidden)?,
        Family::Gemma => arch.query_prescaled = true,
        Family::Gemma2 => {
            arch.norms_per_layer = 4;
            arch.query_prescaled = true;
        }
        Family::Gemma3 => {
            arch.norms_per_layer = 4;
            arch.query_prescaled = true;
            arch.attention = standard(false, false, true);
        }
        Family::Gemma4 => gemma4::gemma4(f, arch)?,
        Family::Falcon => falcon(f, arch, c.hidden)?,
        Family::GptNeox => {
            arch.attention = standard(true, true, false);
            arch.mlp = Mlp::Plain;
            arch.mlp_bias = true;
            arch.norm = Norm::Layer;
            arch.parallel_attention = f.boolean("use_parallel_residual").unwrap_or(true);
        }
        // GLM-4.5: biased q/k/v (not o), optional q/k norms, a DeepSeek-V3-style MoE with a
        // routing bias after first_k_dense_replace dense layers.
        Family::Glm4Moe => {
            let qk_norm = f.boolean("use_qk_norm").unwrap_or(false);
            arch.attention = standard(bias.unwrap_or(true), false, qk_norm);
        }
        Family::DeepseekV2
        | Family::DeepseekV3
        | Family::DeepseekV32
        | Family::GlmDsa
        | Family::KimiLinear
        | Family::KimiK3 => latent(*ty, f, arch, c)?,
        // GLM-5-next: Kimi-Linear's layers, nope-only attention, a pooled indexer, mHC.
        Family::Glm5Next => glm5_next::glm5_next(f, arch, c)?,
        // DeepSeek-V4: one shared K=V head, compressed caches, hyper-connections.
        Family::DeepseekV4 => deepseek_v4::deepseek_v4(f, arch, c.layers)?,
        // State-space models are read whole by `recurrent::state_space`.
        // Read as the shared decoder: the state-space models return earlier, and the families
        // with no config.json spelling in the table never reach here.
        Family::Mamba
        | Family::Mamba2
        | Family::Cohere2
        | Family::Gemma4Assistant
        | Family::Starcoder2
        | Family::Rwkv6
        | Family::Rwkv7
        | Family::Bert
        | Family::NomicBert
        | Family::JinaBertV2
        | Family::Other => {}
    }
    Ok(None)
}

/// The families of DeepSeek's latent attention (MLA), with what each adds: DeepSeek-V3.2's and
/// GLM-5's sparse-attention indexer, Kimi-Linear's and Kimi-K3's KDA layers, and the MTP
/// layers the DeepSeek-V3-style checkpoints store.
fn latent(
    ty: Family,
    f: &mut Fields<'_>,
    arch: &mut ModelArch,
    c: &Common,
) -> Result<(), ModelError> {
    mla(f, arch, c.heads)?;
    match ty {
        // DeepSeek-V3's (and Kimi-K2's) checkpoints store each MTP layer's own embedding and
        // head.
        Family::DeepseekV3 => arch.mtp = mtp_layers(f, c.layers, true)?,
        // Kimi-Linear: latent attention (no RoPE, which sets no memory) in the layers
        // `linear_attn_config` leaves out, KDA in the rest.
        Family::KimiLinear => recurrent::kimi_linear(f, arch, c.layers)?,
        // Kimi-K3: Kimi-Linear's layers, with its own gates, residual attention and latent
        // experts.
        Family::KimiK3 => {
            recurrent::kimi_linear(f, arch, c.layers)?;
            kimi_k3::kimi_k3(f, arch)?;
        }
        // V3.2's MTP layer keeps its own embedding and head, as V3's; GLM-5's reuses the
        // model's.
        Family::DeepseekV32 | Family::GlmDsa => {
            arch.indexer = Some(indexer(f)?);
            arch.indexer_shared = shared_indexer_layers(f)?;
            arch.mtp = mtp_layers(f, c.layers, ty == Family::DeepseekV32)?;
        }
        // DeepSeek-V2: the latent attention alone.
        _ => {}
    }
    Ok(())
}

fn standard(qkv_bias: bool, o_bias: bool, qk_norm: bool) -> Attention {
    Attention::Standard {
        qkv_bias,
        o_bias,
        qk_norm,
    }
}

/// Llama 4: dense layers use intermediate_size_mlp; experts (and the one shared expert) use
/// intermediate_size. The query/key norm is a weightless L2 norm. Chunked attention on the
/// RoPE layers (3 of every 4), a cache of one chunk.
fn llama4(f: &mut Fields<'_>, arch: &mut ModelArch) -> Result<(), ModelError> {
    if let Some(dense) = f.uint(&["intermediate_size_mlp"])? {
        arch.intermediate_size = dense;
    }
    if let Some(chunk) = f.uint(&["attention_chunk_size"])?.filter(|&c| c > 0) {
        arch.sliding_window = Some(SlidingWindow {
            window: chunk,
            layers: SlidingLayers::AllButEvery(4),
        });
    }
    Ok(())
}

/// Falcon: LayerNorm, a plain MLP, biases as `bias` says; llama.cpp's graph has only the
/// parallel layout.
fn falcon(f: &mut Fields<'_>, arch: &mut ModelArch, hidden: u64) -> Result<(), ModelError> {
    let bias = f.boolean("bias").unwrap_or(false);
    arch.attention = standard(bias, bias, false);
    arch.mlp = Mlp::Plain;
    arch.mlp_bias = bias;
    arch.norm = Norm::Layer;
    let new_arch = f.boolean("new_decoder_architecture") == Some(true);
    let parallel = f.boolean("parallel_attn").unwrap_or(true);
    arch.parallel_attention = new_arch || parallel;
    arch.norms_per_layer = if new_arch || !parallel { 2 } else { 1 };
    if f.uint(&["ffn_hidden_size"])?.is_none() {
        arch.intermediate_size = hidden.saturating_mul(4);
    }
    Ok(())
}

/// DeepSeek-V2/V3's multi-head latent attention (Kimi-K2 has the same): one latent of
/// kv_lora_rank plus the RoPE part cached per token.
fn mla(f: &mut Fields<'_>, arch: &mut ModelArch, heads: u64) -> Result<(), ModelError> {
    let kv_lora_rank = f.req(&["kv_lora_rank"])?;
    let qk_rope_head_dim = f.req(&["qk_rope_head_dim"])?;
    let qk_nope_head_dim = f.req(&["qk_nope_head_dim"])?;
    let v_head_dim = f.req(&["v_head_dim"])?;
    let q_lora_rank = f.uint(&["q_lora_rank"])?;
    arch.head_dim = qk_nope_head_dim.saturating_add(qk_rope_head_dim);
    arch.num_kv_heads = heads;
    arch.attention = Attention::Mla {
        q_lora_rank,
        kv_lora_rank,
        qk_nope_head_dim,
        qk_rope_head_dim,
        v_head_dim,
    };
    Ok(())
}

/// The multi-token-prediction layers the checkpoint stores after the decoder's
/// (`num_nextn_predict_layers`, 0 when absent); more than the decoder has is refused.
fn mtp_layers(
    f: &mut Fields<'_>,
    decoder_layers: u64,
    own_embeddings: bool,
) -> Result<MtpLayers, ModelError> {
    let layers = f.uint(&["num_nextn_predict_layers"])?.unwrap_or(0);
    if layers > decoder_layers {
        return Err(f.bad(
            "num_nextn_predict_layers",
            format!("is {layers}, more than num_hidden_layers ({decoder_layers})"),
        ));
    }
    Ok(MtpLayers {
        layers,
        own_embeddings,
    })
}

/// The lightning indexer of DeepSeek-V3.2 and GLM-5. Layers that reuse an earlier layer's
/// top-k (GLM-5.2's `indexer_types` "shared", or the `index_topk_freq`/`index_topk_pattern`
/// that derive them) are refused: gpumem models an indexer in every layer.
/// GLM-5.2's layers that reuse the previous full layer's top-k (`indexer_types` "shared"),
/// as the converter writes them to the GGUF; a first layer that shares is refused (llama.cpp
/// asserts it follows a full one).
fn shared_indexer_layers(f: &mut Fields<'_>) -> Result<SlidingLayers, ModelError> {
    let shared: Vec<bool> = f
        .map
        .get("indexer_types")
        .and_then(Value::as_array)
        .map(|t| t.iter().map(|v| v.as_str() == Some("shared")).collect())
        .unwrap_or_default();
    if shared.first() == Some(&true) {
        return Err(f.bad(
            "indexer_types",
            "makes the first layer share an earlier layer's indexer, which llama.cpp refuses"
                .into(),
        ));
    }
    Ok(SlidingLayers::Listed(shared))
}

fn indexer(f: &mut Fields<'_>) -> Result<Indexer, ModelError> {
    let every_layer = f.uint(&["index_topk_freq"])?.is_none_or(|n| n <= 1)
        && !f
            .map
            .get("index_topk_pattern")
            .and_then(Value::as_str)
            .is_some_and(|p| p.contains('S'));
    if !every_layer {
        return Err(f.bad(
            "index_topk_freq",
            "has layers reusing another layer's top-k by frequency or pattern; gpumem models \
             GLM-5.2's indexer_types listing them"
                .into(),
        ));
    }
    Ok(Indexer {
        heads: f.req(&["index_n_heads"])?,
        head_dim: f.req(&["index_head_dim"])?,
        top_k: f.req(&["index_topk"])?,
    })
}

/// The window transformers applies where [`sliding_window`] records none: Mistral's, Mixtral's
/// and Phi-3's `sliding_window`, and Qwen2's and Qwen3's when `use_sliding_window` is set.
pub(super) fn transformers_window(
    ty: &Family,
    f: &mut Fields<'_>,
) -> Result<Option<u64>, ModelError> {
    let applies = match ty {
        Family::Mistral | Family::Mixtral | Family::Phi3 => true,
        Family::Qwen2 | Family::Qwen2Moe | Family::Qwen3 | Family::Qwen3Moe => {
            f.boolean("use_sliding_window").unwrap_or(false)
        }
        _ => false,
    };
    if !applies {
        return Ok(None);
    }
    Ok(f.uint(&["sliding_window"])?.filter(|&w| w > 0))
}

/// Sliding windows: explicit `layer_types` win; otherwise the family's rule. llama.cpp builds
/// Mistral (as `llama`) and Qwen2/Qwen3 without any window, caching the whole context, so their
/// `sliding_window` / `use_sliding_window` are not applied: counting the window would put the
/// KV cache below what llama.cpp allocates (Mistral-7B-v0.1 at 32768 tokens: 576 MiB counted,
/// 4 GiB allocated).
pub(super) fn sliding_window(
    ty: &Family,
    f: &mut Fields<'_>,
) -> Result<Option<SlidingWindow>, ModelError> {
    if *ty == Family::Gemma4 {
        return gemma4::window(f);
    }
    let Some(window) = f.uint(&["sliding_window"])?.filter(|&w| w > 0) else {
        return Ok(None);
    };
    if ty.window_ignored_by_llama_cpp() {
        return Ok(None);
    }
    let layers = match (f.layer_types("sliding_attention"), ty) {
        (Some(list), _) => Some(SlidingLayers::Listed(list)),
        // gpt-oss alternates as Gemma 2 does when no layer_types are listed (GptOssConfig:
        // sliding where (i + 1) % 2 != 0).
        (None, Family::Gemma2 | Family::GptOss) => Some(SlidingLayers::Even),
        // DeepSeek-V4: every layer reads its window (beside any compressed cache).
        (None, Family::DeepseekV4) => Some(SlidingLayers::All),
        (None, Family::Gemma3) => Some(SlidingLayers::AllButEvery(
            f.uint(&["sliding_window_pattern"])?.unwrap_or(6),
        )),
        _ => None,
    };
    Ok(layers.map(|layers| SlidingWindow { window, layers }))
}
