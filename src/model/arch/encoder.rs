//! Encoders llama-server serves for embeddings and reranking (BERT, nomic-bert): attention over
//! the whole input with no KV cache, and the hidden states pooled into one vector a sequence.

use serde::Serialize;

/// How an encoder's hidden states become its output (`<arch>.pooling_type`, llama.cpp's
/// `llama_pooling_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Pooling {
    /// Every token's hidden state.
    None,
    /// The mean over each sequence's tokens.
    Mean,
    /// The first token's (`[CLS]`).
    Cls,
    /// The last token's.
    Last,
    /// The first token's through a classification head: a reranker's score.
    Rank,
}

impl Pooling {
    /// llama.cpp's number for it; `None` for one it does not know (`-1`, unspecified, counts as
    /// no pooling, as llama.cpp resolves it).
    pub fn from_gguf(v: i128) -> Option<Self> {
        match v {
            -1 | 0 => Some(Pooling::None),
            1 => Some(Pooling::Mean),
            2 => Some(Pooling::Cls),
            3 => Some(Pooling::Last),
            4 => Some(Pooling::Rank),
            _ => None,
        }
    }
}

/// A reranker's classification head over the pooled state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Classifier {
    /// A dense layer (with bias and tanh) before the output projection (`cls.weight`).
    pub dense: bool,
    /// The output projection's width (`cls.output.weight`'s rows; 0 when there is none).
    pub outputs: u64,
}

/// What makes a model an encoder, and how llama.cpp's graph for it is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Encoder {
    /// How the hidden states become the output.
    pub pooling: Pooling,
    /// Rows of the learned absolute positions added to the embeddings (BERT); 0 where RoPE
    /// places the tokens instead (nomic-bert).
    pub positions: u64,
    /// Rows of the token-type embedding (its first row is added to every token; 0: none).
    pub token_types: u64,
    /// Q, K and V from one projection (`attn_qkv`).
    pub fused_qkv: bool,
    /// The reranker's head, for [`Pooling::Rank`].
    pub classifier: Option<Classifier>,
}

impl Encoder {
    /// Parameters outside the layers besides the token embedding: the position and token-type
    /// tables and the reranker's head.
    pub fn extra_params(&self, hidden: u64) -> u128 {
        let h = u128::from(hidden);
        let head = self.classifier.map_or(0, |c| {
            let dense = if c.dense { h * h + h } else { 0 };
            dense + u128::from(c.outputs) * (h + 1)
        });
        (u128::from(self.positions) + u128::from(self.token_types)) * h + head
    }
}
