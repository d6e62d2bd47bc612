//! A decoder-only transformer's architecture, and the exact parameter and KV-cache arithmetic
//! over it.

use serde::Serialize;

/// How a layer attends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Attention {
    /// Multi-head / grouped-query / multi-query attention.
    Standard {
        /// Biases on the q, k and v projections (Qwen2, GPT-NeoX).
        qkv_bias: bool,
        /// Bias on the output projection (GPT-NeoX).
        o_bias: bool,
        /// Per-head RMSNorm on q and k (Qwen3, Gemma 3).
        qk_norm: bool,
    },
    /// DeepSeek's multi-head latent attention: K and V are cached as one compressed latent.
    Mla {
        /// Rank of the q compression (`None`: q is projected directly).
        q_lora_rank: Option<u64>,
        /// Rank of the KV latent.
        kv_lora_rank: u64,
        /// Per-head q/k dimensions without rotary embedding.
        qk_nope_head_dim: u64,
        /// Per-head q/k rotary dimensions (shared across heads for k).
        qk_rope_head_dim: u64,
        /// Per-head dimension of V (may differ from K's under MLA).
        v_head_dim: u64,
    },
}

/// The feed-forward block, which sets the weight count per layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mlp {
    /// gate, up and down projections (SwiGLU/GeGLU).
    Gated,
    /// up and down projections (GELU MLP: GPT-NeoX, Falcon).
    Plain,
}

/// Normalisation layers: RMSNorm has one weight vector, LayerNorm two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Norm {
    /// RMSNorm: one weight vector.
    Rms,
    /// LayerNorm: weight and bias.
    Layer,
}

/// Mixture-of-experts feed-forward layers: all experts are stored, `active` run per token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Moe {
    /// Routed experts per MoE layer.
    pub experts: u64,
    /// Experts each token is routed to.
    pub experts_per_token: u64,
    /// Intermediate size of one routed expert.
    pub expert_intermediate: u64,
    /// Intermediate size of the always-active shared expert(s), summed (0: none).
    pub shared_intermediate: u64,
    /// The first this many layers are dense.
    pub first_dense_layers: u64,
    /// Every this many layers (after the dense ones) is MoE.
    pub layer_freq: u64,
    /// A per-expert routing bias (DeepSeek-V3's `e_score_correction_bias`).
    pub router_bias: bool,
    /// The shared expert's output is scaled by a learned sigmoid gate (`shared_expert_gate`,
    /// one `hidden` vector: Qwen2-MoE, Qwen3-Next).
    pub shared_gate: bool,
    /// The routed experts' weights are multiplied by a factor other than 1 (DeepSeek-V3's and
    /// GLM-4.5's `routed_scaling_factor`): llama.cpp scales them by an op of its own.
    pub scaled_weights: bool,
    /// Experts routed within groups (DeepSeek-V2/V3's `n_group`, `topk_group`; llama.cpp's
    /// `expert_group_count`, `expert_group_used_count`): the groups, and those a token uses.
    /// `(0, 0)` or `(1, _)`: no groups.
    pub groups: (u64, u64),
}

/// Which recurrent mixer a state-space layer runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SsmKind {
    /// Mamba (v1): x_proj to (Δ, B, C), a Δ projection of rank `dt_rank`, a scan state of
    /// `state` per inner channel.
    Mamba,
    /// Jamba's Mamba: Mamba (v1) with RMS norms on Δ, B and C.
    JambaMamba,
    /// Mamba-2 (SSD): one in-projection to (z, x, B, C, Δ) with `groups` B/C groups and
    /// `dt_rank` heads, a gated norm before the out-projection.
    Mamba2,
    /// Gated DeltaNet (Qwen3-Next's linear attention): `groups` key heads of `state`
    /// dimensions, `dt_rank` value heads sharing `inner` (= value heads × value head size), a
    /// `head_k × head_v` state per value head.
    GatedDeltaNet,
    /// RWKV-6 (Finch) time mixing: a data-dependent token shift (a LoRA of rank `ranks[0]`
    /// producing five interpolations), a decay LoRA of rank `ranks[1]`, receptance, key, value
    /// and gate projections, a WKV state of `state` (the head size) per channel and a group
    /// norm; its channel mix adds a receptance projection to the key/value MLP.
    Rwkv6,
    /// RWKV-7 (Goose) time mixing: fused token-shift interpolations, LoRAs for the decay,
    /// in-context learning rate, value-residual mix and output gate (ranks `ranks[0..4]`),
    /// receptance, key and value projections, a WKV state of `state` per channel and a group
    /// norm; its channel mix is the key/value MLP alone.
    Rwkv7,
}

