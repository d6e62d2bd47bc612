//! The GGUF llama-quantize would write for a model that has none (a catalog model, a
//! config.json) at one of its file types (`--dtype q4_k_m`): the tensors convert_hf_to_gguf.py
//! writes for the architecture, each given the ggml type llama-quantize chooses for it
//! (`llama_tensor_get_type` in llama.cpp's `src/llama-quant.cpp`, the llama.cpp vendored by
//! llama-cpp-python 0.3.36, ported here in gpumem's terms).
//!
//! Why tensor by tensor: a mix gives some tensors more bits by their name, layer and shape (Q4_K_M
//! stores the head, about half the `attn_v` and `ffn_down` matrices and the first and last
//! layers' in Q6_K), so an average bits-per-weight spread evenly over the layers misplaces bytes
//! between the GPU and the host, and sizes tied heads, norms and odd-shaped rows wrongly.
//! `LayerWeights::of` then places the synthesized file exactly as a real one.

use std::collections::BTreeMap;

use super::{GgufFile, GgufTensor};
use crate::model::arch::{Attention, Mlp, ModelArch, Norm};
use crate::model::dtype::{ggml_type, GgmlType, Precision};
use crate::model::family::Family;

use QuantMix as M;
use Ty as T;

/// The ggml types llama-quantize's mixes choose among, by their GGUF ids (their layouts are
/// `dtype::GGML_TYPES`' rows).
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[rustfmt::skip]
enum Ty {
    F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q2_K = 10, Q3_K = 11,
    Q4_K = 12, Q5_K = 13, Q6_K = 14, IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19,
    IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22, IQ4_XS = 23, IQ1_M = 29, TQ1_0 = 34, TQ2_0 = 35,
    MXFP4 = 39,
}

impl Ty {
    /// The type's block layout.
    fn layout(self) -> Option<GgmlType> {
        ggml_type(self as u32)
    }
}

/// One file type: its name in llama-quantize, the `--dtype` that asks for it, its default
/// tensor type (`llama_ftype_get_default_type`), and whether llama-quantize needs an imatrix to
/// write it (it refuses without one, so every such file was made with one, which changes some
/// choices).
struct MixRow {
    mix: QuantMix,
    #[cfg_attr(not(test), expect(dead_code, reason = "the fixtures name mixes so"))]
    name: &'static str,
    dtype: Option<&'static str>,
    default: Ty,
    imatrix: bool,
}

/// Declares [`QuantMix`] and its rows in [`MIXES`] from one list.
macro_rules! file_types {
    ($($mix:ident: $dtype:expr, $default:ident, $imatrix:literal;)*) => {
        /// A llama-quantize file type (`llama_ftype`), named as llama-quantize names it.
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum QuantMix {
            $($mix,)*
        }

        /// Every file type llama-quantize writes from a float model.
        const MIXES: &[MixRow] = &[$(MixRow {
            mix: QuantMix::$mix,
            name: stringify!($mix),
            dtype: $dtype,
            default: Ty::$default,
            imatrix: $imatrix,
        },)*];
    };
}

