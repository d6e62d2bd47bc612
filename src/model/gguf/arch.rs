//! A GGUF header's `<arch>.*` keys and its tensors → [`ModelArch`], as llama.cpp reads them.

use std::path::Path;

use super::{GgufFile, GgufValue};
use crate::model::arch::{
    self, llama_like, Attention, Classifier, Compression, Encoder, G5nLayout, GraniteScales,
    Indexer, K3Layout, Mlp, ModelArch, Moe, Msa, Norm, Pooling, SlidingLayers, SlidingWindow, Ssm,
    SsmKind, V4Layout,
};
use crate::model::error::ModelError;
use crate::model::family::Family;

#[path = "gemma4.rs"]
mod gemma4;

/// The recurrent mixer of a family that has one (RWKV's token shift and WKV state count as one
/// too).
fn mixer_kind(family: Family) -> Option<SsmKind> {
    match family {
        Family::Mamba => Some(SsmKind::Mamba),
        Family::Jamba => Some(SsmKind::JambaMamba),
        Family::Mamba2 | Family::GraniteHybrid | Family::NemotronH | Family::FalconH1 => {
            Some(SsmKind::Mamba2)
        }
        Family::Qwen3Next | Family::Qwen35 => Some(SsmKind::GatedDeltaNet),
        Family::KimiLinear | Family::KimiK3 | Family::Glm5Next => Some(SsmKind::Kda),
        Family::Rwkv6 => Some(SsmKind::Rwkv6),
        Family::Rwkv7 => Some(SsmKind::Rwkv7),
        _ => None,
    }
}

/// One GGUF's keys under its architecture's prefix, and its tensors.
struct Keys<'a> {
    path: &'a Path,
    file: &'a GgufFile,
    /// `general.architecture`, the keys' prefix.
    a: &'a str,
}

impl Keys<'_> {
    fn get(&self, key: &str) -> Option<u64> {
        self.file.u64(&format!("{}.{key}", self.a))
    }

    /// A key that must be there and non-zero: absent is missing, 0 or another type invalid.
    fn req(&self, key: &str) -> Result<u64, ModelError> {
        match self.get(key) {
            Some(0) => Err(self.bad(key, "is 0".into())),
            Some(v) => Ok(v),
            None if self
                .file
                .metadata
                .contains_key(&format!("{}.{key}", self.a)) =>
            {
                Err(self.bad(key, "is not an unsigned integer".into()))
            }
            None => Err(ModelError::MissingField {
                path: self.path.into(),
                field: format!("{}.{key}", self.a),
            }),
        }
    }

    fn bad(&self, key: &str, why: String) -> ModelError {
        ModelError::BadField {
            path: self.path.into(),
            field: format!("{}.{key}", self.a),
            why,
        }
    }

    /// A key given once per layer (an array of `layers` integers, or of every block with the
    /// multi-token-prediction ones after them, which are dropped).
    fn per_layer(&self, key: &str, layers: u64) -> Result<Vec<i128>, ModelError> {
        let blocks = layers.saturating_add(self.file.mtp_blocks());
        match self.file.metadata.get(&format!("{}.{key}", self.a)) {
            Some(GgufValue::Array { len, ints })
                if *len == ints.len() as u64 && (*len == layers || *len == blocks) =>
            {
                Ok(ints
                    .iter()
                    .take(
                        ints.len()
                            .min(usize::try_from(layers).unwrap_or(usize::MAX)),
                    )
                    .copied()
                    .collect())
            }
            _ => Err(ModelError::MissingField {
                path: self.path.into(),
                field: format!("{}.{key} (one per layer)", self.a),
            }),
        }
    }

    /// Whether a layer tensor ends with `suffix`.
    fn has(&self, suffix: &str) -> bool {
        self.file
            .tensors
            .iter()
            .any(|t| t.name.starts_with("blk.") && t.name.ends_with(suffix))
    }
}

