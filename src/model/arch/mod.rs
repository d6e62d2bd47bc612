//! A transformer's architecture (a decoder, or an encoder llama.cpp serves), and the exact parameter and KV-cache arithmetic
//! over it.

mod deepseek_v4;
mod encoder;
mod gemma4;
mod glm5_next;
mod kimi_k3;
mod kv;
mod mtp;
mod params;
mod shape;

use serde::Serialize;

pub use deepseek_v4::{Compression, V4Layout};
pub use encoder::{Classifier, Encoder, Pooling};
pub use gemma4::EdgeLayout;
pub use glm5_next::G5nLayout;
pub use kimi_k3::K3Layout;
pub use mtp::MtpLayers;
pub(crate) use shape::implausible_layer_count;
pub use shape::{ShapeField, MAX_PARAMETERS};

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

/// DeepSeek-V3.2's sparse attention (DSA): a lightning indexer scores every cached token for
/// each query from keys of its own, cached beside the latent, and attention reads the `top_k`
/// best.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Indexer {
    /// The indexer's query heads (`index_n_heads`).
    pub heads: u64,
    /// Its key width (`index_head_dim`), one key a token and layer.
    pub head_dim: u64,
    /// The cached tokens each query attends (`index_topk`).
    pub top_k: u64,
}

/// MiniMax Sparse Attention (MiniMax-M3's MSA, `sparse_attention_config`): in every expert
/// layer an indexer of `heads` (one a KV head) scores blocks of `block` cells with keys of its
/// own, cached in a second cache, and each query attends its `top_k_blocks` best blocks (the
/// `local_blocks` nearest always among them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Msa {
    /// The indexer's query heads (`sparse_num_index_heads`).
    pub heads: u64,
    /// Its key width (`sparse_index_dim`).
    pub head_dim: u64,
    /// The blocks each query attends (`sparse_topk_blocks`).
    pub top_k_blocks: u64,
    /// Cells a block (`sparse_block_size`).
    pub block: u64,
    /// The nearest blocks always attended (`sparse_local_block`).
    pub local_blocks: u64,
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
    /// Kimi Delta Attention (Kimi-Linear): `dt_rank` heads (`groups` equals it) of `state`
    /// dimensions for q, k and v alike (`inner` = heads × head size); q, k and v projected
    /// apart, each through a depthwise convolution of its own without bias; a per-channel
    /// decay from two low-rank projections (hidden → head size → inner) with an `inner`-wide
    /// bias and A per head; β per head; an output gate from two more low-rank projections; an
    /// RMS norm over one head; a `head × head` state per head.
    Kda,
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
            // q, k and v, their three convolutions without bias, the decay's two projections
            // (f_a, f_b), its bias and A, β, the output gate's two projections (g_a, g_b),
            // the norm over one head, and o_proj.
            SsmKind::Kda => {
                h * conv
                    + conv * w(self.conv_kernel)
                    + 2 * (h * state + state * inner)
                    + inner
                    + rank
                    + h * rank
                    + state
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
    #[expect(
        clippy::cast_possible_truncation,
        reason = "usize is 64 bits (lib.rs refuses other targets)"
    )]
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

