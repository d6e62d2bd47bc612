//! The shape the walk needs, read once from the architecture: what transformers' modules for
//! the family keep, and which families and features are walked at all.

use super::TrainingError;
use crate::model::arch::ModelArch;

/// How the family's decoder layer is built, where it differs from Llama's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// Llama's: two RMSNorms a layer, SDPA.
    Llama,
    /// Gemma 2's: four Gemma RMSNorms a layer (f32 math, `1 + weight`), eager attention with
    /// its logits soft-capped (transformers runs no SDPA for it), the embeddings scaled, the
    /// final logits soft-capped.
    Gemma2,
}

/// The shape the walk needs, taken once from the architecture.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    pub hidden: u128,
    pub intermediate: u128,
    pub layers: u128,
    pub heads: u128,
    pub kv_heads: u128,
    pub head_dim: u128,
    pub vocab: u128,
    pub qk_norm: bool,
    /// Where the layer differs from Llama's.
    pub layout: Layout,
    /// Routed experts, in the layers that have them.
    pub moe: Option<MoeShape>,
    /// Phi-3's fused q/k/v and gate/up projections.
    pub fused: bool,
    /// A sliding window transformers applies.
    pub window: Option<u128>,
    /// Every layer slides (Mistral, Mixtral, Phi-3): past the window they share one mask.
    pub window_all_layers: bool,
    /// The output head shares the embedding matrix.
    pub tied: bool,
    /// Parameter tensors (each has an optimizer step counter).
    pub param_tensors: u128,
    /// Parameters over all tensors.
    pub params: u128,
    /// Weights of one layer's linear projections (their bf16 copies under autocast).
    pub layer_linear_params: u128,
}

/// Routed experts (Mixtral, Qwen3-MoE: a softmax router, its top k renormalized).
#[derive(Debug, Clone, Copy)]
pub(crate) struct MoeShape {
    pub experts: u128,
    pub top_k: u128,
    pub intermediate: u128,
    /// Layers with experts; the others are dense.
    pub layers: u128,
    /// The first layer has experts.
    pub first_layer: bool,
}

impl Shape {
    pub(crate) fn of(arch: &ModelArch) -> Result<Self, TrainingError> {
        use crate::model::arch::{Attention, Mlp, Norm};
        use crate::model::family::Family;
        let supported = matches!(
            arch.family_kind(),
            Family::Llama
                | Family::Mistral
                | Family::Qwen2
                | Family::Qwen3
                | Family::Phi3
                | Family::Mixtral
                | Family::Qwen3Moe
                | Family::Gemma2
        );
        if !supported {
            return Err(TrainingError::Unmodelled {
                family: arch.family.clone(),
            });
        }
        let Attention::Standard {
            qkv_bias,
            o_bias,
            qk_norm,
        } = arch.attention
        else {
            return Err(TrainingError::Unsupported {
                what: "latent attention",
            });
        };
        if arch.ssm.is_some() || arch.mlp != Mlp::Gated {
            return Err(TrainingError::Unsupported {
                what: "recurrent layers or an ungated MLP",
            });
        }
        let moe = match &arch.moe {
            Some(m) if m.shared_intermediate > 0 || m.router_bias || m.groups.0 > 1 => {
                return Err(TrainingError::Unsupported {
                    what: "shared experts, routing biases or expert groups",
                })
            }
            Some(m) => Some(MoeShape {
                experts: u128::from(m.experts),
                top_k: u128::from(m.experts_per_token),
                intermediate: u128::from(m.expert_intermediate),
                layers: u128::from(arch.moe_layers()),
                first_layer: arch.is_moe_layer(0),
            }),
            None => None,
        };
        let layout = if arch.family_kind() == Family::Gemma2 {
            Layout::Gemma2
        } else {
            Layout::Llama
        };
        let norms = match layout {
            Layout::Llama => 2,
            Layout::Gemma2 => 4,
        };
        if arch.norm != Norm::Rms || arch.norms_per_layer != norms {
            return Err(TrainingError::Unsupported {
                what: "LayerNorm, or norms other than the family's",
            });
        }
        let w = u128::from;
        let (h, heads, kv, d, i) = (
            w(arch.hidden_size),
            w(arch.num_heads),
            w(arch.num_kv_heads),
            w(arch.head_dim),
            w(arch.intermediate_size),
        );
        let fused = arch.fused_projections;
        // Two norms, the projections (q, k, v, o, gate, up, down; Phi-3 fuses q/k/v and
        // gate/up), their biases and the per-head norms.
        let projections = if fused { 4 } else { 7 };
        let per_layer_tensors = u128::from(norms)
            + projections
            + if qkv_bias { 3 } else { 0 }
            + u128::from(o_bias)
            + if qk_norm { 2 } else { 0 };
        Ok(Shape {
            hidden: h,
            intermediate: i,
            layers: w(arch.num_layers),
            heads,
            kv_heads: kv,
            head_dim: d,
            vocab: w(arch.vocab_size),
            qk_norm,
            layout,
            moe,
            fused,
            window_all_layers: matches!(
                arch.family_kind(),
                Family::Mistral | Family::Mixtral | Family::Phi3
            ),
            window: arch
                .transformers_window
                .or(arch.sliding_window.as_ref().map(|w| w.window))
                .map(u128::from),
            tied: arch.tie_word_embeddings,
            param_tensors: w(arch.num_layers) * per_layer_tensors
                + 2
                + u128::from(!arch.tie_word_embeddings),
            params: w(arch.params().total),
            layer_linear_params: h * (heads * d + 2 * kv * d) + heads * d * h + 3 * h * i,
        })
    }
}