/// Builds the architecture from a GGUF header's `<arch>.*` keys.
pub fn arch_from_gguf(path: &Path, file: &GgufFile) -> Result<ModelArch, ModelError> {
    let a = file
        .architecture()
        .ok_or_else(|| ModelError::MissingField {
            path: path.into(),
            field: "general.architecture".into(),
        })?;
    let k = Keys { path, file, a };
    let family = Family::from_gguf(a);
    let hidden = k.req("embedding_length")?;
    // The multi-token-prediction blocks after the others are not among llama.cpp's layers.
    let layers = k.req("block_count")?.saturating_sub(file.mtp_blocks());
    // Before anything below walks the layers.
    if let Some(why) = arch::implausible_layer_count(layers) {
        return Err(k.bad("block_count", why));
    }
    let ssm = mixer(&k, family, hidden)?;
    let kinds = layer_kinds(&k, family, layers)?;
    let all_recurrent =
        ssm.is_some() && kinds.recurrent == SlidingLayers::All && !kinds.parallel_attention;
    let heads = match all_recurrent {
        true => 0,
        false => k.req("attention.head_count")?,
    };
    let kv = k
        .get("attention.head_count_kv")
        .filter(|&v| v > 0)
        .unwrap_or(heads);
    let ffn = k
        .get("feed_forward_length")
        .unwrap_or(hidden.saturating_mul(4));
    let mut arch = llama_like(
        &model_name(path, file, a),
        hidden,
        ffn,
        layers,
        heads,
        kv,
        vocab_size(&k),
    );
    arch.family = a.to_string();
    arch.head_dim = k
        .get("attention.key_length")
        .filter(|&v| v > 0)
        .unwrap_or(hidden / heads.max(1));
    arch.ssm = ssm;
    arch.recurrent_layers = kinds.recurrent;
    arch.parallel_attention = kinds.parallel_attention;
    arch.ffn_blocks_alone = kinds.ffn_blocks_alone;
    arch.ffn_layers = kinds.ffn;
    if all_recurrent {
        arch.head_dim = 0;
        arch.intermediate_size = 0;
        arch.norms_per_layer = 1;
    }
    // RWKV's channel mix is a squared-ReLU MLP of key and value projections after every time
    // mix; LayerNorms (with biases) before each, after the embedding and at the end.
    if matches!(family, Family::Rwkv6 | Family::Rwkv7) {
        arch.intermediate_size = ffn;
        arch.mlp = Mlp::Plain;
        arch.norm = Norm::Layer;
        arch.norms_per_layer = 2;
        arch.embedding_norm = true;
    }
    if !all_recurrent {
        from_tensors(&k, &mut arch, heads, ffn);
    }
    family_extras(&k, family, &mut arch);
    if matches!(
        family,
        Family::Bert | Family::NomicBert | Family::JinaBertV2
    ) {
        arch.encoder = Some(encoder(&k, family)?);
        // LayerNorms after attention and after the MLP, and one over the embeddings; the
        // encoder counts its q/k norms and MLP biases itself.
        arch.norm = Norm::Layer;
        arch.norms_per_layer = 2;
        arch.mlp_bias = false;
        if let Attention::Standard { qk_norm, .. } = &mut arch.attention {
            *qk_norm = false;
        }
    }
    arch.max_position_embeddings = k.get("context_length");
    arch.tie_word_embeddings = !file.tensors.iter().any(|t| t.name == "output.weight");
    if let Some(rank) = k.get("attention.kv_lora_rank").filter(|&v| v > 0) {
        latent_attention(&k, &mut arch, rank, heads);
    }
    if family.has_sparse_attention() {
        arch.indexer = Some(indexer(&k)?);
        arch.indexer_shared = shared_indexer_layers(&k, family, layers)?;
    }
    if let Some(experts) = k.get("expert_count").filter(|&v| v > 0) {
        arch.moe = Some(experts_from(&k, &arch, experts, ffn, family));
    }
    arch.sliding_window = sliding_window(&k, family);
    own_layouts(&k, family, layers, &mut arch)?;
    arch.check_plausible()
        .map_err(|(field, why)| k.bad(field.gguf_key(), why))?;
    Ok(arch)
}

