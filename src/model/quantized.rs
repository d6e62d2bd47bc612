//! Weight bytes of a quantized Hugging Face checkpoint from its `quantization_config`: which
//! linear layers are quantized, and what each quantization method stores for one.
//!
//! Every method stores a linear layer of `in × out` weights as packed low-bit values plus
//! per-group scales (and zero points where asymmetric); everything else — embeddings, norms,
//! biases, the router and `lm_head` unless listed — stays in the checkpoint's `torch_dtype`
//! (2 bytes). `modules_to_not_convert` (GPTQ/AWQ/bitsandbytes/mxfp4) or `ignore`
//! (compressed-tensors, fp8) keeps the layers it names unquantized.
//!
//! Per linear layer of `in` inputs, `out` outputs and `g`-wide groups (`⌈in/g⌉` groups):
//! - **GPTQ** (`bits` b): `qweight` int32 `[in·b/32, out]`, `qzeros` int32 `[⌈in/g⌉, out·b/32]`,
//!   `scales` f16 `[⌈in/g⌉, out]`, `g_idx` int32 `[in]`.
//! - **AWQ** (GEMM, 4 bits): `qweight` int32 `[in, out/8]`, `qzeros` int32 `[⌈in/g⌉, out/8]`,
//!   `scales` f16 `[⌈in/g⌉, out]`.
//! - **fp8** with `weight_block_size [bo, bi]` (DeepSeek-V3): the weight in one byte each and
//!   `weight_scale_inv` f32 `[⌈out/bo⌉, ⌈in/bi⌉]`; without a block size, one f32 scale per
//!   tensor.
//! - **compressed-tensors** `pack-quantized` (b bits, group g): `weight_packed` int32
//!   `[out, in·b/32]`, `weight_scale` in the dtype `[out, ⌈in/g⌉]`, `weight_shape` int64 `[2]`,
//!   and, when asymmetric, `weight_zero_point` int32 `[⌈out·b/32⌉, ⌈in/g⌉]`; `float-quantized`
//!   (fp8): one byte per weight and an f32 scale per channel or tensor.
//! - **fp4** — NVFP4 (ModelOpt's `quant_algo: NVFP4`, compressed-tensors'
//!   `nvfp4-pack-quantized`) and compressed-tensors' `mxfp4-pack-quantized`: two 4-bit floats
//!   a byte `[out, in/2]`, a one-byte scale per group of 16 (fp8 e4m3) or 32 (e8m0)
//!   `[out, ⌈in/g⌉]`, and NVFP4's f32 global scales (the weight's, and the input's where
//!   activations are quantized too), as vLLM 0.33's `ModelOptNvFp4` and
//!   `CompressedTensorsW4A4Fp4` load them.
//! - **bitsandbytes** 8-bit: int8 weight and an f32 `SCB` per output row. 4-bit (nf4/fp4):
//!   two weights per byte and an absmax per 64 (f32, or u8 with double quantization plus an
//!   f32 absmax per 256 of those and a 256-entry code), a 16-entry code and a serialized
//!   quant-state of about 100 bytes, counted here as 128.

use serde_json::Value;

use super::arch::{Attention, Mlp, ModelArch, Ssm, SsmKind};

/// One linear layer (or a stack of identical ones, `count` of them), by its module path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Linear {
    /// The module path, e.g. `model.layers.3.self_attn.q_proj` (what ignore lists name).
    pub name: String,
    /// Input features.
    pub inputs: u64,
    /// Output features.
    pub outputs: u64,
    /// Identical copies (routed experts).
    pub count: u64,
    /// Quantizers leave it alone unless told otherwise (the MoE router, `lm_head`).
    pub skipped_by_default: bool,
}

fn lin(name: String, inputs: u64, outputs: u64, count: u64) -> Linear {
    Linear {
        name,
        inputs,
        outputs,
        count,
        skipped_by_default: false,
    }
}

