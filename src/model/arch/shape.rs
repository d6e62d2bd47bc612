//! The one gate every model source passes before any arithmetic: each shape field within the
//! range real models occupy, named as each format names it.

use super::*;

/// The most layers [`ModelArch::check_plausible`] accepts (the largest models have under 200).
const MAX_LAYERS: u64 = 1_024;
/// The most experts a token is routed to that gpumem plans: published models route to 1-16
/// (DeepSeek-V3 and Kimi-K2 8, Qwen3-Next 10); the replay's work grows with it.
const MAX_EXPERTS_PER_TOKEN: u64 = 128;

/// Why `layers` is no model's layer count, if it is not; checked before anything walks the
/// layers.
pub(crate) fn implausible_layer_count(layers: u64) -> Option<String> {
    match layers {
        0 => Some("is 0, must be at least 1".into()),
        n if n > MAX_LAYERS => Some(format!("is {n}, implausibly large (at most {MAX_LAYERS})")),
        _ => None,
    }
}

/// A shape field [`ModelArch::check_plausible`] can refuse, named as each format names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShapeField {
    /// `hidden_size` (GGUF `embedding_length`).
    HiddenSize,
    /// `intermediate_size` (GGUF `feed_forward_length`).
    IntermediateSize,
    /// `num_hidden_layers` (GGUF `block_count`).
    NumLayers,
    /// `num_attention_heads` (GGUF `attention.head_count`).
    NumHeads,
    /// `num_key_value_heads` (GGUF `attention.head_count_kv`).
    NumKvHeads,
    /// `vocab_size` (GGUF `vocab_size`).
    VocabSize,
    /// `norms_per_layer` (GGUF `norms_per_layer`).
    NormsPerLayer,
    /// `head_dim` (GGUF `attention.key_length`).
    HeadDim,
    /// `q_lora_rank` (GGUF `attention.q_lora_rank`).
    QLoraRank,
    /// `kv_lora_rank` (GGUF `attention.kv_lora_rank`).
    KvLoraRank,
    /// `qk_nope_head_dim` (GGUF `attention.key_length`).
    QkNopeHeadDim,
    /// `qk_rope_head_dim` (GGUF `rope.dimension_count`).
    QkRopeHeadDim,
    /// `v_head_dim` (GGUF `attention.value_length`).
    VHeadDim,
    /// `num_experts` (GGUF `expert_count`).
    Experts,
    /// `num_experts_per_tok` (GGUF `expert_used_count`).
    ExpertsPerToken,
    /// `moe_intermediate_size` (GGUF `expert_feed_forward_length`).
    ExpertIntermediate,
    /// `shared_expert_intermediate_size` (GGUF `expert_shared_count`).
    SharedIntermediate,
    /// `sliding_window` (GGUF `attention.sliding_window`).
    SlidingWindow,
    /// `conv_kernel` (GGUF `ssm.conv_kernel`).
    SsmConvKernel,
    /// `intermediate_size` of a Mamba mixer (GGUF `ssm.inner_size`).
    SsmInner,
    /// `state_size` (GGUF `ssm.state_size`).
    SsmState,
    /// `time_step_rank` (GGUF `ssm.time_step_rank`).
    SsmDtRank,
    /// `n_groups` (GGUF `ssm.group_count`).
    SsmGroups,
}