/// The layouts some families add to the common shape: Gemma 4's per-layer embeddings and KV
/// sharing, Kimi-K3's latent experts, DeepSeek-V4's compressed attention, MiniMax-M3's sparse
/// attention and GLM-5-next's pooled indexer.
fn own_layouts(
    k: &Keys<'_>,
    family: Family,
    layers: u64,
    arch: &mut ModelArch,
) -> Result<(), ModelError> {
    if matches!(family, Family::Gemma4 | Family::Gemma4Assistant) {
        gemma4::gemma4(k, arch)?;
    }
    if family == Family::KimiK3 {
        arch.kimi_k3 = Some(kimi_k3(k));
    }
    if family == Family::DeepseekV4 {
        arch.attention_sinks = true;
        arch.deepseek_v4 = Some(deepseek_v4(k, layers)?);
    }
    if family == Family::MinimaxM3 {
        arch.msa = Some(msa(k)?);
    }
    if family == Family::Glm5Next {
        arch.glm5_next = Some(glm5_next(k, layers)?);
    }
    Ok(())
}

/// `general.name`, else the file's stem, else the architecture.
fn model_name(path: &Path, file: &GgufFile, a: &str) -> String {
    match file.metadata.get("general.name") {
        Some(GgufValue::Str(Some(n))) => n.clone(),
        _ => path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| a.to_string()),
    }
}

/// The vocabulary: its key, else the tokenizer's token list, else the embedding's rows.
fn vocab_size(k: &Keys<'_>) -> u64 {
    k.get("vocab_size")
        .or_else(|| match k.file.metadata.get("tokenizer.ggml.tokens") {
            Some(GgufValue::Array { len, .. }) => Some(*len),
            _ => None,
        })
        .or_else(|| {
            k.file
                .tensors
                .iter()
                .find(|t| t.name == "token_embd.weight")
                .and_then(|t| t.dims.get(1).copied())
        })
        .unwrap_or(0)
}

/// The recurrent mixer: every layer's (Mamba, Mamba-2) or most layers' (Qwen3-Next's gated
/// DeltaNet with full attention every `full_attention_interval`-th layer); for RWKV the token
/// shift (two past inputs per layer, the time mix's and the channel mix's) is the
/// "convolution" and the WKV state a head size per channel.
fn mixer(k: &Keys<'_>, family: Family, hidden: u64) -> Result<Option<Ssm>, ModelError> {
    let Some(kind) = mixer_kind(family) else {
        return Ok(None);
    };
    if matches!(kind, SsmKind::Rwkv6 | SsmKind::Rwkv7) {
        let head_size = k.req("wkv.head_size")?;
        if hidden % head_size != 0 {
            return Err(k.bad(
                "wkv.head_size",
                format!(
                    "is {head_size}, which does not divide the embedding length ({hidden}) into \
                     heads"
                ),
            ));
        }
        let ranks = match kind {
            SsmKind::Rwkv6 => [
                k.req("time_mix_extra_dim")?,
                k.req("time_decay_extra_dim")?,
                0,
                0,
            ],
            _ => [
                k.req("attention.decay_lora_rank")?,
                k.req("attention.iclr_lora_rank")?,
                k.req("attention.value_residual_mix_lora_rank")?,
                k.req("attention.gate_lora_rank")?,
            ],
        };
        return Ok(Some(Ssm {
            kind,
            conv_kernel: k.get("token_shift_count").unwrap_or(2).saturating_add(1),
            inner: hidden,
            state: head_size,
            dt_rank: hidden / head_size,
            groups: 0,
            conv_bias: false,
            norm: true,
            ranks,
        }));
    }
    // Kimi Delta Attention: the attention heads, each `kda.head_dim` wide for q, k and v.
    if kind == SsmKind::Kda {
        let (heads, head) = (k.req("attention.head_count")?, k.req("kda.head_dim")?);
        return Ok(Some(Ssm {
            kind,
            conv_kernel: k.req("ssm.conv_kernel")?,
            inner: heads.saturating_mul(head),
            state: head,
            dt_rank: heads,
            groups: heads,
            conv_bias: false,
            norm: true,
            ranks: [0; 4],
        }));
    }
    let tensor = |suffix: &str| k.file.tensors.iter().any(|t| t.name.ends_with(suffix));
    Ok(Some(Ssm {
        kind,
        conv_kernel: k.req("ssm.conv_kernel")?,
        inner: k.req("ssm.inner_size")?,
        state: k.req("ssm.state_size")?,
        dt_rank: k.req("ssm.time_step_rank")?,
        groups: match kind {
            SsmKind::Mamba | SsmKind::JambaMamba => 0,
            _ => k.req("ssm.group_count")?,
        },
        conv_bias: kind != SsmKind::GatedDeltaNet && tensor(".ssm_conv1d.bias"),
        norm: match kind {
            // FalconMamba's weightless RMS norms over Δ, B and C.
            SsmKind::Mamba => k.file.boolean(&format!("{}.ssm.dt_b_c_rms", k.a)) == Some(true),
            SsmKind::Mamba2 => tensor(".ssm_norm.weight"),
            _ => true,
        },
        ranks: [0; 4],
    }))
}