/// Every linear layer of the architecture, as Hugging Face names its modules.
pub(crate) fn linears(arch: &ModelArch) -> Vec<Linear> {
    let mut out = Vec::new();
    for i in 0..arch.num_layers {
        let p = format!("model.layers.{i}");
        if let Some(m) = arch.ssm.filter(|_| arch.is_recurrent_layer(i)) {
            mixer_linears(arch, &m, i, &p, &mut out);
        } else if arch.has_attention(i) {
            attention_linears(arch, &format!("{p}.self_attn"), &mut out);
        }
        ffn_linears(arch, i, &p, &mut out);
    }
    if !arch.tie_word_embeddings {
        out.push(Linear {
            skipped_by_default: true,
            ..lin("lm_head".into(), arch.hidden_size, arch.vocab_size, 1)
        });
    }
    out
}

/// A recurrent mixer's projections in layer `i` (prefix `p`).
fn mixer_linears(arch: &ModelArch, m: &Ssm, i: u64, p: &str, out: &mut Vec<Linear>) {
    let h = arch.hidden_size;
    let conv = u64::try_from(m.conv_channels()).unwrap_or(u64::MAX);
    match m.kind {
        SsmKind::Mamba | SsmKind::JambaMamba => {
            out.push(lin(format!("{p}.mixer.in_proj"), h, 2 * m.inner, 1));
            out.push(lin(
                format!("{p}.mixer.x_proj"),
                m.inner,
                m.dt_rank + 2 * m.state,
                1,
            ));
            out.push(lin(format!("{p}.mixer.dt_proj"), m.dt_rank, m.inner, 1));
            out.push(lin(format!("{p}.mixer.out_proj"), m.inner, h, 1));
        }
        SsmKind::Mamba2 => {
            out.push(lin(
                format!("{p}.mixer.in_proj"),
                h,
                m.inner + conv + m.dt_rank,
                1,
            ));
            out.push(lin(format!("{p}.mixer.out_proj"), m.inner, h, 1));
        }
        SsmKind::GatedDeltaNet => {
            let a = format!("{p}.linear_attn");
            out.push(lin(format!("{a}.in_proj_qkvz"), h, conv + m.inner, 1));
            out.push(lin(format!("{a}.in_proj_ba"), h, 2 * m.dt_rank, 1));
            out.push(lin(format!("{a}.out_proj"), m.inner, h, 1));
        }
        // Kimi Delta Attention, as the published checkpoints name it: q, k and v apart, the
        // decay's and the output gate's low-rank pairs, β, and the output.
        // Kimi-K3's output gate is one full-rank projection (`g_proj`).
        SsmKind::Kda => {
            let a = format!("{p}.self_attn");
            for name in ["q_proj", "k_proj", "v_proj"] {
                out.push(lin(format!("{a}.{name}"), h, m.inner, 1));
            }
            out.push(lin(format!("{a}.f_a_proj"), h, m.state, 1));
            out.push(lin(format!("{a}.f_b_proj"), m.state, m.inner, 1));
            if arch.kimi_k3.is_some() {
                out.push(lin(format!("{a}.g_proj"), h, m.inner, 1));
            } else {
                out.push(lin(format!("{a}.g_a_proj"), h, m.state, 1));
                out.push(lin(format!("{a}.g_b_proj"), m.state, m.inner, 1));
            }
            out.push(lin(format!("{a}.b_proj"), h, m.dt_rank, 1));
            out.push(lin(format!("{a}.o_proj"), m.inner, h, 1));
        }
        SsmKind::Rwkv6 | SsmKind::Rwkv7 => {
            let a = format!("{p}.attn");
            let mut projections = vec!["r_proj", "k_proj", "v_proj"];
            // (name, rank, outputs, copies): RWKV-6's token-shift LoRA is five, one per
            // interpolation, sharing their down-projection.
            let loras: Vec<(&str, u64, u64, u64)> = if m.kind == SsmKind::Rwkv6 {
                projections.push("g_proj");
                vec![
                    ("x_lora", m.ranks[0], h, 5),
                    ("w_lora", m.ranks[1], m.inner, 1),
                ]
            } else {
                // The first layer's unused value-residual LoRA: of the ICLR rank.
                let mut ranks = m.ranks;
                if i == 0 {
                    ranks[2] = ranks[1];
                }
                ["w_lora", "a_lora", "v_lora", "g_lora"]
                    .into_iter()
                    .zip(ranks)
                    .map(|(name, rank)| (name, rank, h, 1))
                    .collect()
            };
            for name in projections {
                out.push(lin(format!("{a}.{name}"), h, m.inner, 1));
            }
            out.push(lin(format!("{a}.o_proj"), m.inner, h, 1));
            for (name, rank, outputs, copies) in loras {
                out.push(lin(format!("{a}.{name}.lora.0"), h, copies * rank, 1));
                out.push(lin(format!("{a}.{name}.lora.2"), rank, outputs, copies));
            }
            if m.kind == SsmKind::Rwkv6 {
                out.push(lin(format!("{p}.ffn.r_proj"), h, h, 1));
            }
        }
    }
}

