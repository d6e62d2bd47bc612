//! llama.cpp's KV cache: its cells (the context padded to 256; sliding layers' window plus a
//! micro-batch) and each layer's bytes on the layer's device.

use crate::model::arch::{Compression, V4Layout};
use crate::model::ModelArch;
use crate::plan::engines::settings::Settings;

fn sat(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// KV cells llama.cpp allocates for `context` tokens: padded to a multiple of 256.
pub const KV_CELL_PAD: u64 = 256;

/// llama.cpp's KV cells: the context padded to 256 for full-attention layers; sliding layers
/// hold the window plus one micro-batch, padded, unless `--swa-full`.
pub fn kv_cells(arch: &ModelArch, s: &Settings) -> (u64, u64) {
    let pad = |n: u64| n.div_ceil(KV_CELL_PAD).saturating_mul(KV_CELL_PAD);
    let cells = pad(s.context);
    let swa_cells = match &arch.sliding_window {
        Some(w) if !s.llamacpp.swa_full => pad(w.window.saturating_add(s.ubatch)).min(cells),
        _ => cells,
    };
    (cells, swa_cells)
}

/// Each layer's KV-cache bytes (its K and V over its cells, or a recurrent layer's f32 state)
/// for `s.batch` sequences: what llama.cpp allocates with the layer, on the layer's device.
/// They add up to [`crate::plan::engines::Breakdown::kv_cache_bytes`].
pub fn kv_bytes_per_layer(arch: &ModelArch, s: &Settings) -> Vec<u64> {
    if let Some(v) = &arch.deepseek_v4 {
        return v4_kv_bytes_per_layer(arch, v, s);
    }
    if arch.full_attention.is_some() {
        return kv_bytes_per_layer_by_width(arch, s);
    }
    let (cells, swa_cells) = kv_cells(arch, s);
    let state = arch.ssm.map_or(0, |m| m.state_elements_per_layer() * 4);
    // llama.cpp keeps a recurrent state a sequence (`n_seq_max`), even when the sequences
    // share one KV cache (`--kv-unified`).
    let state_seqs = u128::from(s.batch.max(s.llamacpp.parallel));
    (0..arch.num_layers)
        .map(|i| {
            // A recurrent layer keeps its state, and (Falcon-H1's, attending beside the mixer)
            // a KV cache too.
            let state = if arch.is_recurrent_layer(i) { state } else { 0 };
            let kv = if arch.has_own_kv(i) {
                let c = if arch.is_sliding_layer(i) {
                    swa_cells
                } else {
                    cells
                };
                // MiniMax-M3's sparse layers and GLM-5-next's full-indexer layers: the
                // indexer's cache beside.
                let msa = u128::from(arch.indexer_cache_elements_per_token(i));
                let per = u128::from(arch.layer_kv_elements_per_token(i));
                s.kv_dtype.bytes_for(per * u128::from(c))
                    + s.kv_dtype.bytes_for(msa * u128::from(c))
            } else {
                0
            };
            sat(state * state_seqs + kv * u128::from(s.batch))
        })
        .collect()
}

/// DeepSeek-V4's caches, as `llama_kv_cache_dsv4` allocates them for each sequence: every
/// layer's window of the shared K=V head (K only, a sliding-window cache of the window plus a
/// micro-batch, or the context under `--swa-full`); a CSA layer's rows of the context
/// compressed 4:1 and its lightning indexer's keys over as many rows, a HCA layer's rows
/// compressed 128:1 (each count padded to 256 cells); and each compressor's f32 state, a K
/// and a score plane of the rows it folds (CSA: 8 rows of two heads' width, its indexer's 8
/// rows of two keys' width; HCA: 128 rows of one head). llama.cpp keeps them a stream a
/// sequence even under `--kv-unified` (each of the whole context then).
fn v4_kv_bytes_per_layer(arch: &ModelArch, v: &V4Layout, s: &Settings) -> Vec<u64> {
    let (cells, swa_cells) = kv_cells(arch, s);
    let streams = u128::from(s.batch.max(s.llamacpp.parallel));
    let w = u128::from;
    let hd = w(arch.head_dim);
    let k = |width: u128, rows: u64| s.kv_dtype.bytes_for(width * w(rows));
    let compressed = |ratio: u64| cells.div_ceil(ratio).max(1).div_ceil(KV_CELL_PAD) * KV_CELL_PAD;
    let state = |rows: u128, width: u128| 2 * rows * width * 4;
    (0..arch.num_layers)
        .map(|i| {
            let window = k(hd, swa_cells);
            let c = v.layer(i);
            let rest = match c {
                Compression::None => 0,
                Compression::Csa => {
                    let rows = compressed(c.ratio());
                    let idx = w(v.indexer_dim);
                    k(hd, rows) + k(idx, rows) + state(8, 2 * hd) + state(8, 2 * idx)
                }
                Compression::Hca => k(hd, compressed(c.ratio())) + state(128, hd),
            };
            sat((window + rest) * streams)
        })
        .collect()
}

/// Layer `i`'s K and V widths as llama.cpp allocates them: without flash attention the V cache
/// is transposed, and every layer's V row is as wide as the widest layer's
/// (`n_embd_v_gqa_max`).
fn cached_widths(arch: &ModelArch, s: &Settings, i: u64) -> (u64, u64) {
    let (k, v) = arch.layer_kv_widths(i);
    match arch.full_attention {
        Some(_) if !s.flash_attention => (k, arch.widest_v()),
        _ => (k, v),
    }
}

/// [`kv_bytes_per_layer`] where the layers' widths differ (Gemma 4's full and sliding layers):
/// each layer's K and V apart, over its cache's cells.
fn kv_bytes_per_layer_by_width(arch: &ModelArch, s: &Settings) -> Vec<u64> {
    let (cells, swa_cells) = kv_cells(arch, s);
    (0..arch.num_layers)
        .map(|i| {
            if !arch.has_own_kv(i) {
                return 0;
            }
            let c = u128::from(if arch.is_sliding_layer(i) {
                swa_cells
            } else {
                cells
            });
            let (k, v) = cached_widths(arch, s, i);
            let bytes =
                s.kv_dtype.bytes_for(u128::from(k) * c) + s.kv_dtype.bytes_for(u128::from(v) * c);
            sat(bytes * u128::from(s.batch))
        })
        .collect()
}

/// The bytes ggml-cuda adds to each attention layer's cache tensors when their type is
/// quantized and a row is not a multiple of 512 values
/// (`cuda_row_padding`); 0 on layers without a cache of their own.
pub fn kv_row_padding_per_layer(arch: &ModelArch, s: &Settings) -> Vec<u64> {
    let (k, v) = arch.kv_tensor_widths();
    let t = s.kv_dtype;
    let pad = |w: u64| {
        if w == 0 {
            0
        } else {
            crate::model::layers::cuda_row_padding(w, t.block_elems, t.block_bytes)
        }
    };
    let per = pad(k).saturating_add(pad(v));
    // MiniMax-M3's indexer cache: one key head and one V head in its sparse layers.
    let msa = |i: u64| match arch.msa {
        Some(m) if arch.is_msa_layer(i) => pad(m.head_dim).saturating_add(pad(arch.head_dim)),
        // GLM-5-next's indexer row in its full-indexer layers.
        _ => match &arch.glm5_next {
            Some(g) if arch.has_g5n_indexer(i) => pad(g.cached_width()),
            _ => 0,
        },
    };
    (0..arch.num_layers)
        .map(|i| match arch.has_own_kv(i) {
            false => 0,
            true if arch.full_attention.is_some() => {
                let (k, v) = cached_widths(arch, s, i);
                pad(k).saturating_add(pad(v))
            }
            // GLM-5.2's shared layers: the latent alone.
            true if arch.indexer.is_some() && arch.indexer_shared.contains(i) => pad(k),
            true => per.saturating_add(msa(i)),
        })
        .collect()
}