/// A recurrent (state-space or linear-attention) mixer in place of attention: a fixed state
/// per sequence instead of a KV cache that grows with the context. The fields are llama.cpp's
/// `ssm.*` hyperparameters, which describe the Mamba kinds and Gated DeltaNet; RWKV's token
/// shift is a convolution of `conv_kernel − 1` past steps (llama.cpp's `token_shift_count`)
/// over `inner` (= the model width) channels, its WKV state `state` (the head size) per channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Ssm {
    /// Which mixer.
    pub kind: SsmKind,
    /// Width of the causal convolution (`d_conv`); the conv state keeps `d_conv − 1` steps.
    pub conv_kernel: u64,
    /// Inner width (`d_inner`: Mamba's 2 × hidden, Gated DeltaNet's value width).
    pub inner: u64,
    /// State size (`d_state`; Gated DeltaNet: the key head size).
    pub state: u64,
    /// Rank of Mamba's Δ projection; heads of Mamba-2; value heads of Gated DeltaNet.
    pub dt_rank: u64,
    /// B/C groups of Mamba-2; key heads of Gated DeltaNet; 0 for Mamba.
    pub groups: u64,
    /// The convolution has a bias (Mamba, Mamba-2; never Gated DeltaNet's).
    pub conv_bias: bool,
    /// Mamba-2's gated RMSNorm before the out-projection (Falcon-H1 configs may leave it out;
    /// Gated DeltaNet always has its own); for Mamba, FalconMamba's weightless RMS norms over
    /// Δ, B and C (`ssm.dt_b_c_rms`); always set for the other kinds.
    pub norm: bool,
    /// RWKV's low-rank projections: RWKV-6 (token shift, decay, 0, 0), RWKV-7 (decay, in-context
    /// learning rate, value-residual mix, gate); zeros for the other kinds.
    pub ranks: [u64; 4],
}

impl Ssm {
    /// f32 elements of recurrent state one sequence keeps per layer: the convolution's last
    /// `d_conv − 1` inputs (every channel it convolves) and the scan state, as llama.cpp
    /// allocates them (R and S).
    pub fn state_elements_per_layer(&self) -> u128 {
        let w = u128::from;
        w(self.conv_kernel.saturating_sub(1)) * self.conv_channels() + w(self.state) * w(self.inner)
    }

    /// Channels the convolution runs over: the inner width plus Mamba-2's B and C or Gated
    /// DeltaNet's q and k.
    pub fn conv_channels(&self) -> u128 {
        u128::from(self.inner) + 2 * u128::from(self.groups) * u128::from(self.state)
    }