impl ShapeField {
    /// The config.json key.
    pub fn config_name(self) -> &'static str {
        match self {
            ShapeField::HiddenSize => "hidden_size",
            ShapeField::IntermediateSize => "intermediate_size",
            ShapeField::NumLayers => "num_hidden_layers",
            ShapeField::NumHeads => "num_attention_heads",
            ShapeField::NumKvHeads => "num_key_value_heads",
            ShapeField::VocabSize => "vocab_size",
            ShapeField::NormsPerLayer => "norms_per_layer",
            ShapeField::HeadDim => "head_dim",
            ShapeField::QLoraRank => "q_lora_rank",
            ShapeField::KvLoraRank => "kv_lora_rank",
            ShapeField::QkNopeHeadDim => "qk_nope_head_dim",
            ShapeField::QkRopeHeadDim => "qk_rope_head_dim",
            ShapeField::VHeadDim => "v_head_dim",
            ShapeField::Experts => "num_experts",
            ShapeField::ExpertsPerToken => "num_experts_per_tok",
            ShapeField::ExpertIntermediate => "moe_intermediate_size",
            ShapeField::SharedIntermediate => "shared_expert_intermediate_size",
            ShapeField::SlidingWindow => "sliding_window",
            ShapeField::SsmConvKernel => "conv_kernel",
            ShapeField::SsmInner => "intermediate_size",
            ShapeField::SsmState => "state_size",
            ShapeField::SsmDtRank => "time_step_rank",
            ShapeField::SsmGroups => "n_groups",
        }
    }

    /// The GGUF key, after the `<architecture>.` prefix.
    pub fn gguf_key(self) -> &'static str {
        match self {
            ShapeField::HiddenSize => "embedding_length",
            ShapeField::IntermediateSize => "feed_forward_length",
            ShapeField::NumLayers => "block_count",
            ShapeField::NumHeads => "attention.head_count",
            ShapeField::NumKvHeads => "attention.head_count_kv",
            ShapeField::VocabSize => "vocab_size",
            ShapeField::NormsPerLayer => "norms_per_layer",
            ShapeField::HeadDim => "attention.key_length",
            ShapeField::QLoraRank => "attention.q_lora_rank",
            ShapeField::KvLoraRank => "attention.kv_lora_rank",
            ShapeField::QkNopeHeadDim => "attention.key_length",
            ShapeField::QkRopeHeadDim => "rope.dimension_count",
            ShapeField::VHeadDim => "attention.value_length",
            ShapeField::Experts => "expert_count",
            ShapeField::ExpertsPerToken => "expert_used_count",
            ShapeField::ExpertIntermediate => "expert_feed_forward_length",
            ShapeField::SharedIntermediate => "expert_shared_count",
            ShapeField::SlidingWindow => "attention.sliding_window",
            ShapeField::SsmConvKernel => "ssm.conv_kernel",
            ShapeField::SsmInner => "ssm.inner_size",
            ShapeField::SsmState => "ssm.state_size",
            ShapeField::SsmDtRank => "ssm.time_step_rank",
            ShapeField::SsmGroups => "ssm.group_count",
        }
    }
}

/// Most parameters a shape may give (2^50, about a quadrillion; the largest published models
/// have about 2^41).
pub const MAX_PARAMETERS: u128 = 1 << 50;

impl ModelArch {
    /// The one gate every model source passes before any arithmetic: each shape field must lie
    /// in a range real models occupy (and be non-zero where a zero would make a part vanish),
    /// and the parameter count they give must be plausible. Within these limits every product
    /// the estimate forms fits in 128 bits, so no figure can wrap. Returns the offending field
    /// (by its config.json name) and why.
    pub fn check_plausible(&self) -> Result<(), (ShapeField, String)> {
        // The layer count first: counting attention layers walks them.
        if let Some(why) = implausible_layer_count(self.num_layers) {
            return Err((ShapeField::NumLayers, why));
        }
        if self.head_dim == 0 && self.num_heads > self.hidden_size {
            return Err((
                ShapeField::HeadDim,
                format!(
                    "is 0: num_attention_heads ({}) exceeds hidden_size ({}) and no head_dim is \
                     given",
                    self.num_heads, self.hidden_size
                ),
            ));
        }
        for (field, value, min, max) in self.bounded_fields() {
            if value < min {
                return Err((field, format!("is {value}, must be at least {min}")));
            }
            if value > max {
                return Err((
                    field,
                    format!("is {value}, implausibly large (at most {max})"),
                ));
            }
        }
        if self.num_kv_heads > self.num_heads {
            return Err((
                ShapeField::NumKvHeads,
                format!(
                    "is {}, more than num_attention_heads ({})",
                    self.num_kv_heads, self.num_heads
                ),
            ));
        }
        let total = self.params_wide()[0];
        if total > MAX_PARAMETERS {
            return Err((
                ShapeField::NumLayers,
                format!(
                    "is {} and with the other dimensions gives {total} parameters, implausibly \
                     many (at most {MAX_PARAMETERS})",
                    self.num_layers
                ),
            ));
        }
        Ok(())
    }

