//! Exact parameter counts from an architecture, in 128 bits.

use super::*;

impl ModelArch {
    /// Parameters of one norm layer: its weight (RMSNorm), or weight and bias (LayerNorm).
    pub fn norm_params(&self) -> u64 {
        match self.norm {
            Norm::Rms => self.hidden_size,
            Norm::Layer => self.hidden_size.saturating_mul(2),
        }
    }

    /// Parameters of one layer's attention block.
    pub fn attention_params(&self) -> u64 {
        u64::try_from(self.attention_params_wide()).unwrap_or(u64::MAX)
    }

    pub(super) fn attention_params_wide(&self) -> u128 {
        self.attention_params_of(self.head_dim, self.num_kv_heads, false)
    }

    /// Parameters of every attention layer's attention block, each at its own widths
    /// ([`ModelArch::layer_heads`]; a full layer whose V is its K projection has no `v_proj`).
    fn all_attention_params(&self) -> u128 {
        let Some(full) = self.full_attention else {
            // GLM-5.2's shared layers have no indexer.
            let shared = (0..self.num_layers)
                .filter(|&i| self.indexer_shared.contains(i))
                .count() as u128;
            return u128::from(self.attention_layer_count()) * self.attention_params_wide()
                - shared * self.indexer_params();
        };
        let sliding = (0..self.num_layers)
            .filter(|&i| self.has_attention(i) && self.is_sliding_layer(i))
            .count() as u128;
        let global = u128::from(self.attention_layer_count()) - sliding;
        sliding * self.attention_params_wide()
            + global * self.attention_params_of(full.head_dim, full.kv_heads, full.k_eq_v)
    }

    /// A sparse-attention indexer's parameters in one layer: its query from the compressed q,
    /// its key (LayerNormed, biased) and its per-head weights from the layer's input.
    fn indexer_params(&self) -> u128 {
        let w = u128::from;
        let h = w(self.hidden_size);
        let q_lora_rank = match &self.attention {
            Attention::Mla { q_lora_rank, .. } => *q_lora_rank,
            Attention::Standard { .. } => None,
        };
        self.indexer.map_or(0, |i| {
            let (heads, dim) = (w(i.heads), w(i.head_dim));
            let q_rank = q_lora_rank.map_or(h, w);
            q_rank * heads * dim + h * dim + 2 * dim + h * heads
        })
    }

    /// One attention block's parameters at `head_dim` and `kv_heads` (`k_eq_v`: no V
    /// projection).
    fn attention_params_of(&self, head_dim: u64, kv_heads: u64, k_eq_v: bool) -> u128 {
        let h = u128::from(self.hidden_size);
        match &self.attention {
            Attention::Standard {
                qkv_bias,
                o_bias,
                qk_norm,
            } => {
                let q = u128::from(self.num_heads) * u128::from(head_dim);
                let kv = u128::from(kv_heads) * u128::from(head_dim);
                let projections: u128 = if k_eq_v { 1 } else { 2 };
                let mut p = h * q + projections * h * kv + q * h;
                if self.attn_output_gate {
                    p += h * q;
                }
                if *qkv_bias {
                    p += q + 2 * kv;
                }
                if *o_bias {
                    p += h;
                }
                if *qk_norm && self.qk_norm_full_width {
                    p += q + kv;
                } else if *qk_norm {
                    p += 2 * u128::from(head_dim);
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
                // The indexer: its query from the compressed q, its key (LayerNormed, biased)
                // and its per-head weights from the layer's input.
                q + kv_a + kv_b + o + self.indexer_params()
            }
        }
    }

    /// MiniMax-M3's sparse-attention indexer in each sparse layer: its query and key
    /// projections from the layer's input and their two norms.
    fn msa_params(&self) -> u128 {
        let Some(m) = self.msa else {
            return 0;
        };
        let (h, d) = (u128::from(self.hidden_size), u128::from(m.head_dim));
        let per = h * u128::from(m.heads) * d + h * d + 2 * d;
        let layers = (0..self.num_layers)
            .filter(|&i| self.is_msa_layer(i))
            .count();
        per * layers as u128
    }

    /// Gemma 4's experts (26B-A4B) beside what [`Moe`] counts: in each expert layer the
    /// router's input scale, three more norms (before the experts, after the dense MLP, after
    /// the experts) and a scale per expert on its output.
    fn gemma4_expert_extras(&self) -> u128 {
        self.moe.as_ref().map_or(0, |m| {
            u128::from(self.moe_layers())
                * (4 * u128::from(self.hidden_size) + u128::from(m.experts))
        })
    }

    pub(super) fn ffn_params(&self, intermediate: u64) -> u64 {
        self.ffn_params_at(self.hidden_size, intermediate)
    }

    /// [`ModelArch::ffn_params`] of a block reading and writing `h` values (Kimi-K3's routed
    /// experts run at their latent width).
    fn ffn_params_at(&self, h: u64, intermediate: u64) -> u64 {
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

    /// One expert layer's feed-forward parameters, stored and active: the routed experts, any
    /// shared expert and the router (its bias, and the shared expert's gate); `[0, 0]` without
    /// experts.
    pub(super) fn moe_layer_params(&self) -> [u128; 2] {
        let w = u128::from;
        let Some(m) = &self.moe else {
            return [0, 0];
        };
        let expert = w(self.ffn_params_at(self.expert_width(), m.expert_intermediate));
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
        [
            w(m.experts) * expert + shared + router,
            w(m.experts_per_token) * expert + shared + router,
        ]
    }

    /// Parameters a published checkpoint stores that engines do not load to serve: Gemma 4's
    /// KV-sharing layers' own K and V projections and K norm (which transformers, vLLM and
    /// llama.cpp's conversion all drop), and the multi-token-prediction layers (loaded only
    /// when vLLM drafts with them).
    pub fn unloaded_params(&self) -> u64 {
        u64::try_from(self.edge_params().1 + self.mtp_params()).unwrap_or(u64::MAX)
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
    pub(super) fn params_wide(&self) -> [u128; 3] {
        if let Some(v) = &self.deepseek_v4 {
            return self.v4_params_wide(v);
        }
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
            + self.all_attention_params()
            + attention_layers * sinks;
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
        let [moe_total, moe_active] = self.moe_layer_params();
        total += moe_layers * moe_total;
        active += moe_layers * moe_active;
        // Gemma 4: each layer's output scalar (`layer_scalar`), and the proportional RoPE's
        // factors over half a full layer's head that llama.cpp's converter writes
        // (`rope_freqs`, one tensor the full layers share).
        // E2B and E4B: per-layer embeddings, wider MLPs and no K/V in the KV-sharing layers.
        let (edge_added, edge_lacked) = self.edge_params();
        let (k3_added, k3_lacked) = self.k3_params();
        let extra = self.encoder_params()
            + edge_added
            + k3_added
            + self.msa_params()
            + self.g5n_params()
            + self.full_attention.map_or(0, |f| {
                w(self.num_layers) + w(f.head_dim / 2) + self.gemma4_expert_extras()
            });
        total += extra;
        active += extra;
        total -= edge_lacked + k3_lacked;
        active -= edge_lacked + k3_lacked;
        if self.active_without_embedding {
            active -= embed;
        }
        [total, active, embedding]
    }
}