// `q3_k`, `q4_k` and `q5_k` stay the single types gpumem's precision table names (llama-quantize
// reads them as aliases of the `_m` mixes); `iq2_s` is llama-quantize's IQ2_S file (IQ2_XS by
// default), as GGUFs so named are. Q2_K_S, IQ2_M, IQ3_XS and IQ3_M have no `--dtype` (the
// precision table has no average for them).
file_types! {
    Q4_0: Some("q4_0"), Q4_0, false;
    Q4_1: Some("q4_1"), Q4_1, false;
    Q5_0: Some("q5_0"), Q5_0, false;
    Q5_1: Some("q5_1"), Q5_1, false;
    Q8_0: Some("q8_0"), Q8_0, false;
    Q2_K: Some("q2_k"), Q2_K, false;
    Q2_K_S: None, Q2_K, true;
    Q3_K_S: Some("q3_k_s"), Q3_K, false;
    Q3_K_M: Some("q3_k_m"), Q3_K, false;
    Q3_K_L: Some("q3_k_l"), Q3_K, false;
    Q4_K_S: Some("q4_k_s"), Q4_K, false;
    Q4_K_M: Some("q4_k_m"), Q4_K, false;
    Q5_K_S: Some("q5_k_s"), Q5_K, false;
    Q5_K_M: Some("q5_k_m"), Q5_K, false;
    Q6_K: Some("q6_k"), Q6_K, false;
    IQ1_S: Some("iq1_s"), IQ1_S, true;
    IQ1_M: Some("iq1_m"), IQ1_M, true;
    IQ2_XXS: Some("iq2_xxs"), IQ2_XXS, true;
    IQ2_XS: Some("iq2_xs"), IQ2_XS, true;
    IQ2_S: Some("iq2_s"), IQ2_XS, true;
    IQ2_M: None, IQ2_S, true;
    IQ3_XXS: Some("iq3_xxs"), IQ3_XXS, true;
    IQ3_XS: None, IQ3_S, true;
    IQ3_S: Some("iq3_s"), IQ3_S, false;
    IQ3_M: None, IQ3_S, false;
    IQ4_NL: Some("iq4_nl"), IQ4_NL, false;
    IQ4_XS: Some("iq4_xs"), IQ4_XS, false;
    TQ1_0: Some("tq1_0"), TQ1_0, false;
    TQ2_0: Some("tq2_0"), TQ2_0, false;
    MXFP4_MOE: Some("mxfp4"), MXFP4, false;
}

impl QuantMix {
    /// The file type a `--dtype` precision asks llama-quantize for (`None`: a plain dtype, or a
    /// single ggml type without a file type of that name).
    pub(crate) fn of(precision: &Precision) -> Option<QuantMix> {
        MIXES
            .iter()
            .find(|r| r.dtype == Some(precision.name))
            .map(|r| r.mix)
    }

    /// The file type llama-quantize calls `name` (`Q4_K_M`).
    #[cfg(test)]
    pub(crate) fn named(name: &str) -> Option<QuantMix> {
        MIXES.iter().find(|r| r.name == name).map(|r| r.mix)
    }

    fn row(self) -> Option<&'static MixRow> {
        MIXES.iter().find(|r| r.mix == self)
    }
}

/// What a tensor is to llama-quantize's choice (its `tensor_category`); `Kept` for those it
/// copies as they are (norms, biases, the router: 1-D, or never quantized).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    TokenEmbd,
    Output,
    AttnQ,
    AttnK,
    AttnV,
    AttnOutput,
    FfnGate,
    FfnUp,
    FfnDown,
    Kept,
}

/// One tensor as convert_hf_to_gguf.py writes it: name, dims innermost first, layer and role.
#[derive(Debug, Clone)]
struct Spec {
    name: String,
    layer: Option<u64>,
    dims: Vec<u64>,
    role: Role,
}

/// The model facts llama-quantize's choice reads (`hparams`, the model type, the counts it takes
/// over the tensors first).
struct Facts {
    experts: u64,
    gqa: u64,
    is_70b: bool,
    tied: bool,
    layers: u64,
    attn_v: u64,
    imatrix: bool,
}

/// llama-quantize's running counts over the tensors it has chosen for, in its order.
#[derive(Default)]
struct Counters {
    attn_v: u64,
    down: u64,
    gate: u64,
    up: u64,
}