/// An attention block's projections (grouped or latent), under prefix `a`.
fn attention_linears(arch: &ModelArch, a: &str, out: &mut Vec<Linear>) {
    let h = arch.hidden_size;
    match &arch.attention {
        Attention::Standard { .. } => {
            let q = arch.num_heads * arch.head_dim;
            let kv = arch.num_kv_heads * arch.head_dim;
            let gate = if arch.attn_output_gate { 2 } else { 1 };
            out.push(lin(format!("{a}.q_proj"), h, q * gate, 1));
            out.push(lin(format!("{a}.k_proj"), h, kv, 1));
            out.push(lin(format!("{a}.v_proj"), h, kv, 1));
            out.push(lin(format!("{a}.o_proj"), q, h, 1));
        }
        Attention::Mla {
            q_lora_rank,
            kv_lora_rank,
            qk_nope_head_dim,
            qk_rope_head_dim,
            v_head_dim,
        } => {
            let heads = arch.num_heads;
            let qk = qk_nope_head_dim + qk_rope_head_dim;
            match q_lora_rank {
                Some(r) => {
                    out.push(lin(format!("{a}.q_a_proj"), h, *r, 1));
                    out.push(lin(format!("{a}.q_b_proj"), *r, heads * qk, 1));
                }
                None => out.push(lin(format!("{a}.q_proj"), h, heads * qk, 1)),
            }
            out.push(lin(
                format!("{a}.kv_a_proj_with_mqa"),
                h,
                kv_lora_rank + qk_rope_head_dim,
                1,
            ));
            out.push(lin(
                format!("{a}.kv_b_proj"),
                *kv_lora_rank,
                heads * (qk_nope_head_dim + v_head_dim),
                1,
            ));
            if arch.kimi_k3.is_some_and(|k| k.mla_gate) {
                out.push(lin(format!("{a}.g_proj"), h, heads * v_head_dim, 1));
            }
            out.push(lin(format!("{a}.o_proj"), heads * v_head_dim, h, 1));
        }
    }
}