/// Which layers are what, where an architecture mixes them.
struct LayerKinds {
    recurrent: SlidingLayers,
    ffn: SlidingLayers,
    /// A layer is one block: attention, a mixer or a feed-forward block (Nemotron-H).
    ffn_blocks_alone: bool,
    /// Attention beside another block in every layer.
    parallel_attention: bool,
}

fn layer_kinds(k: &Keys<'_>, family: Family, layers: u64) -> Result<LayerKinds, ModelError> {
    let mut kinds = LayerKinds {
        recurrent: SlidingLayers::All,
        ffn: SlidingLayers::All,
        ffn_blocks_alone: false,
        // Falcon-H1 attends beside the mixer in every layer, llama.cpp's Falcon beside the
        // MLP, and GPT-NeoX beside it unless the file says otherwise (llama.cpp requires the
        // key).
        parallel_attention: match family {
            Family::FalconH1 | Family::Falcon => true,
            Family::GptNeox => k.file.boolean("gptneox.use_parallel_residual") != Some(false),
            _ => false,
        },
    };
    match family {
        Family::Qwen3Next | Family::Qwen35 => {
            kinds.recurrent =
                SlidingLayers::AllButEvery(k.get("full_attention_interval").unwrap_or(4))
        }
        // llama.cpp's rule for Granite-4.0-H, Jamba, Kimi-Linear, Kimi-K3 and GLM-5-next: a
        // layer is recurrent when its KV head count is 0.
        Family::GraniteHybrid
        | Family::Jamba
        | Family::KimiLinear
        | Family::KimiK3
        | Family::Glm5Next => {
            let kv = k.per_layer("attention.head_count_kv", layers)?;
            kinds.recurrent = SlidingLayers::Listed(kv.iter().map(|&n| n == 0).collect());
        }
        // Nemotron-H's layers are one block each: attention where there are KV heads, an MLP
        // (experts in nemotron_h_moe) where there is a feed-forward width, a Mamba-2 mixer
        // where there is neither.
        Family::NemotronH => {
            let kv = k.per_layer("attention.head_count_kv", layers)?;
            let ff = k.per_layer("feed_forward_length", layers)?;
            kinds.ffn_blocks_alone = true;
            kinds.ffn = SlidingLayers::Listed(ff.iter().map(|&n| n > 0).collect());
            kinds.recurrent = SlidingLayers::Listed(
                kv.iter()
                    .zip(&ff)
                    .map(|(&k, &f)| k == 0 && f == 0)
                    .collect(),
            );
        }
        _ => {}
    }
    Ok(kinds)
}