/// Gemma 4's full-attention layers, whose heads are wider and fewer than its sliding layers'
/// (`global_head_dim`, `num_global_key_value_heads`; a GGUF's `key_length` beside
/// `key_length_swa` and its per-layer `head_count_kv`). `ModelArch::head_dim` and
/// `num_kv_heads` are then the sliding layers'.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FullAttention {
    /// Per-head size of Q, K and V in the full layers.
    pub head_dim: u64,
    /// KV heads of the full layers.
    pub kv_heads: u64,
    /// The full layers' V is their K projection (`attention_k_eq_v`: no `v_proj`); V is still
    /// cached apart.
    pub k_eq_v: bool,
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
    /// The factor of a linearly scaled RoPE (`rope_scaling` of type `linear`: Gemma 3's 8),
    /// whose cos/sin cache vLLM builds for that many times `max_position_embeddings`
    /// positions; `None` without one.
    pub rope_linear_factor: Option<u64>,
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
    /// The q and k norms (`Attention::Standard`'s `qk_norm`) are over the whole projection,
    /// one weight per query and per key value (MiniMax-M2's `q_norm` of heads × head size,
    /// `k_norm` of KV heads × head size), not one head's width shared by every head.
    pub qk_norm_full_width: bool,
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
    /// Sparse attention's lightning indexer over latent attention (DeepSeek-V3.2); `None`:
    /// dense attention.
    pub indexer: Option<Indexer>,
    /// Layers that reuse the previous full layer's top-k instead of an indexer of their own
    /// (GLM-5.2's `indexer_types` "shared"): no indexer weights and no indexer cache.
    pub indexer_shared: SlidingLayers,
    /// The sliding window transformers' attention applies where llama.cpp applies none or
    /// keeps no trace of it (config.json's `sliding_window` for Mistral, Mixtral and Phi-3,
    /// and for Qwen2/3 under `use_sliding_window`): a training step past it needs a mask.
    pub transformers_window: Option<u64>,
    /// An encoder (BERT, nomic-bert): no KV cache, its output pooled; `None` for a decoder.
    pub encoder: Option<Encoder>,
    /// The full-attention layers' own head size and KV heads (Gemma 4); `None`: every layer
    /// has `head_dim` and `num_kv_heads`.
    pub full_attention: Option<FullAttention>,
    /// Gemma 4 E2B's and E4B's per-layer embeddings and KV-sharing layers; `None` elsewhere.
    pub edge: Option<EdgeLayout>,
    /// Kimi-K3's residual attention, latent experts and gates; `None` elsewhere.
    pub kimi_k3: Option<K3Layout>,
    /// DeepSeek-V4's compressed attention, grouped output and hyper-connections; `None`
    /// elsewhere.
    pub deepseek_v4: Option<V4Layout>,
    /// MiniMax-M3's sparse attention in its expert layers; `None` elsewhere.
    pub msa: Option<Msa>,
    /// GLM-5-next's pooled indexer and residual streams; `None` elsewhere.
    pub glm5_next: Option<G5nLayout>,
    /// The multi-token-prediction layers the published checkpoint stores beside the decoder
    /// (none by default, and none in a GGUF, whose are set apart).
    pub mtp: MtpLayers,
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

impl ModelArch {
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

    /// Whether layer `i` runs MiniMax-M3's sparse attention (every layer after the leading
    /// dense ones, as llama.cpp's `n_layer_dense_lead` splits them).
    pub fn is_msa_layer(&self, i: u64) -> bool {
        self.msa.is_some() && i >= self.moe.as_ref().map_or(0, |m| m.first_dense_layers)
    }

    /// Values a cell of layer `i`'s sparse-attention indexer cache holds: its one key head and
    /// the one V head llama.cpp's second cache gives it beside (as wide as the attention's);
    /// 0 outside MiniMax-M3's sparse layers.
    pub fn msa_kv_elements_per_token(&self, i: u64) -> u64 {
        match self.msa {
            Some(m) if self.is_msa_layer(i) => m.head_dim.saturating_add(self.head_dim),
            _ => 0,
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

    /// Layer `i`'s per-head size and KV heads: the full layers' own where they differ
    /// ([`FullAttention`]), else `head_dim` and `num_kv_heads`.
    pub fn layer_heads(&self, i: u64) -> (u64, u64) {
        match self.full_attention {
            Some(f) if !self.is_sliding_layer(i) => (f.head_dim, f.kv_heads),
            _ => (self.head_dim, self.num_kv_heads),
        }
    }

    /// Layers with attention, which hold a KV cache.
    pub fn attention_layer_count(&self) -> u64 {
        (0..self.num_layers)
            .filter(|&i| self.has_attention(i))
            .count() as u64
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
        rope_linear_factor: None,
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
        qk_norm_full_width: false,
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
        indexer: None,
        indexer_shared: SlidingLayers::Listed(Vec::new()),
        transformers_window: None,
        encoder: None,
        full_attention: None,
        edge: None,
        kimi_k3: None,
        deepseek_v4: None,
        msa: None,
        glm5_next: None,
        mtp: MtpLayers::default(),
    }
}
