//! The KV cache's elements per token, per layer and over a context.

use super::*;

impl ModelArch {
    /// KV-cache elements cached per token per attention layer (K and V, or MLA's latent and a
    /// sparse-attention indexer's key); none in an encoder, which llama.cpp runs without a
    /// cache.
    pub fn kv_elements_per_token_layer(&self) -> u64 {
        if self.encoder.is_some() {
            return 0;
        }
        let indexer = self.indexer.map_or(0, |i| i.head_dim);
        self.dense_kv_elements_per_token_layer()
            .saturating_add(indexer)
    }

    /// Layer `i`'s KV elements a token: [`ModelArch::kv_elements_per_token_layer`] without the
    /// indexer's key in a layer that reuses an earlier layer's top-k (GLM-5.2's shared layers
    /// keep no indexer cache).
    pub fn layer_kv_elements_per_token(&self, i: u64) -> u64 {
        let all = self.kv_elements_per_token_layer();
        match self.indexer {
            Some(x) if self.indexer_shared.contains(i) => all.saturating_sub(x.head_dim),
            _ => all,
        }
    }

    /// The attention's own KV elements a token and layer (K and V, or MLA's latent), without a
    /// sparse-attention indexer's keys.
    pub fn dense_kv_elements_per_token_layer(&self) -> u64 {
        if self.encoder.is_some() {
            return 0;
        }
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

    /// The widths (values a cell) of an attention layer's two cache tensors: K and V; under
    /// MLA the latent and, with sparse attention, the indexer's keys (else 0: V is a view of
    /// the latent). The rows ggml-cuda pads when quantized.
    pub fn kv_tensor_widths(&self) -> (u64, u64) {
        if let (Attention::Mla { .. }, false, Some(i)) =
            (&self.attention, self.mla_full_cache, self.indexer)
        {
            return (self.dense_kv_elements_per_token_layer(), i.head_dim);
        }
        match &self.attention {
            Attention::Standard { .. } => {
                let w = self.num_kv_heads.saturating_mul(self.head_dim);
                (w, w)
            }
            Attention::Mla {
                qk_nope_head_dim,
                qk_rope_head_dim,
                v_head_dim,
                ..
            } if self.mla_full_cache => (
                self.num_kv_heads
                    .saturating_mul(qk_nope_head_dim.saturating_add(*qk_rope_head_dim)),
                self.num_kv_heads.saturating_mul(*v_head_dim),
            ),
            Attention::Mla {
                kv_lora_rank,
                qk_rope_head_dim,
                ..
            } => (kv_lora_rank.saturating_add(*qk_rope_head_dim), 0),
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
    /// Layers reusing an earlier layer's cache (Gemma 4 E2B/E4B) hold none of their own.
    pub fn kv_elements_in_cells(&self, full_cells: u64, swa_cells: u64) -> u128 {
        (0..self.num_layers)
            .filter(|&i| self.has_own_kv(i))
            .map(|i| {
                let cells = if self.is_sliding_layer(i) {
                    swa_cells
                } else {
                    full_cells
                };
                let per = match self.full_attention {
                    Some(_) => {
                        let (k, v) = self.layer_kv_widths(i);
                        u128::from(k) + u128::from(v)
                    }
                    None => u128::from(self.layer_kv_elements_per_token(i)),
                };
                (per + u128::from(self.indexer_cache_elements_per_token(i))) * u128::from(cells)
            })
            .sum()
    }

    /// Layer `i`'s K and V widths (values a cell): [`ModelArch::kv_tensor_widths`] at the
    /// layer's own head size and KV heads where its full layers differ (Gemma 4).
    pub fn layer_kv_widths(&self, i: u64) -> (u64, u64) {
        match (self.full_attention, &self.attention) {
            (Some(_), Attention::Standard { .. }) if self.encoder.is_none() => {
                let (head, kv) = self.layer_heads(i);
                let w = kv.saturating_mul(head);
                (w, w)
            }
            _ => self.kv_tensor_widths(),
        }
    }

    /// The widest V row of any attention layer: what llama.cpp's transposed V cache (without
    /// flash attention) gives every layer when the layers' V widths differ.
    pub fn widest_v(&self) -> u64 {
        (0..self.num_layers)
            .filter(|&i| self.has_attention(i))
            .map(|i| self.layer_kv_widths(i).1)
            .max()
            .unwrap_or(0)
    }
}