/// What the header's tensors show, whatever the architecture: biases, q/k norms, attention
/// sinks, an output gate folded into q (its rows twice the query width), Phi-3's fused gate and
/// up, an ungated MLP, LayerNorm, and the norms each layer holds.
fn from_tensors(k: &Keys<'_>, arch: &mut ModelArch, heads: u64, ffn: u64) {
    let file = k.file;
    // A norm as converters name it: `.weight` after it, or (Falcon-H1's ffn_norm) nothing.
    let has_norm = |norm: &str| k.has(&format!(".{norm}.weight")) || k.has(&format!(".{norm}"));
    let q_rows = file
        .tensors
        .iter()
        .find(|t| t.name.starts_with("blk.") && t.name.ends_with(".attn_q.weight"))
        .and_then(|t| t.dims.get(1).copied());
    arch.attn_output_gate = q_rows == Some(heads.saturating_mul(arch.head_dim).saturating_mul(2));
    arch.attention = Attention::Standard {
        qkv_bias: k.has(".attn_q.bias") || k.has(".attn_qkv.bias"),
        o_bias: k.has(".attn_output.bias"),
        qk_norm: k.has(".attn_q_norm.weight"),
    };
    // A q norm as wide as the whole query (MiniMax-M2's) norms q and k whole, not per head.
    let q_norm_width = file
        .tensors
        .iter()
        .find(|t| t.name.starts_with("blk.") && t.name.ends_with(".attn_q_norm.weight"))
        .and_then(|t| t.dims.first().copied());
    arch.qk_norm_full_width =
        heads > 1 && q_norm_width == Some(heads.saturating_mul(arch.head_dim));
    arch.attention_sinks = k.has(".attn_sinks.weight");
    arch.mlp_bias = k.has(".ffn_up.bias") || k.has(".ffn_up_exps.bias");
    // Phi-3 fuses gate and up into one ffn_up of twice the feed-forward width.
    let fused_projections = file.tensors.iter().any(|t| {
        t.name.starts_with("blk.")
            && t.name.ends_with(".ffn_up.weight")
            && t.dims.get(1) == Some(&ffn.saturating_mul(2))
    });
    arch.fused_projections = fused_projections;
    let ungated = |up: &str, gate: &str| k.has(up) && !k.has(gate) && !fused_projections;
    if ungated(".ffn_up.weight", ".ffn_gate.weight")
        || ungated(".ffn_up_exps.weight", ".ffn_gate_exps.weight")
    {
        arch.mlp = Mlp::Plain;
    }
    if k.has(".attn_norm.bias") {
        arch.norm = Norm::Layer;
    }
    let norms = [
        "attn_norm",
        "attn_norm_2",
        "ffn_norm",
        "post_attention_norm",
        "post_ffw_norm",
    ];
    arch.norms_per_layer = norms.iter().filter(|n| has_norm(n)).count() as u64;
}

/// What a few families add: Gemma's query scaled by an op of its own, Qwen3-Next's joint
/// q/k/v/z projection, fused expert gate/up, and Granite's scales and RoPE switch.
fn family_extras(k: &Keys<'_>, family: Family, arch: &mut ModelArch) {
    // llama.cpp scales Gemma's queries by an op of their own (query_pre_attn_scalar).
    arch.query_prescaled = matches!(family, Family::Gemma | Family::Gemma2 | Family::Gemma3);
    arch.joint_qkvz = family == Family::Qwen3Next && k.has(".ssm_in.weight");
    arch.fused_gate_up_exps = k.has(".ffn_gate_up_exps.weight");
    if family == Family::GraniteHybrid {
        let set = |key: &str| {
            k.file
                .float(&format!("{}.{key}", k.a))
                .is_some_and(|f| f != 0.0)
        };
        arch.granite_scales = GraniteScales {
            embedding: set("embedding_scale"),
            residual: set("residual_scale"),
            logits: set("logit_scale"),
        };
        // llama.cpp's switch for Granite's RoPE (on unless the key says otherwise).
        arch.no_rope = k.file.boolean(&format!("{}.rope.scaling.finetuned", k.a)) == Some(false);
    }
}