/// The GGUF llama-quantize writes for `arch` at `mix`: every tensor, in llama-quantize's order,
/// at the type it chooses, aligned to 32 bytes as in the file (the header is not counted in
/// `file_size`). `None` where the architecture's tensors are not synthesized here (see
/// [`synthesizable`]): its weights are then counted at the mix's average.
pub(crate) fn quantized_file(arch: &ModelArch, mix: QuantMix) -> Option<GgufFile> {
    let specs = specs(arch)?;
    let facts = facts(arch, &specs, mix)?;
    let mut counters = Counters::default();
    let mut tensors = Vec::with_capacity(specs.len());
    let mut offset = 0u64;
    for s in &specs {
        let ty = choose(mix, &facts, &mut counters, s)?;
        let t = GgufTensor::new(s.name.clone(), s.dims.clone(), ty.layout()?, offset).ok()?;
        offset = offset.checked_add(t.bytes.div_ceil(32).checked_mul(32)?)?;
        tensors.push(t);
    }
    Some(GgufFile {
        version: 3,
        metadata: BTreeMap::new(),
        tensors,
        mtp: Vec::new(),
        alignment: 32,
        file_size: offset,
    })
}

fn facts(arch: &ModelArch, specs: &[Spec], mix: QuantMix) -> Option<Facts> {
    let experts = arch.moe.as_ref().map_or(0, |m| m.experts);
    let (heads, kv) = (arch.num_heads, arch.num_kv_heads);
    // llama.cpp's model type 70B, for which attn_v gets more bits: the llama builder's 80-layer
    // grouped-query models (not its 8-expert ones), and qwen2's 80-layer ones.
    let is_70b = arch.num_layers == 80
        && match arch.family_kind() {
            Family::Llama | Family::Mistral | Family::Mixtral => experts != 8 && heads != kv,
            Family::Qwen2 => true,
            _ => false,
        };
    Some(Facts {
        experts,
        gqa: heads.checked_div(kv).unwrap_or(0),
        is_70b,
        tied: !specs.iter().any(|s| s.role == Role::Output),
        layers: arch.num_layers,
        attn_v: specs.iter().filter(|s| s.role == Role::AttnV).count() as u64,
        imatrix: mix.row()?.imatrix,
    })
}

/// The families whose GGUF tensors [`specs`] lists (Mistral's and Mixtral's GGUFs are llama's).
#[rustfmt::skip]
const LISTED: &[Family] = &[
    Family::Llama, Family::Mistral, Family::Mixtral, Family::Qwen2, Family::Qwen2Moe,
    Family::Qwen3, Family::Qwen3Moe, Family::Gemma, Family::Gemma2, Family::Gemma3,
];

/// The architectures whose GGUF tensors are listed here: the llama-like decoders
/// convert_hf_to_gguf.py writes the usual way (separate q/k/v, gated MLP, RMS norms: two a layer,
/// or Gemma 2's and 3's four), dense or with routed and shared experts, tied or not. Others are
/// not synthesized, because their GGUFs hold tensors this list does not name (fused projections,
/// latent attention's, a recurrent mixer's, other norms, attention sinks, router biases) or
/// llama-quantize has rules of their own for them (Falcon): an unlisted tensor would be a guess,
/// so they keep the average.
fn synthesizable(arch: &ModelArch) -> bool {
    LISTED.contains(&arch.family_kind())
        && matches!(arch.attention, Attention::Standard { .. })
        && arch.mlp == Mlp::Gated
        && arch.norm == Norm::Rms
        && (arch.norms_per_layer == 2 || post_norms(arch))
        && arch.encoder.is_none()
        && arch.ssm.is_none()
        && !arch.fused_projections
        && !arch.fused_gate_up_exps
        && !arch.attn_output_gate
        && !arch.attention_sinks
        && !arch.embedding_norm
        && !arch.joint_qkvz
        && arch.moe.as_ref().is_none_or(|m| !m.router_bias)
}

/// Gemma 2's and 3's norms after attention and after the feed-forward block.
fn post_norms(arch: &ModelArch) -> bool {
    arch.norms_per_layer == 4 && matches!(arch.family_kind(), Family::Gemma2 | Family::Gemma3)
}

