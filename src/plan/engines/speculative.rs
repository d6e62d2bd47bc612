//! Speculative decoding's drafts, as the serving engines (SGLang, vLLM) load them beside a
//! target: an EAGLE, EAGLE-3 or multi-token-prediction head's weights, modelled from the
//! target's shape, and the KV layers it adds to the target's pool. N-gram speculation has no
//! draft.

use serde::Serialize;

use crate::model::ModelArch;

/// The draft's kind (SGLang's `--speculative-algorithm`, vLLM's `method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum SpecAlgorithm {
    /// EAGLE: one decoder layer over the target's features and token (fc: 2 × hidden → hidden).
    Eagle,
    /// EAGLE-3: one decoder layer over three of the target's layers (fc: 3 × hidden → hidden),
    /// whose q, k and v projections read the token's embedding beside the hidden state
    /// (2 × hidden wide), and its own output head over a 32,000-token draft vocabulary.
    Eagle3,
    /// Multi-token prediction: the checkpoint's own next-token layer (a decoder layer and its
    /// 2 × hidden → hidden projection).
    Mtp,
    /// N-gram lookup: no draft model.
    Ngram,
}

impl SpecAlgorithm {
    /// The name SGLang's `--speculative-algorithm` takes.
    pub fn flag(self) -> &'static str {
        match self {
            SpecAlgorithm::Eagle => "EAGLE",
            SpecAlgorithm::Eagle3 => "EAGLE3",
            SpecAlgorithm::Mtp => "MTP",
            SpecAlgorithm::Ngram => "NGRAM",
        }
    }
}

/// EAGLE-3's draft vocabulary (its `draft_vocab_size` in the published heads).
const EAGLE3_DRAFT_VOCAB: u64 = 32_000;

/// A draft's share of the memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Draft {
    /// The algorithm.
    pub algorithm: SpecAlgorithm,
    /// The draft's weights, whole (modelled from the target's shape: a decoder layer of the
    /// target's, and the algorithm's own projections and head).
    pub weights_bytes: u64,
    /// The draft's KV layers in the pool.
    pub layers: u64,
}

/// The draft of `algorithm` for `arch`, whose weights are `weights_bytes` at `element` bytes a
/// value (2 for the 16-bit checkpoints drafts ship as).
pub fn draft(arch: &ModelArch, weights_bytes: u64, algorithm: SpecAlgorithm) -> Draft {
    let h = arch.hidden_size;
    let matrices = if arch.tie_word_embeddings { 1 } else { 2 };
    let non_layer = matrices * arch.vocab_size * h * 2;
    let layer = weights_bytes.saturating_sub(non_layer) / arch.num_layers.max(1);
    // EAGLE-3's first layer widens q, k and v to 2 × hidden inputs (vLLM 0.33's
    // `llama_eagle3.py`): one hidden's worth more of each.
    let qkv = (arch.num_heads + 2 * arch.num_kv_heads) * arch.head_dim;
    let (weights, layers) = match algorithm {
        SpecAlgorithm::Eagle | SpecAlgorithm::Mtp => (layer + 2 * h * h * 2, 1),
        SpecAlgorithm::Eagle3 => (
            layer + h * qkv * 2 + 3 * h * h * 2 + EAGLE3_DRAFT_VOCAB * h * 2,
            1,
        ),
        SpecAlgorithm::Ngram => (0, 0),
    };
    Draft {
        algorithm,
        weights_bytes: weights,
        layers,
    }
}
