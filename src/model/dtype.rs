//! Precisions: weight dtypes and quantizations, KV-cache dtypes, and the ggml type table.

use serde::Serialize;

/// A weight or cache precision, as bits per element (exact rational: bits per block / block).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Precision {
    /// The name as typed (`bf16`, `q4_k_m`, …).
    pub name: &'static str,
    /// Bytes one quantization block occupies (1 for plain 8-bit types).
    pub block_bytes: u64,
    /// Elements one block encodes (1 for unquantized types).
    pub block_elems: u64,
}

impl Precision {
    /// Bytes for `elements` elements, rounded up to whole bytes.
    pub fn bytes_for(&self, elements: u128) -> u128 {
        (elements * u128::from(self.block_bytes)).div_ceil(u128::from(self.block_elems))
    }

    /// Average storage bits per element, block scales included.
    pub fn bits_per_element(&self) -> f64 {
        self.block_bytes as f64 * 8.0 / self.block_elems as f64
    }
}

const fn p(name: &'static str, block_bytes: u64, block_elems: u64) -> Precision {
    Precision {
        name,
        block_bytes,
        block_elems,
    }
}

/// Weight precisions `--dtype` accepts.
///
/// Plain dtypes are exact. GGUF single types use their block layout (e.g. q4_0: 18 bytes per
/// 32 weights = 4.5 bits). The K-quant *mixes* (`_s`, `_m`, `_l`) store different tensors at
/// different types; here they are an average bits-per-weight taken from llama.cpp's `quantize`
/// table for LLaMA-7B (file size ÷ parameters): q3_k_s 3.50, q3_k_m 3.91, q3_k_l 4.27, q4_k_s
/// 4.58, q4_k_m 4.84, q5_k_s 5.52, q5_k_m 5.68 — expressed here as bytes per 10,000 weights.
/// These rates are what `estimate` and the engines other than llama.cpp count. llama.cpp's plans
/// of a model without a GGUF count the file llama-quantize would write for the name (its mixes,
/// and its single-type files such as q6_k or q4_0, whose head it keeps in Q6_K) tensor by
/// tensor, where the architecture's tensors are known: `gguf::quantize_mix`. A GGUF file's own
/// tensor types are always exact.
pub const WEIGHT_PRECISIONS: &[Precision] = &[
    WEIGHT_F32,
    WEIGHT_F16,
    WEIGHT_BF16,
    WEIGHT_FP8,
    p("int8", 1, 1),
    p("int4", 1, 2),
    WEIGHT_INT4_G128,
    p("q8_0", 34, 32),
    p("q6_k", 210, 256),
    p("q5_0", 22, 32),
    p("q5_1", 24, 32),
    p("q5_k", 176, 256),
    p("q4_0", 18, 32),
    p("q4_1", 20, 32),
    p("q4_k", 144, 256),
    p("q3_k", 110, 256),
    p("q2_k", 84, 256),
    p("iq4_nl", 18, 32),
    p("iq4_xs", 136, 256),
    p("iq3_s", 110, 256),
    p("iq3_xxs", 98, 256),
    p("iq2_s", 82, 256),
    p("iq2_xs", 74, 256),
    p("iq2_xxs", 66, 256),
    p("iq1_m", 56, 256),
    p("iq1_s", 50, 256),
    p("tq2_0", 66, 256),
    p("tq1_0", 54, 256),
    p("mxfp4", 17, 32),
    p("q3_k_s", 4375, 10000),
    p("q3_k_m", 4888, 10000),
    p("q3_k_l", 5338, 10000),
    p("q4_k_s", 5725, 10000),
    p("q4_k_m", 6050, 10000),
    p("q5_k_s", 6900, 10000),
    p("q5_k_m", 7100, 10000),
];

/// f32 weights: the plain dtypes are those an engine can load a checkpoint as (vLLM's
/// `--dtype`, and fp8 its `--quantization fp8`).
pub const WEIGHT_F32: Precision = p("f32", 4, 1);
/// f16 weights.
pub const WEIGHT_F16: Precision = p("f16", 2, 1);
/// bf16 weights.
pub const WEIGHT_BF16: Precision = p("bf16", 2, 1);
/// fp8 weights, quantized per tensor.
pub const WEIGHT_FP8: Precision = p("fp8", 1, 1);

/// 4-bit weights with a 16-bit scale for each group of 128 along the input (GPTQ's and AWQ's
/// usual layout, compressed-tensors' W4A16): 66 bytes a group. AWQ's and AutoGPTQ's 4-bit
/// zero points (half a byte a group more) are left out.
pub const WEIGHT_INT4_G128: Precision = p("int4_g128", 66, 128);

/// The f16 KV cache (llama.cpp's default).
pub const KV_F16: Precision = p("f16", 2, 1);

/// KV-cache precisions `--kv-dtype` accepts.
pub const KV_PRECISIONS: &[Precision] = &[
    p("f32", 4, 1),
    KV_F16,
    p("bf16", 2, 1),
    p("fp8", 1, 1),
    p("q8_0", 34, 32),
    p("q4_0", 18, 32),
];

