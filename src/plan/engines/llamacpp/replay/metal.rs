//! ggml-metal's scratch beside an op's output, read from the source of the llama.cpp that
//! llama-cpp-python 0.3.36 vendors (`ggml_backend_metal_buffer_type_get_alloc_size` and the
//! `ggml_metal_op_*_extra_*` sizes in `ggml-metal-ops.cpp`), and not measured: no Apple GPU
//! reaches this project. The graph allocator reserves the scratch with the output, so it lives
//! exactly as long.

use crate::model::dtype::Precision;

/// Query rows and cache cells a simdgroup of the matrix kernel takes (`OP_FLASH_ATTN_EXT_NQPSG`,
/// `OP_FLASH_ATTN_EXT_NCPSG`); the vector kernel's (`*_VEC_*`) for a batch under 20 rows.
const MATRIX_TILE: (u64, u64) = (8, 64);
const VECTOR_TILE: (u64, u64) = (1, 32);
/// The padding rows are always reserved at the matrix kernel's cell tile.
const PAD_CELLS: u64 = 64;
/// Workgroups whose partial results the temporary buffer holds, over at most 32 query rows.
const WORKGROUPS: u64 = 32;
/// `N_MM_NPART_AMAX`: an expert product's per-threadgroup scales.
const AMAX_PARTS: u64 = 256;

/// A flash-attention node as ggml-metal sizes its scratch.
#[derive(Debug, Clone, Copy)]
pub(super) struct MetalFa<'a> {
    /// Query rows (the batch's tokens) and query heads.
    pub(super) tokens: u64,
    pub(super) heads: u64,
    /// K heads, and K's and V's head sizes.
    pub(super) kv_heads: u64,
    pub(super) k_head: u64,
    pub(super) v_head: u64,
    /// Cache cells the node reads (the mask's width).
    pub(super) cells: u64,
    /// K and V as stored, and the bytes between two cells of each (`nb11`, `nb21`).
    pub(super) kv_type: &'a Precision,
    pub(super) strides: (u64, u64),
    /// V is a view of K (MLA): its dequantized copy is K's.
    pub(super) v_of_k: bool,
}

fn pad(n: u64, to: u64) -> u64 {
    n.div_ceil(to).saturating_mul(to)
}

/// The cache types ggml-metal dequantizes to f16 before a batch of 32 rows or more
/// (`ggml_metal_op_flash_attn_ext_use_kv_f16`).
fn dequantized(t: &Precision) -> bool {
    matches!(t.name, "q4_0" | "q4_1" | "q5_0" | "q5_1" | "q8_0")
}

/// Bytes ggml-metal reserves beside a flash-attention output: the padding cells of K, V and
/// the mask, the mask's block map, the workgroups' partial results, K and V dequantized to
/// f16 (reserved whatever the cache's type) and no sparse index lists (only DeepSeek-V4's
/// sparse attention sets them).
pub(super) fn flash_attention_extra(f: &MetalFa<'_>) -> u64 {
    let m = |a: u64, b: u64| a.saturating_mul(b);
    let f16_rows = f.tokens >= 32 && dequantized(f.kv_type);
    let (k_row, v_row) = if f16_rows {
        let v = if f.v_of_k { f.k_head } else { f.v_head };
        (2 * f.k_head, 2 * v)
    } else {
        f.strides
    };
    let mask_row = m(2, f.tokens);
    let padding = m(
        PAD_CELLS,
        m(k_row, f.kv_heads)
            .saturating_add(m(v_row, f.kv_heads))
            .saturating_add(mask_row),
    );
    let vector = f.tokens < 20 && f.k_head % 32 == 0;
    let (rows, cells) = if vector { VECTOR_TILE } else { MATRIX_TILE };
    let blocks = pad(m(f.cells.div_ceil(cells), f.tokens.div_ceil(rows)), 32);
    let partials = m(
        m(4, f.tokens.min(32)),
        m(m(f.heads, WORKGROUPS), f.v_head.saturating_add(2)),
    );
    let k16 = pad(m(m(2, f.k_head), m(f.cells, f.kv_heads)), 16);
    let v16 = if f.v_of_k {
        0
    } else {
        pad(m(m(2, f.v_head), m(f.cells, f.kv_heads)), 16)
    };
    [padding, blocks, partials, k16, v16]
        .into_iter()
        .fold(0u64, u64::saturating_add)
}

/// Bytes ggml-metal reserves beside an expert product (`mul_mat_id`) over `experts` experts
/// and `tokens` tokens: tokens per expert, each expert's token ids, and the scales.
pub(super) fn expert_product_extra(experts: u64, tokens: u64) -> u64 {
    let ids = experts.saturating_mul(tokens).saturating_mul(4);
    (4 * experts)
        .saturating_add(ids)
        .saturating_add(8 + AMAX_PARTS * 4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::dtype::KV_F16;

    /// A 512-token batch's flash attention: query and K heads, K's and V's head sizes, cells,
    /// the cache's strides between cells.
    fn fa(
        kv_type: &Precision,
        (heads, kv_heads): (u64, u64),
        (k_head, v_head): (u64, u64),
        cells: u64,
        strides: (u64, u64),
        v_of_k: bool,
    ) -> MetalFa<'_> {
        MetalFa {
            tokens: 512,
            heads,
            kv_heads,
            k_head,
            v_head,
            cells,
            kv_type,
            strides,
            v_of_k,
        }
    }

    /// Llama-3.1-8B's layer at 4,096 cells and a 512-token batch, f16 cache, by the source's
    /// sizes: padding 64 × (2,048 × 8 + 2,048 × 8 + 1,024), block map 64 × 64, partials
    /// 4 × 32 × 32 × 32 × 130, K and V in f16 8 MiB each.
    #[test]
    fn flash_attention_scratch_follows_the_metal_source() {
        let f = fa(&KV_F16, (32, 8), (128, 128), 4096, (2048, 2048), false);
        let padding = 64 * (2048 * 8 + 2048 * 8 + 1024);
        let partials = 4 * 32 * 32 * 32 * 130;
        let kv16 = 2 * (2 * 128 * 4096 * 8);
        assert_eq!(
            flash_attention_extra(&f),
            padding + 64 * 64 + partials + kv16
        );
    }

    /// A q8_0 cache is dequantized to f16 rows for a prompt batch, and MLA's V is K's copy.
    #[test]
    fn a_quantized_latent_cache_pads_f16_rows_and_copies_k_once() {
        let q8 = crate::model::dtype::kv_precision("q8_0").expect("q8_0");
        let f = fa(&q8, (16, 1), (576, 512), 2048, (612, 612), true);
        let padding = 64 * (2 * 576 + 2 * 576 + 1024);
        let blocks = 32 * 64;
        let partials = 4 * 32 * 16 * 32 * 514;
        let k16 = 2 * 576 * 2048;
        assert_eq!(flash_attention_extra(&f), padding + blocks + partials + k16);
    }

    #[test]
    fn an_expert_product_reserves_ids_per_expert_and_token() {
        assert_eq!(
            expert_product_extra(128, 512),
            4 * 128 + 4 * 128 * 512 + 8 + 1024
        );
    }
}
