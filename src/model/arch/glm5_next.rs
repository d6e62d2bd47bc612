//! GLM-5's next variant (llama.cpp's `glm5-next` builder; transformers' `Glm5NextTextConfig`
//! for zai-org/GLM-5.3-Flash): Kimi-Linear's KDA layers beside nope-only latent attention
//! whose sparse selection comes from a DSA indexer that scores pools of `kpool` consecutive
//! tokens, and four residual streams mixed before and after every block (mHC).

use serde::Serialize;

use super::{Indexer, ModelArch};

/// What GLM-5-next adds to a hybrid of KDA and latent attention.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct G5nLayout {
    /// `hc_mult`: the residual streams the mHC mixers combine (llama.cpp takes only 4).
    pub hc_mult: u64,
    /// `index_kpool`: the tokens the indexer pools into one scored key.
    pub kpool: u64,
    /// The indexer's query heads, key width and tokens chosen (`index_n_heads`,
    /// `index_head_dim`, `index_topk`).
    pub indexer: Indexer,
    /// Per layer, whether a latent-attention layer runs its own indexer (`indexer_types`
    /// "full") or reuses the previous full layer's selection ("shared"); `num_hidden_layers`
    /// long, read only at attention layers.
    pub full_indexer: Vec<bool>,
}

impl G5nLayout {
    /// Whether layer `i` runs an indexer of its own (full unless the list says shared).
    pub fn full_indexer_at(&self, i: u64) -> bool {
        usize::try_from(i)
            .ok()
            .and_then(|i| self.full_indexer.get(i).copied())
            .unwrap_or(true)
    }

    /// Values a token caches for a full indexer: its key, its pool-gate scores and the pooled
    /// key (llama.cpp keeps the three in one row of its indexer cache).
    pub fn cached_width(&self) -> u64 {
        self.indexer.head_dim.saturating_mul(3)
    }
}

impl ModelArch {
    /// Whether layer `i` holds GLM-5-next's indexer (an attention layer whose indexer is not
    /// shared).
    pub fn has_g5n_indexer(&self, i: u64) -> bool {
        self.glm5_next
            .as_ref()
            .is_some_and(|g| self.has_attention(i) && g.full_indexer_at(i))
    }

    /// GLM-5-next's parameters beyond the shared hybrid's (KDA, latent attention, experts):
    /// each layer's two mHC mixers (a projection of the streams to `(2 + hc) × hc` mixes, its
    /// base and three scales) and each full indexer (its query from the compressed q, its
    /// LayerNormed key, its head weights, the pool gate and the pool's position bias), as
    /// `llama_model_glm5_next::load_arch_tensors` creates them.
    pub(super) fn g5n_params(&self) -> u128 {
        let Some(g) = &self.glm5_next else {
            return 0;
        };
        let w = u128::from;
        let (h, hc) = (w(self.hidden_size), w(g.hc_mult));
        let mix = (2 + hc) * hc;
        let mhc = w(self.num_layers) * 2 * (hc * h * mix + mix + 3);
        let q_rank = match self.attention {
            super::Attention::Mla {
                q_lora_rank: Some(r),
                ..
            } => w(r),
            _ => h,
        };
        let (ih, id) = (w(g.indexer.heads), w(g.indexer.head_dim));
        let indexer = q_rank * ih * id + h * id + 2 * id + h * ih + h * id + id * w(g.kpool);
        let full = (0..self.num_layers)
            .filter(|&i| self.has_g5n_indexer(i))
            .count() as u128;
        mhc + full * indexer
    }

    /// Values a token caches in layer `i` beside its attention's own: MiniMax-M3's indexer
    /// key and V head in its sparse layers, GLM-5-next's indexer row in its full-indexer
    /// layers; 0 elsewhere.
    pub fn indexer_cache_elements_per_token(&self, i: u64) -> u64 {
        let g5n = match &self.glm5_next {
            Some(g) if self.has_g5n_indexer(i) => g.cached_width(),
            _ => 0,
        };
        self.msa_kv_elements_per_token(i).saturating_add(g5n)
    }
}