    /// Parameters of one mixer, for a model of width `hidden`.
    fn params(&self, hidden: u64) -> u128 {
        let w = u128::from;
        let (h, inner, state, rank) = (w(hidden), w(self.inner), w(self.state), w(self.dt_rank));
        let conv = self.conv_channels();
        match self.kind {
            // in_proj (x and z), the depthwise conv with bias, x_proj (Δ, B, C), dt_proj with
            // bias, A, D and out_proj; Jamba adds norms over Δ, B and C.
            SsmKind::Mamba | SsmKind::JambaMamba => {
                let norms = if self.kind == SsmKind::JambaMamba {
                    rank + 2 * state
                } else {
                    0
                };
                h * 2 * inner
                    + inner * w(self.conv_kernel)
                    + if self.conv_bias { inner } else { 0 }
                    + inner * (rank + 2 * state)
                    + rank * inner
                    + inner
                    + inner * state
                    + inner
                    + inner * h
                    + norms
            }
            // in_proj (z, x, B, C, Δ), the conv with bias, Δ bias, A and D per head, the gated
            // norm, out_proj.
            SsmKind::Mamba2 => {
                h * (inner + conv + rank)
                    + conv * w(self.conv_kernel)
                    + if self.conv_bias { conv } else { 0 }
                    + 3 * rank
                    + if self.norm { inner } else { 0 }
                    + inner * h
            }
            // in_proj_qkvz, in_proj_ba (β and α per value head), the conv without bias, Δ bias
            // and A per value head, the gated norm over one value head, out_proj.
            SsmKind::GatedDeltaNet => {
                let head_v = inner / rank.max(1);
                h * (conv + inner)
                    + h * 2 * rank
                    + conv * w(self.conv_kernel)
                    + 2 * rank
                    + head_v
                    + inner * h
            }
            // Receptance, key, value and gate projections and the output; the token-shift LoRA
            // (five interpolations) and the decay LoRA; the shift's six interpolation vectors,
            // the bonus (`time_first`), the decay and the group norm (weight and bias). The
            // channel mix's receptance and two interpolation vectors are counted here too, its
            // key and value being the plain MLP.
            SsmKind::Rwkv6 => {
                let [mix, decay, ..] = self.ranks.map(w);
                4 * h * inner
                    + inner * h
                    + 2 * 5 * mix * h
                    + decay * (h + inner)
                    + 6 * h
                    + 2 * inner
                    + 2 * inner
                    + h * h
                    + 2 * h
            }
            // Receptance, key and value projections and the output; four LoRAs with their base
            // vectors (the first layer's value-residual LoRA, which it never uses, is of the
            // ICLR rank in llama.cpp's GGUFs: see `params_wide`); six fused interpolation vectors, the key and
            // receptance scales (k_k, k_a, r_k) and the group norm. The channel mix's
            // interpolation vector is counted here too.
            SsmKind::Rwkv7 => {
                let ranks: u128 = self.ranks.map(w).iter().sum();
                3 * h * inner
                    + inner * h
                    + 2 * ranks * h
                    + 3 * h
                    + 6 * h
                    + 3 * inner
                    + 2 * inner
                    + h
            }
        }
    }
}

/// A set of layers by rule: which use a sliding attention window, or which are recurrent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SlidingLayers {
    /// Every layer (Mistral 7B v0.1).
    All,
    /// Layers 0, 2, 4, … (Gemma 2).
    Even,
    /// All but every `n`-th layer (Gemma 3: 5 local, 1 global).
    AllButEvery(u64),
    /// An explicit list (HF `layer_types`).
    Listed(Vec<bool>),
}

impl SlidingLayers {
    /// Whether layer `i` is in the set.
    pub fn contains(&self, i: u64) -> bool {
        match self {
            SlidingLayers::All => true,
            SlidingLayers::Even => i % 2 == 0,
            SlidingLayers::AllButEvery(n) => (i + 1) % (*n).max(1) != 0,
            SlidingLayers::Listed(v) => v.get(i as usize).copied().unwrap_or(false),
        }
    }
}

/// A sliding attention window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SlidingWindow {
    /// Tokens a sliding layer attends to (and caches).
    pub window: u64,
    /// Which layers use the window; the others attend to the full context.
    pub layers: SlidingLayers,
}

/// Which of Granite's multipliers a model sets (each a scale op in llama.cpp's graph).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct GraniteScales {
    /// `embedding_scale`: the token embeddings.
    pub embedding: bool,
    /// `residual_scale`: attention's or the mixer's output, and the feed-forward block's,
    /// before each joins the residual.
    pub residual: bool,
    /// `logit_scale`: the logits.
    pub logits: bool,
}