/// Layer `i`'s feed-forward projections: a dense MLP, or the router, the experts and any
/// shared expert.
fn ffn_linears(arch: &ModelArch, i: u64, p: &str, out: &mut Vec<Linear>) {
    let h = arch.hidden_size;
    let mlp = format!("{p}.mlp");
    let ffn = |out: &mut Vec<Linear>, prefix: String, (h, inter): (u64, u64), count: u64| {
        if arch.mlp == Mlp::Gated {
            out.push(lin(format!("{prefix}.gate_proj"), h, inter, count));
        }
        out.push(lin(format!("{prefix}.up_proj"), h, inter, count));
        out.push(lin(format!("{prefix}.down_proj"), inter, h, count));
    };
    match arch.moe.as_ref().filter(|_| arch.is_moe_layer(i)) {
        // Kimi-K3's checkpoint: `block_sparse_moe`, the experts' w1 (gate), w3 (up) and w2
        // (down) at the latent width, `shared_experts`. The latent projections and norm are not
        // linears the quantizer took (bf16 in the published checkpoint).
        Some(m) if arch.kimi_k3.is_some() => {
            let moe = format!("{p}.block_sparse_moe");
            out.push(Linear {
                skipped_by_default: true,
                ..lin(format!("{moe}.gate"), h, m.experts, 1)
            });
            let (x, n, e) = (arch.expert_width(), m.expert_intermediate, m.experts);
            out.push(lin(format!("{moe}.experts.w1"), x, n, e));
            out.push(lin(format!("{moe}.experts.w3"), x, n, e));
            out.push(lin(format!("{moe}.experts.w2"), n, x, e));
            let shared = (h, m.shared_intermediate);
            ffn(out, format!("{moe}.shared_experts"), shared, 1);
        }
        Some(m) => {
            out.push(Linear {
                skipped_by_default: true,
                ..lin(format!("{mlp}.gate"), h, m.experts, 1)
            });
            let routed = (h, m.expert_intermediate);
            ffn(out, format!("{mlp}.experts"), routed, m.experts);
            if m.shared_intermediate > 0 {
                let shared = (h, m.shared_intermediate);
                let module = arch.family_kind().shared_expert_module();
                ffn(out, format!("{mlp}.{module}"), shared, 1);
            }
        }
        None if arch.intermediate_size > 0 && arch.has_ffn(i) => {
            ffn(out, mlp, (h, arch.intermediate_size), 1);
        }
        None => {}
    }
}

/// How one quantized linear layer is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scheme {
    Gptq {
        bits: u64,
        group: u64,
    },
    Awq {
        bits: u64,
        group: u64,
    },
    Fp8 {
        block: Option<(u64, u64)>,
    },
    PackQuantized {
        bits: u64,
        group: u64,
        symmetric: bool,
    },
    FloatQuantized {
        per_channel: bool,
    },
    Bnb8,
    Bnb4 {
        double_quant: bool,
    },
    /// 4-bit floats: `group` values share a one-byte scale; `globals` f32 scales a layer.
    Fp4 {
        group: u64,
        globals: u64,
    },
}

fn groups(inputs: u64, group: u64) -> u128 {
    if group == 0 {
        1
    } else {
        u128::from(inputs.div_ceil(group))
    }
}

/// Bytes one `inputs × outputs` linear layer takes under `scheme` (`scale` bytes per scale in
/// the checkpoint's dtype where the method keeps scales in it).
pub(crate) fn linear_bytes(scheme: Scheme, inputs: u64, outputs: u64, scale: u128) -> u128 {
    let (i, o) = (u128::from(inputs), u128::from(outputs));
    let n = i * o;
    match scheme {
        Scheme::Gptq { bits, group } => {
            let b = u128::from(bits);
            let g = groups(inputs, group);
            n * b / 8 + g * (o * b).div_ceil(32) * 4 + g * o * 2 + i * 4
        }
        Scheme::Awq { bits, group } => {
            let b = u128::from(bits);
            let g = groups(inputs, group);
            n * b / 8 + g * (o * b).div_ceil(32) * 4 + g * o * 2
        }
        Scheme::Fp8 {
            block: Some((bo, bi)),
        } => {
            n + u128::from(outputs.div_ceil(bo.max(1))) * u128::from(inputs.div_ceil(bi.max(1))) * 4
        }
        Scheme::Fp8 { block: None } => n + 4,
        Scheme::PackQuantized {
            bits,
            group,
            symmetric,
        } => {
            let b = u128::from(bits);
            let g = groups(inputs, group);
            let zeros = if symmetric {
                0
            } else {
                (o * b).div_ceil(32) * g * 4
            };
            o * (i * b).div_ceil(32) * 4 + o * g * scale + 16 + zeros
        }
        Scheme::FloatQuantized { per_channel } => n + if per_channel { o * scale } else { scale },
        Scheme::Bnb8 => n + o * 4,
        Scheme::Fp4 { group, globals } => {
            n.div_ceil(2) + o * groups(inputs, group) + u128::from(globals) * 4
        }
        Scheme::Bnb4 { double_quant } => {
            let blocks = n.div_ceil(64);
            let absmax = if double_quant {
                blocks + blocks.div_ceil(256) * 4 + 256 * 4 + 4
            } else {
                blocks * 4
            };
            n.div_ceil(2) + absmax + 16 * 4 + 128
        }
    }
}

