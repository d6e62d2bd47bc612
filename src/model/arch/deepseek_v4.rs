//! DeepSeek-V4's own layout (llama.cpp's `deepseek4` builder; the published config.json of
//! deepseek-ai/DeepSeek-V4-Flash): one shared 512-wide K=V head read through a sliding window
//! in every layer, beside caches of the context compressed 4:1 (CSA, with its lightning
//! indexer's keys) or 128:1 (HCA) in the layers `compress_ratios` names; a grouped low-rank
//! output; hyper-connections (`hc_mult` residual streams); hash-routed experts in the first
//! layers.

use serde::Serialize;

use super::ModelArch;

/// What a layer compresses its context to, beside its sliding window (`compress_ratios`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Compression {
    /// Ratio 0: the window alone.
    None,
    /// Ratio 4 (compressed sparse attention): a compressor of two overlapping halves, and the
    /// lightning indexer that picks the compressed rows each query reads.
    Csa,
    /// Ratio 128 (heavily compressed attention): one compressor, every compressed row read.
    Hca,
}

impl Compression {
    /// The ratio `compress_ratios` spells, or `None` for one llama.cpp's loader refuses.
    pub fn of(ratio: u64) -> Option<Self> {
        match ratio {
            0 => Some(Compression::None),
            4 => Some(Compression::Csa),
            128 => Some(Compression::Hca),
            _ => None,
        }
    }

    /// Context tokens folded into one compressed row.
    pub fn ratio(self) -> u64 {
        match self {
            Compression::None => 0,
            Compression::Csa => 4,
            Compression::Hca => 128,
        }
    }
}

/// DeepSeek-V4's widths beyond the shared decoder's (`num_heads`, `head_dim`, the experts).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct V4Layout {
    /// `q_lora_rank`: the query's compressed width.
    pub q_lora: u64,
    /// `o_lora_rank`: each output group's low-rank width.
    pub o_lora: u64,
    /// `o_groups`: the heads' output is projected in this many groups.
    pub o_groups: u64,
    /// `hc_mult`: residual streams the hyper-connections mix.
    pub hc_mult: u64,
    /// `num_hash_layers`: the first layers route by a token-id table, not by scores.
    pub hash_layers: u64,
    /// `index_n_heads`: the lightning indexer's query heads.
    pub indexer_heads: u64,
    /// `index_head_dim`: its key width, cached per compressed row.
    pub indexer_dim: u64,
    /// `index_topk`: the compressed rows each query of a CSA layer reads.
    pub indexer_top_k: u64,
    /// Each layer's compression, `num_hidden_layers` long.
    pub compression: Vec<Compression>,
}

impl V4Layout {
    /// Layer `i`'s compression (none past the list).
    pub fn layer(&self, i: u64) -> Compression {
        usize::try_from(i)
            .ok()
            .and_then(|i| self.compression.get(i).copied())
            .unwrap_or(Compression::None)
    }
}

impl ModelArch {
    /// DeepSeek-V4's total, active and embedding parameters, tensor by tensor as llama.cpp's
    /// loader creates them (`llama_model_deepseek4::load_arch_tensors`; the multi-token
    /// prediction block is not among the layers).
    pub(super) fn v4_params_wide(&self, v: &V4Layout) -> [u128; 3] {
        let w = u128::from;
        let (h, heads, hd) = (w(self.hidden_size), w(self.num_heads), w(self.head_dim));
        let (ql, hc) = (w(v.q_lora), w(v.hc_mult));
        let mix = (2 + hc) * hc;
        let embed = w(self.vocab_size) * h;
        let embedding = if self.tie_word_embeddings {
            embed
        } else {
            2 * embed
        };
        // The final norm and the head's hyper-connection mixer.
        let mut total = embedding + h + hc * h * hc + hc + 1;
        let mut active = total;
        // Norms, sinks, the query's compression, the shared K=V head and its norm, the grouped
        // output, and the two mixers of every layer.
        let attention = 2 * h
            + heads
            + h * ql
            + ql
            + ql * heads * hd
            + h * hd
            + hd
            + heads * hd * w(v.o_lora)
            + w(v.o_groups) * w(v.o_lora) * h
            + 2 * (hc * h * mix + mix + 3);
        let Some(m) = &self.moe else {
            return [total, active, embedding];
        };
        let expert = 3 * h * w(m.expert_intermediate);
        let shared = if m.shared_intermediate > 0 {
            3 * h * w(m.shared_intermediate)
        } else {
            0
        };
        for i in 0..self.num_layers {
            let routing = match i < v.hash_layers {
                true => w(m.experts_per_token) * w(self.vocab_size),
                false => w(m.experts),
            };
            let layer = attention
                + self.v4_compressor_params(v, v.layer(i))
                + h * w(m.experts)
                + routing
                + shared;
            total += layer + w(m.experts) * expert;
            active += layer + w(m.experts_per_token) * expert;
        }
        if self.active_without_embedding {
            active -= embed;
        }
        [total, active, embedding]
    }

    /// A compressing layer's compressor (KV and gate projections, positional biases, norm), and
    /// a CSA layer's lightning indexer with a compressor of its own.
    fn v4_compressor_params(&self, v: &V4Layout, c: Compression) -> u128 {
        let w = u128::from;
        let (h, hd, r) = (w(self.hidden_size), w(self.head_dim), w(c.ratio()));
        // CSA's compressor is two overlapping halves, each a row of the head's width.
        let halves = match c {
            Compression::None => return 0,
            Compression::Csa => 2,
            Compression::Hca => 1,
        };
        let mut p = 2 * h * halves * hd + halves * hd * r + hd;
        if c == Compression::Csa {
            let (ih, id) = (w(v.indexer_heads), w(v.indexer_dim));
            p += h * ih + w(v.q_lora) * ih * id + 2 * h * 2 * id + 2 * id * r + id;
        }
        p
    }
}

impl V4Layout {
    /// The cache elements each further token of context adds (the window's cache holds a fixed
    /// number): a CSA layer's compressed row and indexer key every 4 tokens, a HCA layer's row
    /// every 128 (llama.cpp pads each compressed cache to 256 rows besides).
    pub fn kv_elements_per_token(&self, head_dim: u64) -> u128 {
        self.compression
            .iter()
            .map(|c| match c {
                Compression::None => 0,
                Compression::Csa => u128::from(head_dim + self.indexer_dim) / 4,
                Compression::Hca => u128::from(head_dim) / 128,
            })
            .sum()
    }
}