/// The tensors of `arch`'s GGUF in llama-quantize's order: by layer (those of no layer first),
/// then by name (`weight_name_comparer`). Its running counts follow this order.
fn specs(arch: &ModelArch) -> Option<Vec<Spec>> {
    if !synthesizable(arch) {
        return None;
    }
    let (h, vocab) = (arch.hidden_size, arch.vocab_size);
    let mut v = vec![
        spec("token_embd.weight", None, &[h, vocab], Role::TokenEmbd),
        spec("output_norm.weight", None, &[h], Role::Kept),
    ];
    if !arch.tie_word_embeddings {
        v.push(spec("output.weight", None, &[h, vocab], Role::Output));
    }
    for l in 0..arch.num_layers {
        layer_specs(arch, l, &mut v);
    }
    v.sort_by(|a, b| {
        let order = |s: &Spec| s.layer.map_or(-1, i128::from);
        order(a).cmp(&order(b)).then_with(|| a.name.cmp(&b.name))
    });
    Some(v)
}

/// Layer `l`'s tensors: its norms, attention, and dense or expert feed-forward block.
fn layer_specs(arch: &ModelArch, l: u64, v: &mut Vec<Spec>) {
    let h = arch.hidden_size;
    let (q, kv) = (
        arch.num_heads.saturating_mul(arch.head_dim),
        arch.num_kv_heads.saturating_mul(arch.head_dim),
    );
    let mut add = |name: &str, dims: &[u64], role: Role| {
        v.push(spec(&format!("blk.{l}.{name}"), Some(l), dims, role));
    };
    add("attn_norm.weight", &[h], Role::Kept);
    add("attn_q.weight", &[h, q], Role::AttnQ);
    add("attn_k.weight", &[h, kv], Role::AttnK);
    add("attn_v.weight", &[h, kv], Role::AttnV);
    add("attn_output.weight", &[q, h], Role::AttnOutput);
    if let Attention::Standard {
        qkv_bias,
        o_bias,
        qk_norm,
    } = arch.attention
    {
        if qkv_bias {
            add("attn_q.bias", &[q], Role::Kept);
            add("attn_k.bias", &[kv], Role::Kept);
            add("attn_v.bias", &[kv], Role::Kept);
        }
        if o_bias {
            add("attn_output.bias", &[h], Role::Kept);
        }
        if qk_norm && arch.qk_norm_full_width {
            add("attn_q_norm.weight", &[q], Role::Kept);
            add("attn_k_norm.weight", &[kv], Role::Kept);
        } else if qk_norm {
            add("attn_q_norm.weight", &[arch.head_dim], Role::Kept);
            add("attn_k_norm.weight", &[arch.head_dim], Role::Kept);
        }
    }
    if post_norms(arch) {
        add("post_attention_norm.weight", &[h], Role::Kept);
        add("post_ffw_norm.weight", &[h], Role::Kept);
    }
    if !arch.has_ffn(l) {
        return;
    }
    add("ffn_norm.weight", &[h], Role::Kept);
    match arch.moe.as_ref().filter(|_| arch.is_moe_layer(l)) {
        Some(m) => {
            let (e, f) = (m.experts, m.expert_intermediate);
            // The router stays f32: convert writes it so, and llama-quantize never quantizes it.
            add("ffn_gate_inp.weight", &[h, e], Role::Kept);
            add("ffn_gate_exps.weight", &[h, f, e], Role::FfnGate);
            add("ffn_up_exps.weight", &[h, f, e], Role::FfnUp);
            add("ffn_down_exps.weight", &[f, h, e], Role::FfnDown);
            let s = m.shared_intermediate;
            if s > 0 {
                add("ffn_gate_shexp.weight", &[h, s], Role::FfnGate);
                add("ffn_up_shexp.weight", &[h, s], Role::FfnUp);
                add("ffn_down_shexp.weight", &[s, h], Role::FfnDown);
                if m.shared_gate {
                    add("ffn_gate_inp_shexp.weight", &[h], Role::Kept);
                }
            }
        }
        None => {
            let f = arch.intermediate_size;
            add("ffn_gate.weight", &[h, f], Role::FfnGate);
            add("ffn_up.weight", &[h, f], Role::FfnUp);
            add("ffn_down.weight", &[f, h], Role::FfnDown);
            if arch.mlp_bias {
                add("ffn_gate.bias", &[f], Role::Kept);
                add("ffn_up.bias", &[f], Role::Kept);
                add("ffn_down.bias", &[h], Role::Kept);
            }
        }
    }
}

