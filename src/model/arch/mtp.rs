//! The multi-token-prediction (MTP) layers DeepSeek-V3's, V3.2's and GLM-5's checkpoints store
//! after the decoder's (`num_nextn_predict_layers`): each one more expert layer of the last
//! layer's kind, which joins the token embedding and the last hidden state through a
//! projection of its own. Engines load them only to draft with them (vLLM's `deepseek_mtp`);
//! llama.cpp's conversion marks them skipped, and a GGUF's are set apart
//! (`GgufFile::mtp_blocks`).

use serde::Serialize;

use super::ModelArch;

/// The MTP layers a published checkpoint stores (none by default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct MtpLayers {
    /// How many (`num_nextn_predict_layers`).
    pub layers: u64,
    /// Each keeps a token embedding and an output head of its own (DeepSeek-V3's and V3.2's
    /// `embed_tokens` and `shared_head.head`); GLM-5's checkpoints store neither and reuse the
    /// model's.
    pub own_embeddings: bool,
}

impl ModelArch {
    /// Parameters of the MTP layers: each is a decoder layer of the last layer's kind (its
    /// attention with an indexer of its own where the model has one, its norms, its experts
    /// or MLP) with `eh_proj` (the embedding and hidden state side by side, down to the
    /// width), `enorm`, `hnorm` and `shared_head.norm`, and, where it keeps them, its own
    /// embedding and head.
    pub(super) fn mtp_params(&self) -> u128 {
        let mtp = self.mtp;
        if mtp.layers == 0 {
            return 0;
        }
        let w = u128::from;
        let h = w(self.hidden_size);
        let last = self.num_layers.saturating_sub(1);
        let ffn = if self.is_moe_layer(last) {
            self.moe_layer_params()[0]
        } else {
            w(self.ffn_params(self.intermediate_size))
        };
        let layer =
            self.attention_params_wide() + w(self.norms_per_layer) * w(self.norm_params()) + ffn;
        let joins = 2 * h * h + 3 * w(self.norm_params());
        let own = if mtp.own_embeddings {
            2 * w(self.vocab_size) * h
        } else {
            0
        };
        w(mtp.layers) * (layer + joins + own)
    }
}