fn lookup(table: &[Precision], name: &str) -> Option<Precision> {
    let want = name.trim().to_ascii_lowercase();
    let want = match want.as_str() {
        "float32" | "fp32" => "f32",
        "float16" | "fp16" | "half" => "f16",
        "bfloat16" => "bf16",
        "float8" | "f8" | "e4m3" | "fp8_e4m3" => "fp8",
        "i8" => "int8",
        "i4" => "int4",
        "w4a16" | "gptq" | "awq" | "int4-g128" => "int4_g128",
        other => other,
    };
    table.iter().find(|p| p.name == want).copied()
}

/// A weight precision by name.
pub fn weight_precision(name: &str) -> Option<Precision> {
    lookup(WEIGHT_PRECISIONS, name)
}

/// Where weights of a precision are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightFormat {
    /// Both GGUF files and checkpoints hold them (f32, f16, bf16, MXFP4).
    Both,
    /// Only a GGUF: llama.cpp's block types (q8_0, the k-quants and their mixes, iq*, tq*).
    GgufOnly,
    /// Only a checkpoint, or a quantization on load: fp8, bitsandbytes' int8 and NF4 (int4),
    /// GPTQ/AWQ groups (int4_g128).
    CheckpointOnly,
}

/// The precisions every checkpoint format and GGUF share, and those no GGUF holds.
const BOTH_FORMATS: &[&str] = &["f32", "f16", "bf16", "mxfp4"];
const CHECKPOINT_ONLY: &[&str] = &["fp8", "int8", "int4", "int4_g128"];

impl Precision {
    /// Where weights of this precision are stored.
    pub fn weight_format(&self) -> WeightFormat {
        if BOTH_FORMATS.contains(&self.name) {
            WeightFormat::Both
        } else if CHECKPOINT_ONLY.contains(&self.name) {
            WeightFormat::CheckpointOnly
        } else {
            WeightFormat::GgufOnly
        }
    }
}

/// A KV-cache precision by name.
pub fn kv_precision(name: &str) -> Option<Precision> {
    lookup(KV_PRECISIONS, name)
}

/// One row of ggml's type table: how a GGUF tensor type is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GgmlType {
    /// The type id in GGUF tensor infos.
    pub id: u32,
    /// Name as GGUF and llama.cpp spell it (`q4_k`, `f16`).
    pub name: &'static str,
    /// Elements one block encodes (1 for unquantized types).
    pub block_elems: u64,
    /// Bytes one block occupies, scales included.
    pub block_bytes: u64,
}

const fn g(id: u32, name: &'static str, block_elems: u64, block_bytes: u64) -> GgmlType {
    GgmlType {
        id,
        name,
        block_elems,
        block_bytes,
    }
}

/// ggml's tensor types (ids 4, 5 and 31–33, 36–38 were removed upstream and are not accepted).
pub const GGML_TYPES: &[GgmlType] = &[
    g(0, "F32", 1, 4),
    g(1, "F16", 1, 2),
    g(2, "Q4_0", 32, 18),
    g(3, "Q4_1", 32, 20),
    g(6, "Q5_0", 32, 22),
    g(7, "Q5_1", 32, 24),
    g(8, "Q8_0", 32, 34),
    g(9, "Q8_1", 32, 36),
    g(10, "Q2_K", 256, 84),
    g(11, "Q3_K", 256, 110),
    g(12, "Q4_K", 256, 144),
    g(13, "Q5_K", 256, 176),
    g(14, "Q6_K", 256, 210),
    g(15, "Q8_K", 256, 292),
    g(16, "IQ2_XXS", 256, 66),
    g(17, "IQ2_XS", 256, 74),
    g(18, "IQ3_XXS", 256, 98),
    g(19, "IQ1_S", 256, 50),
    g(20, "IQ4_NL", 32, 18),
    g(21, "IQ3_S", 256, 110),
    g(22, "IQ2_S", 256, 82),
    g(23, "IQ4_XS", 256, 136),
    g(24, "I8", 1, 1),
    g(25, "I16", 1, 2),
    g(26, "I32", 1, 4),
    g(27, "I64", 1, 8),
    g(28, "F64", 1, 8),
    g(29, "IQ1_M", 256, 56),
    g(30, "BF16", 1, 2),
    g(34, "TQ1_0", 256, 54),
    g(35, "TQ2_0", 256, 66),
    g(39, "MXFP4", 32, 17),
];

/// The ggml type with this id.
pub fn ggml_type(id: u32) -> Option<GgmlType> {
    GGML_TYPES.iter().find(|t| t.id == id).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_arithmetic() {
        let q4 = weight_precision("Q4_0").unwrap();
        assert_eq!(q4.bytes_for(32), 18);
        assert_eq!(q4.bits_per_element(), 4.5);
        assert_eq!(weight_precision("bfloat16").unwrap().bytes_for(3), 6);
        assert_eq!(weight_precision("int4").unwrap().bytes_for(3), 2);
        let w4a16 = weight_precision("W4A16").unwrap();
        assert_eq!(w4a16, WEIGHT_INT4_G128);
        assert_eq!(w4a16.bytes_for(4096 * 128), 4096 * 66);
        assert_eq!(w4a16.bits_per_element(), 4.125);
        assert!((weight_precision("q4_k_m").unwrap().bits_per_element() - 4.84).abs() < 0.001);
        assert!(weight_precision("q9_9").is_none());
        assert_eq!(kv_precision("fp16").unwrap().block_bytes, 2);
        assert_eq!(ggml_type(12).unwrap().name, "Q4_K");
        assert!(ggml_type(4).is_none());
    }
}
