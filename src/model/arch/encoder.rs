//! Encoders llama-server serves for embeddings and reranking (BERT, nomic-bert, jina-bert-v2):
//! attention over
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
    /// Rows of the dense layer (with bias and tanh) over the pooled state (`cls.weight`): the
    /// model width in BERT's rerankers, 1 in jina-bert-v2's (which have no output projection);
    /// 0 when there is none.
    pub dense: u64,
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
    /// RoPE on Q and K (nomic-bert); BERT has learned positions and jina-bert-v2 ALiBi, which
    /// needs no tensor of its own.
    pub rope: bool,
    /// A second LayerNorm after attention's, over the residual added again (`attn_norm_2`).
    pub norm_2: bool,
    /// LayerNorms (with biases, over the whole width) on Q and K (jina-bert-v2).
    pub qk_norm: bool,
    /// A bias on the MLP's up projection.
    pub up_bias: bool,
    /// A bias on the MLP's down projection.
    pub down_bias: bool,
    /// Q, K and V from one projection (`attn_qkv`).
    pub fused_qkv: bool,
    /// The reranker's head, for [`Pooling::Rank`].
    pub classifier: Option<Classifier>,
}

impl super::ModelArch {
    /// An encoder's parameters beyond what the decoder arithmetic counts: the position and
    /// token-type tables, the reranker's head, and per layer its LayerNorms over q and k, its
    /// second attention norm and its MLP's biases. 0 for a decoder.
    pub(super) fn encoder_params(&self) -> u128 {
        let Some(e) = &self.encoder else {
            return 0;
        };
        let h = u128::from(self.hidden_size);
        let up_rows =
            u128::from(self.intermediate_size) * if self.fused_projections { 2 } else { 1 };
        let head = e.classifier.map_or(0, |c| {
            (u128::from(c.dense) + u128::from(c.outputs)) * (h + 1)
        });
        let per_layer = if e.qk_norm { 4 * h } else { 0 }
            + if e.norm_2 { 2 * h } else { 0 }
            + if e.up_bias { up_rows } else { 0 }
            + if e.down_bias { h } else { 0 };
        (u128::from(e.positions) + u128::from(e.token_types)) * h
            + head
            + u128::from(self.num_layers) * per_layer
    }
}
