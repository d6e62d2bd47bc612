//! The graph inputs a layer's attention reads: each KV cache's indices, mask and scores, the
//! Hadamard rotations of a quantized cache, and a sparse indexer's own cache. Data only, so
//! that the attention and the indexer that both read them import neither each other.

use super::graph::*;

/// One KV cache's graph inputs, and the scores its layers compute without flash attention.
#[derive(Debug, Clone, Copy)]
pub(super) struct CacheInputs {
    pub(super) k_idxs: usize,
    pub(super) v_idxs: usize,
    pub(super) mask: usize,
    pub(super) scores: u64,
    /// Cells of the cache.
    pub(super) cells: u64,
    /// The Hadamard rotations of a quantized cache's K (and the query) and V (and the
    /// attention's output), each an f32 input of its size squared.
    pub(super) rotations: Rotations,
    /// Sparse attention's indexer cache (DeepSeek-V3.2), beside the full cache.
    pub(super) indexer: Option<IndexerInputs>,
}

/// llama.cpp rotates what it writes to a quantized cache by a Hadamard matrix, block by
/// block, so that quantizing it loses less (`attn_rot_k`, `attn_rot_v` in `llama-kv-cache.cpp`,
/// unless `LLAMA_ATTN_ROT_DISABLE` is set): the rotations' inputs, where the cache takes them.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Rotations {
    pub(super) k: Option<usize>,
    pub(super) v: Option<usize>,
}

/// The indexer cache's graph inputs, made once for every layer: its row indices (an i64 a
/// token), its mask (f16 over the cells: the fused indexer's) and the Hadamard rotation of its
/// keys and queries (f32, the key width squared).
#[derive(Debug, Clone, Copy)]
pub(super) struct IndexerInputs {
    pub(super) k_idxs: usize,
    pub(super) mask: usize,
    pub(super) rotation: usize,
}

impl IndexerInputs {
    pub(super) fn new(g: &mut Graph, tokens: u64, cells: u64, dim: u64) -> Option<Self> {
        Some(IndexerInputs {
            k_idxs: g.input(tokens.checked_mul(8)?),
            mask: g.input(cells.checked_mul(tokens)?.checked_mul(2)?),
            rotation: g.input(dim.checked_mul(dim)?.checked_mul(4)?),
        })
    }
}