fn spec(name: &str, layer: Option<u64>, dims: &[u64], role: Role) -> Spec {
    let (name, dims) = (name.to_string(), dims.to_vec());
    Spec {
        name,
        layer,
        dims,
        role,
    }
}

/// The type llama-quantize gives tensor `s` at `mix` (`llama_tensor_get_type`): the mix's rule
/// for its role, then the fallback for a row its type's blocks do not divide.
fn choose(mix: QuantMix, f: &Facts, c: &mut Counters, s: &Spec) -> Option<Ty> {
    if s.role == Role::Kept {
        // Norms, biases and the router stay f32, as convert_hf_to_gguf.py writes them.
        return Some(T::F32);
    }
    let default = mix.row()?.default;
    let chosen = mixed(mix, f, c, s, default)?;
    fallback(row_of(s), chosen)
}

/// A tensor's row: its innermost dimension, which a type's blocks must divide.
fn row_of(s: &Spec) -> u64 {
    s.dims.first().copied().unwrap_or(0)
}

/// `llama_tensor_get_type_impl` for the roles synthesized here (its Falcon, GLM5-next and
/// Bailing-MoE3 rules never apply to them).
fn mixed(mix: QuantMix, f: &Facts, c: &mut Counters, s: &Spec, default: Ty) -> Option<Ty> {
    // A tied head is the token embeddings: they take the head's type.
    if s.role == Role::Output || (f.tied && s.role == Role::TokenEmbd) {
        return head_type(mix, s, default);
    }
    if mix == M::MXFP4_MOE {
        // Routed experts (3-D) in MXFP4, every other matrix in Q8_0.
        let experts = s.dims.get(2).is_some_and(|&e| e > 1);
        return Some(if experts { T::MXFP4 } else { T::Q8_0 });
    }
    if s.role == Role::TokenEmbd {
        return Some(match mix {
            M::IQ2_XXS | M::IQ2_XS | M::IQ1_S | M::IQ1_M => T::Q2_K,
            M::IQ2_S | M::IQ2_M | M::IQ3_XXS => T::IQ3_S,
            M::TQ1_0 | M::TQ2_0 => T::Q4_K,
            _ => default,
        });
    }
    if matches!(
        mix,
        M::IQ2_XXS | M::IQ2_XS | M::IQ1_S | M::IQ2_S | M::IQ2_M | M::IQ1_M
    ) {
        return Some(two_bit(mix, f, c, s.role, default));
    }
    Some(match s.role {
        Role::AttnV => attn_v(mix, f, c, default),
        Role::AttnK if f.experts == 8 => T::Q8_0,
        Role::AttnK | Role::AttnQ => match mix {
            M::IQ3_XS => T::IQ3_XXS,
            M::IQ3_XXS => T::IQ2_S,
            _ => default,
        },
        Role::FfnDown => ffn_down(mix, f, c, s, default)?,
        Role::AttnOutput => attn_output(mix, f, default),
        Role::FfnGate | Role::FfnUp => gate_up(mix, f, c, s, default)?,
        _ => default,
    })
}

/// The output head (and tied embeddings): Q8_0 where its row is not whole blocks of the mix's
/// type, Q5_K under the 1- and 2-bit mixes, else Q6_K (Q8_0 stays).
fn head_type(mix: QuantMix, s: &Spec, default: Ty) -> Option<Ty> {
    let block = default.layout()?.block_elems.max(1);
    Some(if mix == M::MXFP4_MOE || row_of(s) % block != 0 {
        T::Q8_0
    } else if matches!(
        mix,
        M::IQ2_XXS | M::IQ2_XS | M::IQ3_XXS | M::IQ1_S | M::IQ2_S | M::IQ2_M | M::IQ1_M
    ) {
        T::Q5_K
    } else if default != T::Q8_0 {
        T::Q6_K
    } else {
        default
    })
}