/// Everything the memory arithmetic needs about a model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelArch {
    /// Name shown in reports.
    pub name: String,
    /// HF `model_type` (llama, mistral, qwen2, gemma2, deepseek_v2, …).
    pub family: String,
    /// Model width (`hidden_size`, `n_embd`).
    pub hidden_size: u64,
    /// Dense feed-forward width (`intermediate_size`, `n_ff`).
    pub intermediate_size: u64,
    /// Decoder layers (`num_hidden_layers`, `block_count`).
    pub num_layers: u64,
    /// Attention (query) heads.
    pub num_heads: u64,
    /// Key/value heads: fewer than `num_heads` under GQA, 1 under MQA.
    pub num_kv_heads: u64,
    /// Per-head dimension (not always hidden/heads: Gemma).
    pub head_dim: u64,
    /// Vocabulary size: rows of the embedding and output matrices.
    pub vocab_size: u64,
    /// Output projection shares the embedding matrix.
    pub tie_word_embeddings: bool,
    /// Longest context the model was trained for.
    pub max_position_embeddings: Option<u64>,
    /// How attention stores K and V, which sets the KV-cache size.
    pub attention: Attention,
    /// Dense or mixture-of-experts, with its gating.
    pub mlp: Mlp,
    /// Biases in the feed-forward projections.
    pub mlp_bias: bool,
    /// RMSNorm or LayerNorm.
    pub norm: Norm,
    /// Norm layers per decoder layer (2 usually; 4 in Gemma 2/3; 1 in Falcon-7B).
    pub norms_per_layer: u64,
    /// Mixture of experts, if any.
    pub moe: Option<Moe>,
    /// Sliding attention window, if any.
    pub sliding_window: Option<SlidingWindow>,
    /// A learned attention sink per head and layer (gpt-oss).
    pub attention_sinks: bool,
    /// A recurrent mixer instead of attention in the layers `recurrent_layers` names (every
    /// layer for Mamba, when `num_heads` may be 0).
    pub ssm: Option<Ssm>,
    /// Which layers run `ssm` rather than attention (ignored without one).
    pub recurrent_layers: SlidingLayers,
    /// Attention runs beside the layer's other block rather than before it: beside the mixer
    /// in Falcon-H1 (whose recurrent layers so hold a KV cache as well as a state), beside the
    /// MLP, on the same normed input, in Falcon.
    pub parallel_attention: bool,
    /// A feed-forward block is a layer of its own, with neither attention nor a recurrent
    /// mixer beside it (Nemotron-H's MLP and expert layers); false in most models, where every
    /// layer's feed-forward block follows its attention or mixer.
    pub ffn_blocks_alone: bool,
    /// Layers with a feed-forward block (dense or experts): every layer in most models; in
    /// Nemotron-H only the MLP layers, its mixer and attention layers having none.
    pub ffn_layers: SlidingLayers,
    /// Attention output gated per head by a sigmoid of a second query-sized projection
    /// (Qwen3-Next), which doubles `q_proj`.
    pub attn_output_gate: bool,
    /// Under MLA, the engine caches full per-head K and V instead of the latent (llama.cpp on
    /// GGUFs converted before attn_kv_b was split: about 9 × the latent for DeepSeek-V2).
    pub mla_full_cache: bool,
    /// The publisher counts active parameters without the input embedding table (a lookup, not
    /// compute), as OpenAI does for gpt-oss.
    pub active_without_embedding: bool,
    /// A norm right after the token embedding (RWKV's `ln0`).
    pub embedding_norm: bool,
    /// The query is scaled by an op of its own before attention (Gemma's
    /// `query_pre_attn_scalar`), which llama.cpp's graph keeps live beside the scores.
    pub query_prescaled: bool,
    /// Phi-3's fused projections: q, k and v in one matrix (`qkv_proj`), the gated MLP's gate
    /// and up in another (`gate_up_proj`), whose outputs llama.cpp keeps beside their splits.
    pub fused_projections: bool,
    /// The experts' gate and up projections are one tensor (`ffn_gate_up_exps`, as
    /// `convert_hf_to_gguf.py --fuse-gate-up-exps` writes them): one matmul, split by views.
    pub fused_gate_up_exps: bool,
    /// No rotary embedding in the attention layers (Granite-4.0-H's `nope`, written as
    /// `rope.scaling.finetuned` false).
    pub no_rope: bool,
    /// Granite's multipliers that llama.cpp applies as ops of their own: the embeddings, each
    /// block's output before its residual, and the logits.
    pub granite_scales: GraniteScales,
    /// Qwen3-Next's linear-attention layers project q, k, v and the output gate z with one
    /// matrix (`ssm_in`, in GGUFs converted before llama.cpp split it into `attn_qkv` and
    /// `attn_gate`); llama.cpp then copies each part out, and keeps the projection until z is
    /// used. The same parameters either way.
    pub joint_qkvz: bool,
}