/// DeepSeek-V4's keys as llama.cpp's `deepseek4` loader reads them. `compress_ratios` may run
/// past `block_count` (the converter writes the config's list, the multi-token-prediction
/// block's ratio last); a ratio other than 0, 4 or 128 is refused, as llama.cpp refuses it.
fn deepseek_v4(k: &Keys<'_>, layers: u64) -> Result<V4Layout, ModelError> {
    let key = "attention.compress_ratios";
    let ratios = match k.file.metadata.get(&format!("{}.{key}", k.a)) {
        Some(GgufValue::Array { ints, .. }) if ints.len() as u64 >= layers => ints,
        Some(_) => return Err(k.bad(key, "is shorter than block_count".into())),
        None => {
            return Err(ModelError::MissingField {
                path: k.path.into(),
                field: format!("{}.{key}", k.a),
            })
        }
    };
    let compression = ratios
        .iter()
        .take(usize::try_from(layers).unwrap_or(usize::MAX))
        .map(|&r| {
            u64::try_from(r)
                .ok()
                .and_then(Compression::of)
                .ok_or_else(|| {
                    k.bad(
                        key,
                        format!("holds {r}: llama.cpp compresses by 0, 4 or 128"),
                    )
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(V4Layout {
        q_lora: k.req("attention.q_lora_rank")?,
        o_lora: k.req("attention.output_lora_rank")?,
        o_groups: k.req("attention.output_group_count")?,
        hc_mult: k.req("hyper_connection.count")?,
        hash_layers: k.get("hash_layer_count").unwrap_or(0),
        indexer_heads: k.get("attention.indexer.head_count").unwrap_or(0),
        indexer_dim: k.get("attention.indexer.key_length").unwrap_or(0),
        indexer_top_k: k.get("attention.indexer.top_k").unwrap_or(0),
        compression,
    })
}

/// Kimi-K3's keys and tensors beyond Kimi-Linear's, as llama.cpp's `kimi-k3` builder reads
/// them: the residual block, the experts' latent width and norm, the decay's lower bound (a
/// key that is there at all switches the decay's form), and the latent attention's gate.
fn kimi_k3(k: &Keys<'_>) -> K3Layout {
    K3Layout {
        res_block: k.get("attn_res.block_size").unwrap_or(0),
        latent: k.get("expert_latent_length").unwrap_or(0),
        latent_norm: k.has(".ffn_routed_norm.weight"),
        gate_lower_bound: k
            .file
            .float(&format!("{}.kda.gate_lower_bound", k.a))
            .is_some_and(f64::is_finite),
        mla_gate: k.has(".attn_gate.weight"),
        situ_up: k
            .file
            .float(&format!("{}.activation.situ_linear_beta", k.a))
            .is_some_and(|b| b > 0.0),
        renormalize: k.file.boolean(&format!("{}.expert_weights_norm", k.a)) == Some(true),
    }
}

/// An encoder's pooling (`pooling_type`; absent: none, as llama.cpp resolves it), its
/// embeddings and projections as its tensors say, and a reranker's head.
fn encoder(k: &Keys<'_>, family: Family) -> Result<Encoder, ModelError> {
    let pooling = match k.file.metadata.get(&format!("{}.pooling_type", k.a)) {
        None => Pooling::None,
        Some(GgufValue::Int(v)) => Pooling::from_gguf(*v).ok_or_else(|| {
            k.bad(
                "pooling_type",
                "is not one of llama.cpp's pooling types (-1 to 4)".into(),
            )
        })?,
        Some(_) => return Err(k.bad("pooling_type", "is not an integer".into())),
    };
    let rows = |name: &str| {
        k.file
            .tensors
            .iter()
            .find(|t| t.name == name)
            .map(|t| t.dims.get(1).copied().unwrap_or(1))
    };
    let dense = rows("cls.weight").unwrap_or(0);
    let outputs = rows("cls.output.weight");
    let positions = match family {
        Family::Bert => rows("position_embd.weight").unwrap_or(0),
        _ => 0,
    };
    Ok(Encoder {
        pooling,
        positions,
        token_types: rows("token_types.weight").unwrap_or(0),
        fused_qkv: k.has(".attn_qkv.weight"),
        rope: family == Family::NomicBert,
        norm_2: k.has(".attn_norm_2.weight"),
        qk_norm: k.has(".attn_q_norm.weight"),
        up_bias: k.has(".ffn_up.bias"),
        down_bias: k.has(".ffn_down.bias"),
        classifier: (pooling == Pooling::Rank && (dense > 0 || outputs.is_some())).then_some(
            Classifier {
                dense,
                outputs: outputs.unwrap_or(0),
            },
        ),
    })
}

/// Multi-head latent attention. Newer conversions split attn_kv_b and give the per-head sizes
/// as `*_mla` keys (the plain ones then describe the cached latent); llama.cpp caches the
/// latent only then. Older ones keep attn_kv_b whole, and llama.cpp caches full K and V per
/// head.
fn latent_attention(k: &Keys<'_>, arch: &mut ModelArch, rank: u64, heads: u64) {
    let rope = k.get("rope.dimension_count").unwrap_or(64);
    let split = k.get("attention.key_length_mla").is_some();
    let (key_len, value_len) = if split {
        (
            k.get("attention.key_length_mla").unwrap_or(192),
            k.get("attention.value_length_mla").unwrap_or(128),
        )
    } else {
        (
            k.get("attention.key_length").unwrap_or(192),
            k.get("attention.value_length").unwrap_or(128),
        )
    };
    arch.attention = Attention::Mla {
        q_lora_rank: k.get("attention.q_lora_rank").filter(|&v| v > 0),
        kv_lora_rank: rank,
        qk_nope_head_dim: key_len.saturating_sub(rope),
        qk_rope_head_dim: rope,
        v_head_dim: value_len,
    };
    arch.head_dim = key_len;
    arch.num_kv_heads = heads;
    arch.mla_full_cache = !split;
}

/// GLM-5.2's layers that reuse the previous full layer's top-k (`attention.indexer.types`
/// false), as llama.cpp's `glm-dsa` reads them: without the key, none below a 2^20-token
/// context (GLM-5, 5.1) and GLM-5.2's own pattern from one (two full layers, then one full in
/// four, over its 78). A first layer without an indexer has no top-k to reuse (llama.cpp
/// asserts): refused.
fn shared_indexer_layers(
    k: &Keys<'_>,
    family: Family,
    layers: u64,
) -> Result<SlidingLayers, ModelError> {
    let key = "attention.indexer.types";
    if family != Family::GlmDsa {
        return Ok(SlidingLayers::Listed(Vec::new()));
    }
    let shared: Vec<bool> = match k.file.metadata.get(&format!("{}.{key}", k.a)) {
        Some(_) => k.per_layer(key, layers)?.iter().map(|&t| t == 0).collect(),
        None if k.get("context_length").is_some_and(|n| n >= 1 << 20) => (0..layers)
            .map(|i| !(i < 2 || (i < 78 && (i - 2) % 4 == 0)))
            .collect(),
        None => Vec::new(),
    };
    if shared.first() == Some(&true) {
        return Err(k.bad(
            key,
            "makes the first layer share an earlier layer's indexer, which llama.cpp refuses"
                .into(),
        ));
    }
    Ok(SlidingLayers::Listed(shared))
}

/// The lightning indexer's keys.
fn indexer(k: &Keys<'_>) -> Result<Indexer, ModelError> {
    Ok(Indexer {
        heads: k.req("attention.indexer.head_count")?,
        head_dim: k.req("attention.indexer.key_length")?,
        top_k: k.req("attention.indexer.top_k")?,
    })
}

/// GLM-5-next's keys as llama.cpp's `glm5-next` loader requires them: the indexer's, its
/// pool, the residual streams (4, as its loader asserts) and which layers run an indexer of
/// their own (`attention.indexer.types`, every layer when absent).
fn glm5_next(k: &Keys<'_>, layers: u64) -> Result<G5nLayout, ModelError> {
    let key = "attention.indexer.types";
    let full_indexer = match k.file.metadata.get(&format!("{}.{key}", k.a)) {
        Some(_) => k.per_layer(key, layers)?.iter().map(|&t| t != 0).collect(),
        None => Vec::new(),
    };
    let hc_mult = k.req("hyper_connection.count")?;
    if hc_mult != 4 {
        return Err(k.bad(
            "hyper_connection.count",
            format!("is {hc_mult}: llama.cpp's glm5-next mixes 4 residual streams only"),
        ));
    }
    Ok(G5nLayout {
        hc_mult,
        kpool: k.req("attention.indexer.kpool")?,
        indexer: Indexer {
            heads: k.req("attention.indexer.head_count")?,
            head_dim: k.req("attention.indexer.key_length")?,
            top_k: k.req("attention.indexer.top_k")?,
        },
        full_indexer,
    })
}

/// MiniMax-M3's sparse attention, as its loader requires the keys (a block of 0 cells it
/// refuses; no local block is a choice).
fn msa(k: &Keys<'_>) -> Result<Msa, ModelError> {
    Ok(Msa {
        heads: k.req("attention.indexer.head_count")?,
        head_dim: k.req("attention.indexer.key_length")?,
        top_k_blocks: k.req("attention.indexer.top_k")?,
        block: k.req("attention.indexer.block_size")?,
        local_blocks: k.get("attention.indexer.local_blocks").unwrap_or(0),
    })
}

/// The experts: which layers route is read from the tensors when they say (a router in some
/// layers only, every `step`-th from `first`: Jamba), else from the keys.
fn experts_from(k: &Keys<'_>, arch: &ModelArch, experts: u64, ffn: u64, family: Family) -> Moe {
    let layers = arch.num_layers;
    let expert_ffn = k.get("expert_feed_forward_length").unwrap_or(ffn);
    let routed: Vec<u64> = (0..layers)
        .filter(|i| {
            let name = format!("blk.{i}.ffn_gate_inp.weight");
            k.file.tensors.iter().any(|t| t.name == name)
        })
        .collect();
    // Layers with a feed-forward block at all (Nemotron-H's are a few of them).
    let ffn_layers = arch.ffn_layer_count();
    let from_tensors = match routed.as_slice() {
        [first, second, ..] if (routed.len() as u64) < ffn_layers => Some((*first, second - first)),
        // One routed layer: the last (every layer from it routes, as a leading-dense model
        // trimmed to a few layers has it), or one alone in the middle.
        [only] if ffn_layers > 1 && only + 1 == layers => Some((*only, 1)),
        [only] if ffn_layers > 1 => Some((*only, layers)),
        _ => None,
    };
    let moe_step = from_tensors
        .map(|(_, step)| step)
        .or_else(|| k.get("interleave_moe_layer_step"))
        .unwrap_or(1)
        .max(1);
    Moe {
        experts,
        experts_per_token: k.get("expert_used_count").unwrap_or(2),
        expert_intermediate: expert_ffn,
        shared_intermediate: match k.get("expert_shared_feed_forward_length") {
            Some(shared) => shared,
            // Llama 4's one shared expert is as wide as a routed one.
            None if k.has(".ffn_up_shexp.weight") && family == Family::Llama4 => expert_ffn,
            None => k
                .get("expert_shared_count")
                .unwrap_or(0)
                .saturating_mul(expert_ffn),
        },
        // Llama 4 interleaves: layers i with (i + 1) % step == 0 are MoE.
        first_dense_layers: from_tensors.map(|(first, _)| first).unwrap_or_else(|| {
            k.get("leading_dense_block_count")
                .unwrap_or(moe_step.saturating_sub(1))
        }),
        layer_freq: moe_step,
        router_bias: k.has(".ffn_gate_inp.bias") || k.has(".exp_probs_b.bias"),
        shared_gate: k.has(".ffn_gate_inp_shexp.weight"),
        scaled_weights: k
            .file
            .float(&format!("{}.expert_weights_scale", k.a))
            .is_some_and(|f| f != 0.0 && f != 1.0),
        groups: (
            k.get("expert_group_count").unwrap_or(0),
            k.get("expert_group_used_count").unwrap_or(0),
        ),
    }
}

/// The sliding window and its layers. llama.cpp ignores Phi-3's sliding window (its log says
/// so) and caches the full context; Llama 4's chunked attention is fixed at 8192 tokens unless
/// the file sets 0 (none).
fn sliding_window(k: &Keys<'_>, family: Family) -> Option<SlidingWindow> {
    let window = match (family, k.get("attention.sliding_window")) {
        (Family::Phi3, _) => None,
        (Family::Llama4, None) => Some(8192),
        (_, w) => w.filter(|&v| v > 0),
    }?;
    let layers = match family {
        // llama.cpp's swa pattern 2: even layers slide, odd ones attend to everything.
        Family::Gemma2 | Family::GptOss => SlidingLayers::Even,
        Family::Gemma3 => SlidingLayers::AllButEvery(6),
        // Three chunked (Llama 4) or sliding (Command R7B, Command A) layers to one full.
        Family::Llama4 | Family::Cohere2 => SlidingLayers::AllButEvery(4),
        _ => SlidingLayers::All,
    };
    Some(SlidingWindow { window, layers })
}