/// The 1- and 2-bit mixes: attn_v and the first eighth of ffn_down (by count) get more bits,
/// and attn_output under 8 experts.
fn two_bit(mix: QuantMix, f: &Facts, c: &mut Counters, role: Role, default: Ty) -> Ty {
    let s_or_m = matches!(mix, M::IQ2_S | M::IQ2_M);
    let low = if s_or_m { T::IQ3_S } else { T::Q2_K };
    match role {
        Role::AttnV => {
            c.attn_v += 1;
            if f.gqa >= 4 || f.experts >= 4 {
                T::Q4_K
            } else {
                low
            }
        }
        Role::AttnK if f.experts == 8 => T::Q4_K,
        Role::FfnDown => {
            let early = c.down < f.layers / 8;
            c.down += 1;
            if early {
                low
            } else {
                default
            }
        }
        Role::AttnOutput if f.experts == 8 => T::Q5_K,
        Role::AttnOutput => match mix {
            M::IQ1_S | M::IQ1_M => T::IQ2_XXS,
            _ if s_or_m => T::IQ3_S,
            _ => default,
        },
        _ => default,
    }
}

/// attn_v (counted in llama-quantize's order over every attn_v tensor).
fn attn_v(mix: QuantMix, f: &Facts, c: &mut Counters, default: Ty) -> Ty {
    let (i, gqa4) = (c.attn_v, f.gqa >= 4);
    let mut t = match mix {
        M::Q2_K if gqa4 => T::Q4_K,
        M::Q2_K => T::Q3_K,
        M::Q2_K_S if gqa4 => T::Q4_K,
        M::IQ3_XXS if gqa4 => T::Q4_K,
        M::IQ3_XXS if f.imatrix => T::IQ3_XXS,
        M::IQ3_XXS => T::IQ3_S,
        M::IQ3_XS | M::IQ3_S if gqa4 => T::Q4_K,
        M::IQ3_M => T::Q4_K,
        M::Q3_K_M if i < 2 => T::Q5_K,
        M::Q3_K_M => T::Q4_K,
        M::Q3_K_L => T::Q5_K,
        M::IQ4_NL | M::IQ4_XS if gqa4 => T::Q5_K,
        M::Q4_K_M | M::Q5_K_M if use_more_bits(i, f.attn_v) => T::Q6_K,
        M::Q4_K_S if i < 4 => T::Q5_K,
        _ => default,
    };
    // 70B models share each attn_v among 8 heads: more bits cost little there.
    if f.is_70b && matches!(t, T::Q3_K | T::Q4_K) {
        t = T::Q5_K;
    }
    if f.experts == 8 {
        t = T::Q8_0;
    }
    c.attn_v += 1;
    t
}

/// ffn_down, by layer (counted in order for a dense model, read from the name with experts).
fn ffn_down(mix: QuantMix, f: &Facts, c: &mut Counters, s: &Spec, default: Ty) -> Option<Ty> {
    let (i, n) = (layer_index(f, c.down, s)?, f.layers);
    c.down += 1;
    let (early, more) = (i < n / 8, use_more_bits(i, n));
    Some(match mix {
        M::Q2_K => T::Q3_K,
        M::Q2_K_S if early => T::Q4_K,
        M::IQ3_XXS if !f.imatrix && early => T::Q4_K,
        M::IQ3_XXS if !f.imatrix => T::Q3_K,
        M::Q3_K_M if i < n / 16 => T::Q5_K,
        M::Q3_K_M => T::Q4_K,
        M::IQ3_M if early || (f.experts == 8 && more) => T::Q4_K,
        M::Q3_K_L => T::Q5_K,
        M::Q4_K_M if more => T::Q6_K,
        M::IQ4_NL | M::IQ4_XS if early && !f.imatrix => T::Q5_K,
        M::Q5_K_M if more => T::Q6_K,
        M::Q4_K_S if early => T::Q5_K,
        M::Q4_0 if f.imatrix && early => T::Q4_1,
        M::Q5_0 if f.imatrix && early => T::Q5_1,
        _ => default,
    })
}