/// Parameter counts from the shape (before any file says otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ParamCount {
    /// Every stored parameter, all experts included.
    pub total: u64,
    /// Parameters used per token (MoE: routed experts counted `experts_per_token` times).
    pub active: u64,
    /// Embedding (and untied output) parameters.
    pub embedding: u64,
}

/// The most layers [`ModelArch::check_plausible`] accepts (the largest models have under 200).
const MAX_LAYERS: u64 = 10_000;

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
    fn norm_params(&self) -> u64 {
        match self.norm {
            Norm::Rms => self.hidden_size,
            Norm::Layer => self.hidden_size.saturating_mul(2),
        }
    }

    /// Parameters of one layer's attention block.
    pub fn attention_params(&self) -> u64 {
        u64::try_from(self.attention_params_wide()).unwrap_or(u64::MAX)
    }

    fn attention_params_wide(&self) -> u128 {
        let h = u128::from(self.hidden_size);
        match &self.attention {
            Attention::Standard {
                qkv_bias,
                o_bias,
                qk_norm,
            } => {
                let q = u128::from(self.num_heads) * u128::from(self.head_dim);
                let kv = u128::from(self.num_kv_heads) * u128::from(self.head_dim);
                let mut p = h * q + 2 * h * kv + q * h;
                if self.attn_output_gate {
                    p += h * q;
                }
                if *qkv_bias {
                    p += q + 2 * kv;
                }
                if *o_bias {
                    p += h;
                }
                if *qk_norm {
                    p += 2 * u128::from(self.head_dim);
                }
                p
            }
            Attention::Mla {
                q_lora_rank,
                kv_lora_rank,
                qk_nope_head_dim,
                qk_rope_head_dim,
                v_head_dim,
            } => {
                let w = |v: u64| u128::from(v);
                let heads = w(self.num_heads);
                let qk = w(*qk_nope_head_dim) + w(*qk_rope_head_dim);
                let q = match q_lora_rank {
                    Some(r) => h * w(*r) + w(*r) + w(*r) * heads * qk,
                    None => h * heads * qk,
                };
                let kv_a = h * (w(*kv_lora_rank) + w(*qk_rope_head_dim)) + w(*kv_lora_rank);
                let kv_b = w(*kv_lora_rank) * heads * (w(*qk_nope_head_dim) + w(*v_head_dim));
                let o = heads * w(*v_head_dim) * h;
                q + kv_a + kv_b + o
            }
        }
    }

    fn ffn_params(&self, intermediate: u64) -> u64 {
        let h = self.hidden_size;
        let p = match self.mlp {
            Mlp::Gated => {
                3 * u128::from(h) * u128::from(intermediate)
                    + if self.mlp_bias {
                        2 * u128::from(intermediate) + u128::from(h)
                    } else {
                        0
                    }
            }
            Mlp::Plain => {
                2 * u128::from(h) * u128::from(intermediate)
                    + if self.mlp_bias {
                        u128::from(intermediate) + u128::from(h)
                    } else {
                        0
                    }
            }
        };
        u64::try_from(p).unwrap_or(u64::MAX)
    }

    /// Whether layer `i` is a mixture-of-experts layer.
    pub fn is_moe_layer(&self, i: u64) -> bool {
        match &self.moe {
            Some(m) => {
                self.has_ffn(i)
                    && i >= m.first_dense_layers
                    && (i - m.first_dense_layers) % m.layer_freq.max(1) == 0
            }
            None => false,
        }
    }

    /// Number of MoE layers.
    pub fn moe_layers(&self) -> u64 {
        (0..self.num_layers)
            .filter(|&i| self.is_moe_layer(i))
            .count() as u64
    }

    /// Whether layer `i` has a feed-forward block (dense or experts).
    pub fn has_ffn(&self, i: u64) -> bool {
        self.ffn_layers.contains(i)
    }

    /// Layers with a feed-forward block.
    pub fn ffn_layer_count(&self) -> u64 {
        (0..self.num_layers).filter(|&i| self.has_ffn(i)).count() as u64
    }

    /// Whether layer `i` attends (and so holds a KV cache): not a feed-forward block alone, and
    /// not recurrent unless the model attends beside its mixers.
    pub fn has_attention(&self, i: u64) -> bool {
        (self.parallel_attention || !self.is_recurrent_layer(i))
            && !(self.ffn_blocks_alone && self.has_ffn(i))
    }

    /// Exact parameter counts from the architecture (saturating at `u64::MAX` for absurd
    /// shapes, which [`ModelArch::check_plausible`] rejects first).
    pub fn params(&self) -> ParamCount {
        let sat = |v: u128| u64::try_from(v).unwrap_or(u64::MAX);
        let [total, active, embedding] = self.params_wide();
        ParamCount {
            total: sat(total),
            active: sat(active),
            embedding: sat(embedding),
        }
    }

    // Total, active and embedding parameters in 128 bits: with every field within
    // `check_plausible`'s limits no product reaches 2^100, so nothing here can wrap.
    fn params_wide(&self) -> [u128; 3] {
        let w = |v: u64| u128::from(v);
        let embed = w(self.vocab_size) * w(self.hidden_size);
        let embedding = if self.tie_word_embeddings {
            embed
        } else {
            2 * embed
        };
        let sinks = if self.attention_sinks {
            w(self.num_heads)
        } else {
            0
        };
        let recurrent = w(self.recurrent_layer_count());
        let attention_layers = w(self.attention_layer_count());
        let mut mixers = self
            .ssm
            .map_or(0, |m| recurrent * m.params(self.hidden_size))
            + attention_layers * (self.attention_params_wide() + sinks);
        // RWKV-7's first layer keeps a value-residual LoRA it never uses, converted at the ICLR
        // rank (llama.cpp loads it so); the others are of their own rank.
        if let Some(m) = self
            .ssm
            .filter(|m| m.kind == SsmKind::Rwkv7 && recurrent > 0)
        {
            let h = w(self.hidden_size);
            mixers = mixers + 2 * h * w(m.ranks[1]) - 2 * h * w(m.ranks[2]);
        }
        let norms = w(self.num_layers) * w(self.norms_per_layer) * w(self.norm_params());
        let dense_ffn = w(self.ffn_params(self.intermediate_size));
        let moe_layers = w(self.moe_layers());
        let dense_layers = w(self.ffn_layer_count()) - moe_layers;
        let final_norms = if self.embedding_norm { 2 } else { 1 };
        let mut total = embedding
            + final_norms * w(self.norm_params())
            + mixers
            + norms
            + dense_layers * dense_ffn;
        let mut active = total;
        if let Some(m) = &self.moe {
            let expert = w(self.ffn_params(m.expert_intermediate));
            let shared = if m.shared_intermediate > 0 {
                w(self.ffn_params(m.shared_intermediate))
            } else {
                0
            };
            let router = w(m.experts) * w(self.hidden_size)
                + if m.router_bias { w(m.experts) } else { 0 }
                + if m.shared_gate {
                    w(self.hidden_size)
                } else {
                    0
                };
            total += moe_layers * (w(m.experts) * expert + shared + router);
            active += moe_layers * (w(m.experts_per_token) * expert + shared + router);
        }
        if self.active_without_embedding {
            active -= embed;
        }
        [total, active, embedding]
    }

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
                (ShapeField::Experts, m.experts, 1, 1 << 16),
                (
                    ShapeField::ExpertsPerToken,
                    m.experts_per_token,
                    1,
                    m.experts,
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
        for (field, value, min, max) in fields {
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

    /// Whether layer `i` uses the sliding window (only attention layers do).
    pub fn is_sliding_layer(&self, i: u64) -> bool {
        match &self.sliding_window {
            None => false,
            Some(w) => w.layers.contains(i) && self.has_attention(i),
        }
    }

    /// Whether layer `i` runs the recurrent mixer instead of attention.
    pub fn is_recurrent_layer(&self, i: u64) -> bool {
        self.ssm.is_some() && self.recurrent_layers.contains(i)
    }

    /// Layers running the recurrent mixer.
    pub fn recurrent_layer_count(&self) -> u64 {
        if self.ssm.is_none() {
            return 0;
        }
        (0..self.num_layers)
            .filter(|&i| self.recurrent_layers.contains(i))
            .count() as u64
    }

    /// Layers with attention, which hold a KV cache.
    pub fn attention_layer_count(&self) -> u64 {
        (0..self.num_layers)
            .filter(|&i| self.has_attention(i))
            .count() as u64
    }

    /// KV-cache elements cached per token per attention layer (K and V, or MLA's latent).
    pub fn kv_elements_per_token_layer(&self) -> u64 {
        match &self.attention {
            // Saturating, never wrapping: an unchecked shape must not shrink the cache.
            Attention::Standard { .. } => 2u64
                .saturating_mul(self.num_kv_heads)
                .saturating_mul(self.head_dim),
            Attention::Mla {
                qk_nope_head_dim,
                qk_rope_head_dim,
                v_head_dim,
                ..
            } if self.mla_full_cache => self.num_kv_heads.saturating_mul(
                qk_nope_head_dim
                    .saturating_add(*qk_rope_head_dim)
                    .saturating_add(*v_head_dim),
            ),
            Attention::Mla {
                kv_lora_rank,
                qk_rope_head_dim,
                ..
            } => kv_lora_rank.saturating_add(*qk_rope_head_dim),
        }
    }

    /// KV-cache elements for `context` tokens of one sequence, with sliding layers capped at
    /// their window.
    pub fn kv_elements(&self, context: u64) -> u128 {
        let window = self
            .sliding_window
            .as_ref()
            .map(|w| w.window)
            .unwrap_or(u64::MAX);
        self.kv_elements_in_cells(context, context.min(window))
    }

    /// KV-cache elements of one sequence when full-attention layers hold `full_cells` tokens and
    /// sliding-window layers `swa_cells` (an engine's own cell rounding applied by the caller).
    pub fn kv_elements_in_cells(&self, full_cells: u64, swa_cells: u64) -> u128 {
        let per = u128::from(self.kv_elements_per_token_layer());
        (0..self.num_layers)
            .filter(|&i| self.has_attention(i))
            .map(|i| {
                let cells = if self.is_sliding_layer(i) {
                    swa_cells
                } else {
                    full_cells
                };
                per * u128::from(cells)
            })
            .sum()
    }
}

/// A Llama-style architecture (RMSNorm, gated MLP, no biases, untied) for quick construction.
pub fn llama_like(
    name: &str,
    hidden: u64,
    intermediate: u64,
    layers: u64,
    heads: u64,
    kv_heads: u64,
    vocab: u64,
) -> ModelArch {
    ModelArch {
        name: name.to_string(),
        family: "llama".into(),
        hidden_size: hidden,
        intermediate_size: intermediate,
        num_layers: layers,
        num_heads: heads,
        num_kv_heads: kv_heads,
        head_dim: hidden / heads.max(1),
        vocab_size: vocab,
        tie_word_embeddings: false,
        max_position_embeddings: None,
        attention: Attention::Standard {
            qkv_bias: false,
            o_bias: false,
            qk_norm: false,
        },
        mlp: Mlp::Gated,
        mlp_bias: false,
        norm: Norm::Rms,
        norms_per_layer: 2,
        moe: None,
        sliding_window: None,
        attention_sinks: false,
        active_without_embedding: false,
        embedding_norm: false,
        query_prescaled: false,
        fused_projections: false,
        fused_gate_up_exps: false,
        no_rope: false,
        granite_scales: GraniteScales::default(),
        ssm: None,
        recurrent_layers: SlidingLayers::All,
        parallel_attention: false,
        ffn_blocks_alone: false,
        ffn_layers: SlidingLayers::All,
        attn_output_gate: false,
        mla_full_cache: false,
        joint_qkvz: false,
    }
}