type FieldError = (String, String);

fn field_error(key: &str, why: String) -> FieldError {
    (format!("quantization_config.{key}"), why)
}

/// `q[key]` as an integer, `default` when absent or null; anything but an integer is refused.
fn int_field(q: &Value, key: &str, default: i64) -> Result<i64, FieldError> {
    match q.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_i64()
            .ok_or_else(|| field_error(key, format!("is {v}, expected an integer"))),
    }
}

/// A bit width, which must be one of `allowed`.
fn bits_field(q: &Value, key: &str, default: i64, allowed: &[i64]) -> Result<u64, FieldError> {
    let bits = int_field(q, key, default)?;
    if !allowed.contains(&bits) {
        let list: Vec<String> = allowed.iter().map(i64::to_string).collect();
        return Err(field_error(
            key,
            format!("is {bits}, expected one of {}", list.join(", ")),
        ));
    }
    Ok(bits.unsigned_abs())
}

/// A group size: positive, or -1 for one group over the whole input (returned as 0).
fn group_field(q: &Value, key: &str, default: i64) -> Result<u64, FieldError> {
    match int_field(q, key, default)? {
        -1 => Ok(0),
        n if n > 0 => Ok(n.unsigned_abs()),
        n => Err(field_error(
            key,
            format!("is {n}, expected a positive group size or -1"),
        )),
    }
}

/// `q[key]` as a bool, `default` when absent or null.
fn bool_field(q: &Value, key: &str, default: bool) -> Result<bool, FieldError> {
    match q.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_bool()
            .ok_or_else(|| field_error(key, format!("is {v}, expected true or false"))),
    }
}