/// The mixes that keep attn_output in Q5_K in a model of 8 experts.
#[rustfmt::skip]
const EIGHT_EXPERT_OUTPUT_Q5_K: &[QuantMix] = &[
    M::Q2_K, M::IQ3_XS, M::IQ3_XXS, M::Q3_K_S, M::Q3_K_M, M::IQ4_NL, M::Q4_K_S, M::Q4_K_M,
    M::IQ3_S, M::IQ3_M, M::IQ4_XS,
];

/// attn_output: Q5_K for most mixes under 8 experts, else a step up for the 2- and 3-bit ones.
fn attn_output(mix: QuantMix, f: &Facts, default: Ty) -> Ty {
    if f.experts == 8 {
        return if EIGHT_EXPERT_OUTPUT_Q5_K.contains(&mix) {
            T::Q5_K
        } else {
            default
        };
    }
    match mix {
        M::Q2_K => T::Q3_K,
        M::IQ3_XXS => T::IQ3_S,
        M::Q3_K_M | M::IQ3_M => T::Q4_K,
        M::Q3_K_L => T::Q5_K,
        _ => default,
    }
}

/// ffn_gate and ffn_up: IQ3_XS keeps its middle layers in IQ3_XXS.
fn gate_up(mix: QuantMix, f: &Facts, c: &mut Counters, s: &Spec, default: Ty) -> Option<Ty> {
    let counter = if s.role == Role::FfnGate {
        &mut c.gate
    } else {
        &mut c.up
    };
    let i = layer_index(f, *counter, s)?;
    *counter += 1;
    let n = f.layers;
    Some(if mix == M::IQ3_XS && i >= n / 8 && i < 7 * n / 8 {
        T::IQ3_XXS
    } else {
        default
    })
}

/// The layer llama-quantize takes a tensor to be in: its running count for a dense model, the
/// layer in its name with experts (whose tensors are not one a layer).
fn layer_index(f: &Facts, counter: u64, s: &Spec) -> Option<u64> {
    if f.experts > 1 {
        s.layer.filter(|&l| l < f.layers)
    } else {
        Some(counter)
    }
}

/// llama-quantize's "more bits" layers: the first and last eighth, and every third between.
fn use_more_bits(i: u64, n: u64) -> bool {
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

/// The i-quants of 256-element blocks, which fall back to IQ4_NL.
#[rustfmt::skip]
const IQ_256: &[Ty] = &[
    T::IQ1_S, T::IQ1_M, T::IQ2_XXS, T::IQ2_XS, T::IQ2_S, T::IQ3_XXS, T::IQ3_S, T::IQ4_XS,
];

/// `tensor_type_fallback`: a row that is not whole blocks of `ty` takes a type of 32-element
/// blocks of about the same bits, else F16.
fn fallback(row: u64, ty: Ty) -> Option<Ty> {
    let block = ty.layout()?.block_elems;
    if row % block == 0 {
        return Some(ty);
    }
    let alt = match ty {
        _ if IQ_256.contains(&ty) => T::IQ4_NL,
        T::Q2_K | T::Q3_K | T::TQ1_0 | T::TQ2_0 => T::Q4_0,
        T::Q4_K => T::Q5_0,
        T::Q5_K => T::Q5_1,
        T::Q6_K => T::Q8_0,
        other if block <= 32 => other,
        _ => return None,
    };
    Some(if row % alt.layout()?.block_elems == 0 {
        alt
    } else {
        T::F16
    })
}

#[cfg(test)]
#[path = "quantize_mix_tests.rs"]
mod tests;