    /// Every bounded field with its least and greatest plausible value, in the order they are
    /// checked (the first out of range is the one named).
    fn bounded_fields(&self) -> Vec<(ShapeField, u64, u64, u64)> {
        // A model without attention layers (Mamba) has no attention heads; its mixer's own
        // fields are checked instead.
        let min_heads = u64::from(self.attention_layer_count() > 0);
        let mut fields: Vec<(ShapeField, u64, u64, u64)> = vec![
            (ShapeField::HiddenSize, self.hidden_size, 1, 1 << 20),
            (
                ShapeField::IntermediateSize,
                self.intermediate_size,
                0,
                1 << 22,
            ),
            (ShapeField::NumHeads, self.num_heads, min_heads, 1 << 16),
            (
                ShapeField::NumKvHeads,
                self.num_kv_heads,
                min_heads,
                1 << 16,
            ),
            (ShapeField::VocabSize, self.vocab_size, 1, 1 << 24),
            (ShapeField::NormsPerLayer, self.norms_per_layer, 0, 16),
        ];
        if let Some(s) = &self.ssm {
            fields.extend([
                (ShapeField::SsmConvKernel, s.conv_kernel, 1, 64),
                (ShapeField::SsmInner, s.inner, 1, 1 << 21),
                (ShapeField::SsmState, s.state, 1, 1 << 12),
                (ShapeField::SsmDtRank, s.dt_rank, 1, 1 << 16),
                (ShapeField::SsmGroups, s.groups, 0, 1 << 12),
            ]);
        }
        if let Attention::Mla {
            q_lora_rank,
            kv_lora_rank,
            qk_nope_head_dim,
            qk_rope_head_dim,
            v_head_dim,
        } = &self.attention
        {
            if let Some(r) = q_lora_rank {
                fields.push((ShapeField::QLoraRank, *r, 1, 1 << 16));
            }
            fields.extend([
                (ShapeField::KvLoraRank, *kv_lora_rank, 1, 1 << 16),
                (ShapeField::QkNopeHeadDim, *qk_nope_head_dim, 0, 1 << 16),
                (ShapeField::QkRopeHeadDim, *qk_rope_head_dim, 0, 1 << 16),
                (ShapeField::VHeadDim, *v_head_dim, 1, 1 << 16),
            ]);
        }
        // After MLA's own dimensions, which it is derived from and which name the cause.
        fields.push((ShapeField::HeadDim, self.head_dim, min_heads, 1 << 16));
        if let Some(m) = &self.moe {
            fields.extend([
                (ShapeField::Experts, m.experts, 1, 1 << 12),
                (
                    ShapeField::ExpertsPerToken,
                    m.experts_per_token,
                    1,
                    m.experts.min(MAX_EXPERTS_PER_TOKEN),
                ),
                (
                    ShapeField::ExpertIntermediate,
                    m.expert_intermediate,
                    1,
                    1 << 22,
                ),
                (
                    ShapeField::SharedIntermediate,
                    m.shared_intermediate,
                    0,
                    1 << 26,
                ),
            ]);
        }
        if let Some(w) = &self.sliding_window {
            fields.push((ShapeField::SlidingWindow, w.window, 1, u64::MAX));
        }
        fields
    }
}