/// The quantization method a config names, as transformers reads it: `quant_method` (a
/// string), else bitsandbytes when `load_in_4bit` or `load_in_8bit` is set (older configs).
pub(crate) fn method(q: &Value) -> Result<String, FieldError> {
    if !q.is_object() {
        return Err((
            "quantization_config".into(),
            format!("is {}, expected an object", json_kind(q)),
        ));
    }
    match q.get("quant_method") {
        Some(Value::String(m)) => Ok(m.clone()),
        None | Some(Value::Null) => {
            if bool_field(q, "load_in_4bit", false)? || bool_field(q, "load_in_8bit", false)? {
                Ok("bitsandbytes".into())
            } else {
                Err(field_error(
                    "quant_method",
                    "is missing (transformers needs it to load the checkpoint)".into(),
                ))
            }
        }
        Some(v) => Err(field_error(
            "quant_method",
            format!("is {}, expected a method name", json_kind(v)),
        )),
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The scheme a `quantization_config` describes, `Ok(None)` for a method whose layout gpumem
/// does not know (the weights are then left to `--dtype`), or the config field that is wrong.
pub(crate) fn scheme(q: &Value) -> Result<Option<Scheme>, FieldError> {
    Ok(Some(match method(q)?.as_str() {
        "gptq" => Scheme::Gptq {
            bits: bits_field(q, "bits", 4, &[2, 3, 4, 8])?,
            // group_size -1: one group over the whole input.
            group: group_field(q, "group_size", 128)?,
        },
        "awq" => Scheme::Awq {
            bits: bits_field(q, "bits", 4, &[4])?,
            group: group_field(q, "group_size", 128)?,
        },
        "fp8" => {
            let block = match q.get("weight_block_size") {
                None | Some(Value::Null) => None,
                Some(Value::Array(b))
                    if b.len() == 2 && b.iter().all(|v| v.as_u64().is_some_and(|n| n > 0)) =>
                {
                    Some((b[0].as_u64().unwrap_or(1), b[1].as_u64().unwrap_or(1)))
                }
                Some(_) => {
                    return Err((
                        "quantization_config.weight_block_size".into(),
                        "is not two positive integers".into(),
                    ))
                }
            };
            Scheme::Fp8 { block }
        }
        "bitsandbytes" => {
            if bool_field(q, "load_in_4bit", false)? {
                Scheme::Bnb4 {
                    double_quant: bool_field(q, "bnb_4bit_use_double_quant", false)?,
                }
            } else {
                Scheme::Bnb8
            }
        }
        "compressed-tensors" => return compressed_tensors(q),
        "modelopt" | "modelopt_fp4" => return modelopt(q),
        _ => return Ok(None),
    }))
}

/// ModelOpt's config (flat, or under `quantization` as its hf_quant_config.json writes it):
/// NVFP4 in groups of `group_size` (16) with the weight's and the input's global scales; its
/// other algorithms are left to `--dtype`.
fn modelopt(q: &Value) -> Result<Option<Scheme>, FieldError> {
    let q = q.get("quantization").filter(|v| v.is_object()).unwrap_or(q);
    let algo = q.get("quant_algo").and_then(Value::as_str).unwrap_or("");
    if !algo.eq_ignore_ascii_case("nvfp4") {
        return Ok(None);
    }
    Ok(Some(Scheme::Fp4 {
        group: group_field(q, "group_size", 16)?,
        globals: 2,
    }))
}

/// compressed-tensors' first config group: `pack-quantized` integer weights, or 8-bit
/// `float-quantized` / `naive-quantized` ones.
fn compressed_tensors(q: &Value) -> Result<Option<Scheme>, FieldError> {
    let Some(group) = q
        .get("config_groups")
        .and_then(Value::as_object)
        .and_then(|g| g.values().next())
    else {
        return Err((
            "quantization_config.config_groups".into(),
            "is missing or empty".into(),
        ));
    };
    let w = &group["weights"];
    let at = |key: &str| format!("config_groups.*.weights.{key}");
    let bits = bits_field(w, "num_bits", 8, &[2, 3, 4, 8])
        .map_err(|(_, why)| field_error(&at("num_bits"), why))?;
    let strategy = match w.get("strategy") {
        None | Some(Value::Null) => "tensor",
        Some(Value::String(s)) => s.as_str(),
        Some(v) => {
            return Err(field_error(
                &at("strategy"),
                format!("is {}, expected a strategy name", json_kind(v)),
            ))
        }
    };
    let format = match q.get("format") {
        None | Some(Value::Null) => "",
        Some(Value::String(s)) => s.as_str(),
        Some(v) => {
            return Err(field_error(
                "format",
                format!("is {}, expected a format name", json_kind(v)),
            ))
        }
    };
    let fp4 = |group: u64, globals: u64| -> Result<Scheme, FieldError> {
        Ok(Scheme::Fp4 {
            group: group_field(w, "group_size", i64::try_from(group).unwrap_or(16))
                .map_err(|(_, why)| field_error(&at("group_size"), why))?,
            globals,
        })
    };
    // NVFP4 keeps the weight's global scale, and the input's where activations are quantized
    // too (W4A4); MXFP4's e8m0 scales need none.
    let activations = group.get("input_activations").is_some_and(|a| !a.is_null());
    Ok(Some(match format {
        "nvfp4-pack-quantized" => fp4(16, 1 + u64::from(activations))?,
        "mxfp4-pack-quantized" => fp4(32, 0)?,
        "pack-quantized" => Scheme::PackQuantized {
            bits,
            group: if strategy == "group" {
                group_field(w, "group_size", 128)
                    .map_err(|(_, why)| field_error(&at("group_size"), why))?
            } else {
                0
            },
            symmetric: bool_field(w, "symmetric", true)
                .map_err(|(_, why)| field_error(&at("symmetric"), why))?,
        },
        "float-quantized" | "naive-quantized" if bits == 8 => Scheme::FloatQuantized {
            per_channel: strategy == "channel",
        },
        _ => return Ok(None),
    }))
}

/// The modules a config keeps unquantized: `modules_to_not_convert`, `ignore` or ModelOpt's
/// `exclude_modules` (flat or under `quantization`).
pub(crate) fn kept(q: &Value) -> Vec<String> {
    let nested = q.get("quantization").filter(|v| v.is_object());
    ["modules_to_not_convert", "ignore", "exclude_modules"]
        .iter()
        .flat_map(|k| [q.get(*k), nested.and_then(|n| n.get(*k))])
        .flatten()
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

/// Whether `ignore` entry `pattern` names linear `name`: compressed-tensors' `re:` regular
/// expressions reduced to their common forms (a suffix such as `re:.*mlp.gate$`), otherwise a
/// module path or a part of one.
fn names(pattern: &str, name: &str) -> bool {
    if !pattern.starts_with("re:") && pattern.contains('*') {
        // ModelOpt's and gpt-oss's wildcards (`model.layers.*.self_attn*`): `*` any run.
        return wildcard(pattern, name) || wildcard(&format!("{pattern}.*"), name);
    }
    match pattern.strip_prefix("re:") {
        Some(re) => alternatives(re).iter().any(|re| {
            let core = re.trim_start_matches(".*").trim_end_matches('$');
            let core = core.strip_suffix(".*").unwrap_or(core);
            if re.ends_with('$') {
                name.ends_with(core)
            } else {
                name.contains(core)
            }
        }),
        None => {
            name == pattern
                || name.ends_with(&format!(".{pattern}"))
                || name.contains(&format!("{pattern}."))
                || name.split('.').any(|part| part == pattern)
        }
    }
}

/// A `re:` expression's one group of alternatives spelled out, its escaped dots unescaped:
/// Kimi-K3's `.*mlp\.(gate|up|gate_up|down)_proj.*` is four expressions without a group.
fn alternatives(re: &str) -> Vec<String> {
    let re = re.replace("\\.", ".");
    let group = re
        .find('(')
        .and_then(|open| Some((open, open + re[open..].find(')')?)));
    match group {
        Some((open, close)) => re[open + 1..close]
            .split('|')
            .map(|alt| format!("{}{alt}{}", &re[..open], &re[close + 1..]))
            .collect(),
        None => vec![re],
    }
}

/// Whether `name` matches `pattern`, whose `*` stands for any run of characters.
fn wildcard(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if parts.len() == 1 {
        return name == pattern;
    }
    if !name.starts_with(first) || !name[first.len()..].ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// Checkpoint bytes: quantized linear layers by `scheme`, everything else at 2 bytes a
/// parameter (bf16/f16), with the layers `kept` names left unquantized.
pub(crate) fn checkpoint_bytes(arch: &ModelArch, scheme: Scheme, kept: &[String]) -> u128 {
    let total = u128::from(arch.params().total);
    let mut linear_params = 0u128;
    let mut bytes = 0u128;
    for l in linears(arch) {
        let n = u128::from(l.inputs) * u128::from(l.outputs) * u128::from(l.count);
        linear_params += n;
        let keep = l.skipped_by_default || kept.iter().any(|k| names(k, &l.name));
        bytes += if keep {
            n * 2
        } else {
            linear_bytes(scheme, l.inputs, l.outputs, 2) * u128::from(l.count)
        };
    }
    bytes + total.saturating_sub(linear_params) * 2
}

#[cfg(test)]
#[path = "quantized_tests.rs"]
mod tests;
