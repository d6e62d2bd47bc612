//! Gemma 4 E2B's and E4B's own layout (llama.cpp's `gemma4` with `embedding_length_per_layer_input`
//! and `attention.shared_kv_layers`; transformers' `hidden_size_per_layer_input` and
//! `num_kv_shared_layers`): per-layer embeddings beside the residual stream, and last layers
//! that project no K or V of their own but read the cache of the last earlier layer of their
//! kind, with (E2B's `use_double_wide_mlp`) an MLP twice as wide.

use serde::Serialize;

use super::ModelArch;

/// Gemma 4 E2B's and E4B's per-layer embeddings and KV-sharing layers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct EdgeLayout {
    /// Each layer's per-layer embedding width (`hidden_size_per_layer_input`; 0: none): a
    /// token table of that many values a layer (every layer's side by side, the vocabulary's
    /// rows), the model's projection to them and its norm, and in each layer a gate down to
    /// the width, a projection back up and a norm after it.
    pub per_layer_input: u64,
    /// The last layers that reuse an earlier layer's KV cache (`num_kv_shared_layers`): no
    /// `k_proj`, `v_proj` or `k_norm`, and no cache cells of their own.
    pub kv_shared_layers: u64,
    /// Those layers' MLP is twice `intermediate_size` wide (`use_double_wide_mlp`).
    pub double_wide_mlp: bool,
    /// An assistant's target width (`backbone_hidden_size`, a GGUF's `embedding_length_out`;
    /// 0: not an assistant): every layer reads the target's caches, and the model projects the
    /// target's embedding and hidden state side by side (twice this) in and its own back out.
    pub backbone: u64,
}

impl ModelArch {
    /// The first layer that reads an earlier layer's KV cache (`num_layers` where none does):
    /// llama.cpp's `n_layer_kv_from_start`.
    pub fn first_kv_shared_layer(&self) -> u64 {
        let shared = self.edge.map_or(0, |e| e.kv_shared_layers);
        self.num_layers.saturating_sub(shared)
    }

    /// Whether layer `i` attends over a KV cache of its own (an attention layer that does not
    /// reuse an earlier layer's).
    pub fn has_own_kv(&self, i: u64) -> bool {
        self.has_attention(i) && i < self.first_kv_shared_layer()
    }

    /// The layer whose cache KV-sharing layer `i` reads, as llama.cpp maps it: the last layer
    /// before the sharing ones of `i`'s kind (the one before it for a sliding layer, which
    /// [`ModelArch::kv_sharing_ok`] checks); `None` for a layer with a cache of its own.
    pub fn kv_source(&self, i: u64) -> Option<u64> {
        // An assistant's caches are the target's, placed as its own layers are.
        if self.edge.is_some_and(|e| e.backbone > 0) {
            return Some(i);
        }
        let first = self.first_kv_shared_layer();
        if i < first {
            return None;
        }
        let back = if self.is_sliding_layer(i) { 2 } else { 1 };
        first.checked_sub(back)
    }

    /// Whether the KV-sharing layers read a layer of their own kind, as llama.cpp's fixed
    /// mapping assumes (the last layer before them full, the one before that sliding) and
    /// transformers' `kv_sharing_modes` requires: `Err` names what does not hold.
    pub fn kv_sharing_ok(&self) -> Result<(), &'static str> {
        let first = self.first_kv_shared_layer();
        if first >= self.num_layers || self.edge.is_some_and(|e| e.backbone > 0) {
            return Ok(());
        }
        if first < 2 {
            return Err("leaves fewer than two layers with KV caches of their own");
        }
        if self.is_sliding_layer(first - 1) || !self.is_sliding_layer(first - 2) {
            return Err(
                "shares the caches of layers that are not a sliding then a full one, which \
                 llama.cpp's mapping of shared layers assumes",
            );
        }
        Ok(())
    }

    /// Layer `i`'s MLP width: twice `intermediate_size` in a KV-sharing layer of a double-wide
    /// model (E2B).
    pub fn layer_intermediate(&self, i: u64) -> u64 {
        match self.edge {
            Some(e) if e.double_wide_mlp && i >= self.first_kv_shared_layer() => {
                self.intermediate_size.saturating_mul(2)
            }
            _ => self.intermediate_size,
        }
    }

    /// The per-layer embeddings' token table: `per_layer_input` values a layer for every token
    /// of the vocabulary (llama.cpp's input layer, on the host).
    pub fn per_layer_table_params(&self) -> u128 {
        self.edge.map_or(0, |e| {
            u128::from(self.vocab_size)
                * u128::from(self.num_layers)
                * u128::from(e.per_layer_input)
        })
    }

    /// What the edge layout adds to the parameters the rest of the shape counts, and what its
    /// KV-sharing layers lack: the per-layer embeddings (table, projection, its norm, each
    /// layer's gate, projection and norm) and the double-wide layers' wider MLP; the sharing
    /// layers' K and V projections and K norm.
    pub(super) fn edge_params(&self) -> (u128, u128) {
        let Some(e) = self.edge else {
            return (0, 0);
        };
        let w = u128::from;
        let (h, layers, p) = (
            w(self.hidden_size),
            w(self.num_layers),
            w(e.per_layer_input),
        );
        // An assistant's projections: in from the target's embedding and hidden state, out to
        // the target's width.
        let mut added = 3 * w(e.backbone) * h;
        if e.per_layer_input > 0 {
            added += self.per_layer_table_params() + h * layers * p + p + layers * (2 * h * p + h);
        }
        let mut lacked = 0;
        for i in self.first_kv_shared_layer()..self.num_layers {
            let wide = self.layer_intermediate(i);
            if wide != self.intermediate_size {
                added += w(self.ffn_params(wide)) - w(self.ffn_params(self.intermediate_size));
            }
            if !self.has_attention(i) {
                continue;
            }
            let (head, kv) = self.layer_heads(i);
            let k_eq_v = self
                .full_attention
                .is_some_and(|f| f.k_eq_v && !self.is_sliding_layer(i));
            let projections = if k_eq_v { 1 } else { 2 };
            lacked += projections * h * w(kv) * w(head) + w(head);
        }
        (added, lacked)
    }
}
