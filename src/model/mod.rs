//! Model sources and their memory footprint: the built-in catalog, Hugging Face config.json,
//! GGUF and safetensors headers, and the estimate over them (see [`estimate`] for formulas).

mod arch;
mod catalog;
mod dtype;
mod error;
pub mod estimate;
mod gguf;
mod hf_config;
mod quantized;
mod replay;
mod safetensors_header;
pub mod stores;

use std::path::{Path, PathBuf};

use serde::Serialize;

pub use arch::{
    llama_like, Attention, GraniteScales, Mlp, ModelArch, Moe, Norm, ParamCount, ShapeField,
    SlidingLayers, SlidingWindow, Ssm, SsmKind, MAX_PARAMETERS,
};
pub use catalog::{catalog, find_model, CatalogModel};
pub use dtype::{
    ggml_type, kv_precision, weight_precision, GgmlType, Precision, GGML_TYPES, KV_PRECISIONS,
    WEIGHT_PRECISIONS,
};
pub use error::{ModelError, NotFound};
pub use estimate::{
    ActivationsBasis, Breakdown, EstimateOverflow, FileWeights, Mode, Optimizer, Settings,
    TrainingBytes, WeightsDtype, DEFAULT_WEIGHT_PRECISION,
};
pub use gguf::{read_gguf, GgufFile, GgufTensor, GgufValue};
pub use hf_config::{parse_config, read_config, KNOWN_FAMILIES};
pub use safetensors_header::{read_safetensors, SafetensorsSummary};

/// Where a model came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    /// The built-in catalog (`-m NAME`).
    Catalog,
    /// A Hugging Face config.json (shape only; weights counted at `--dtype`).
    Config,
    /// A GGUF file's header: shape and exact tensor bytes.
    Gguf,
    /// safetensors headers (one file, a directory or an index): exact tensor bytes.
    Safetensors,
}

impl std::fmt::Display for SourceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SourceKind::Catalog => "catalog",
            SourceKind::Config => "config.json",
            SourceKind::Gguf => "GGUF",
            SourceKind::Safetensors => "safetensors",
        })
    }
}

/// A model ready to estimate.
#[derive(Debug, Clone)]
pub struct ModelSource {
    /// Name shown in reports: the catalog name, GGUF `general.name`, or the file name.
    pub name: String,
    /// Where it came from.
    pub kind: SourceKind,
    /// Its shape, however it was read.
    pub arch: ModelArch,
    /// Exact weights from the file, when read from one.
    pub file_weights: Option<FileWeights>,
    /// Things the user should know (unknown family, missing config.json, …).
    pub warnings: Vec<ModelWarning>,
    /// A multimodal projector loaded beside the model (llama.cpp's mmproj), if any.
    pub projector: Option<Projector>,
}

impl ModelSource {
    /// The model's memory under `settings`, its projector's weights (if any) included.
    pub fn estimate(&self, settings: &Settings) -> Result<Breakdown, EstimateOverflow> {
        estimate::estimate_with_projector(
            &self.arch,
            self.file_weights,
            self.projector.as_ref().map_or(0, |p| p.bytes),
            settings,
        )
    }
}

/// A multimodal projector GGUF (llama.cpp's `mmproj`, architecture `clip`): its weights are
/// loaded beside the language model's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Projector {
    /// The file read.
    pub path: PathBuf,
    /// Elements over its tensors.
    pub parameters: u64,
    /// Bytes over its tensors, as llama.cpp loads them.
    pub bytes: u64,
}

/// Reads a projector GGUF's header. Refuses a GGUF of another architecture, naming it (a
/// language model given as `--mmproj` is a mistake to report, not to add).
pub fn read_projector(path: &Path) -> Result<Projector, ModelError> {
    let file = gguf::read_gguf_model(path)?;
    match file.architecture() {
        Some("clip") => Ok(Projector {
            path: path.to_path_buf(),
            parameters: file.parameters(),
            bytes: file.tensor_bytes(),
        }),
        other => Err(ModelError::BadField {
            path: path.into(),
            field: "general.architecture".into(),
            why: format!(
                "is {}, not clip: not a multimodal projector (mmproj) GGUF",
                other.map_or("missing".to_string(), |a| format!(
                    "'{}'",
                    hf_config::quoted(a)
                ))
            ),
        }),
    }
}

/// Something about a model's source that makes its estimate less certain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelWarning {
    /// config.json names a `model_type` gpumem does not know; the generic decoder formula
    /// (gated MLP, RMSNorm, no biases) was applied to the fields listed.
    UnknownModelType {
        /// The `model_type` the file declares, which gpumem has no shape rules for.
        model_type: String,
        /// The config fields the generic formula read.
        fields_used: Vec<String>,
    },
    /// A multimodal config.json: the language model is estimated, its vision tower is not.
    VisionTowerNotCounted,
    /// A safetensors model without a config.json beside it: weights are exact, KV cache and
    /// activations are not estimated.
    NoConfig {
        /// The safetensors path given.
        path: std::path::PathBuf,
    },
    /// A multimodal projector is counted by its weights; the compute buffer it uses to encode
    /// an image is not.
    ProjectorComputeNotCounted,
    /// An MLA GGUF converted before llama.cpp split `attn_kv_b`: llama.cpp caches full K and V
    /// per head for it instead of the latent a newer conversion caches.
    MlaFullCache {
        /// Elements cached per token and layer: full K and V of every head.
        full: u64,
        /// What a current conversion caches: the latent and the rotary key.
        latent: u64,
    },
}

/// Which source to load.
#[derive(Debug, Clone)]
pub enum SourceSpec {
    /// A catalog name or alias.
    Catalog(String),
    /// A Hugging Face config.json.
    Config(PathBuf),
    /// A GGUF file (only its header is read).
    Gguf(PathBuf),
    /// A safetensors file, directory or index.
    Safetensors(PathBuf),
}

/// How sources are read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Apply the generic decoder formula to a config.json whose `model_type` gpumem has no
    /// rules for (with a warning); otherwise such a model is refused.
    pub allow_generic: bool,
    /// A multimodal projector GGUF to load beside the model (`--mmproj`), in place of any the
    /// model's store names.
    pub projector: Option<PathBuf>,
}

/// Loads a model source, refusing a `model_type` gpumem has no rules for.
pub fn load(spec: &SourceSpec) -> Result<ModelSource, ModelError> {
    load_with(spec, &LoadOptions::default())
}

/// Loads a model source under `options`.
pub fn load_with(spec: &SourceSpec, options: &LoadOptions) -> Result<ModelSource, ModelError> {
    let mut source = load_any(spec)?;
    if let Some(path) = &options.projector {
        source.projector = Some(read_projector(path)?);
    }
    if source.projector.is_some() {
        source
            .warnings
            .push(ModelWarning::ProjectorComputeNotCounted);
    }
    if !options.allow_generic {
        for w in &source.warnings {
            if let ModelWarning::UnknownModelType {
                model_type,
                fields_used,
            } = w
            {
                return Err(ModelError::UnknownArchitecture {
                    model: source.name.clone(),
                    model_type: model_type.clone(),
                    fields: fields_used.join(", "),
                });
            }
        }
    }
    Ok(source)
}

fn load_any(spec: &SourceSpec) -> Result<ModelSource, ModelError> {
    match spec {
        SourceSpec::Catalog(name) => {
            let Some(m) = find_model(name) else {
                // A file given where a name goes (`models/x.gguf` would otherwise be looked up
                // as a Hugging Face ORG/NAME).
                if std::path::Path::new(name).exists() {
                    return Err(ModelError::PathNotName(name.clone()));
                }
                // Not a catalog name: a model in the Hugging Face cache or Ollama's store.
                return match stores::locate(name)? {
                    Some((spec, projector)) => {
                        let mut source = load_any(&spec)?;
                        source.name = name.clone();
                        if let Some(p) = projector {
                            source.projector = Some(read_projector(&p)?);
                        }
                        Ok(source)
                    }
                    None => Err(ModelError::UnknownModel(name.clone())),
                };
            };
            Ok(ModelSource {
                name: m.name.to_string(),
                kind: SourceKind::Catalog,
                arch: m.arch,
                file_weights: m.checkpoint_weights,
                warnings: Vec::new(),
                projector: None,
            })
        }
        SourceSpec::Config(path) => {
            let (arch, warnings, quantized) = hf_config::read_config_with_weights(path)?;
            Ok(ModelSource {
                name: arch.name.clone(),
                kind: SourceKind::Config,
                arch,
                file_weights: quantized,
                warnings,
                projector: None,
            })
        }
        SourceSpec::Gguf(path) => {
            let file = gguf::read_gguf_model(path)?;
            let arch = arch_from_gguf(path, &file)?;
            let weights = FileWeights {
                parameters: file.parameters(),
                bytes: file.tensor_bytes(),
            };
            let mut warnings = Vec::new();
            if let Attention::Mla {
                kv_lora_rank,
                qk_rope_head_dim,
                ..
            } = &arch.attention
            {
                if arch.mla_full_cache {
                    warnings.push(ModelWarning::MlaFullCache {
                        full: arch.kv_elements_per_token_layer(),
                        latent: kv_lora_rank.saturating_add(*qk_rope_head_dim),
                    });
                }
            }
            Ok(ModelSource {
                name: arch.name.clone(),
                kind: SourceKind::Gguf,
                arch,
                file_weights: Some(weights),
                warnings,
                projector: None,
            })
        }
        SourceSpec::Safetensors(path) => {
            let summary = read_safetensors(path)?;
            let dir = if path.is_dir() {
                path.clone()
            } else {
                path.parent().unwrap_or(Path::new(".")).to_path_buf()
            };
            let config = dir.join("config.json");
            let weights = FileWeights {
                parameters: summary.parameters,
                bytes: summary.bytes,
            };
            let name = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "model".into());
            if config.is_file() {
                let (mut arch, warnings) = read_config(&config)?;
                arch.name = name.clone();
                Ok(ModelSource {
                    name,
                    kind: SourceKind::Safetensors,
                    arch,
                    file_weights: Some(weights),
                    warnings,
                    projector: None,
                })
            } else {
                // Without a config the layer structure is unknown: weights are exact, the KV
                // cache and activations cannot be estimated.
                let mut arch = llama_like(&name, 1, 1, 0, 1, 1, 0);
                arch.family = "unknown".into();
                Ok(ModelSource {
                    name,
                    kind: SourceKind::Safetensors,
                    arch,
                    file_weights: Some(weights),
                    warnings: vec![ModelWarning::NoConfig {
                        path: path.to_path_buf(),
                    }],
                    projector: None,
                })
            }
        }
    }
}

/// Builds the architecture from a GGUF header's `<arch>.*` keys.
pub fn arch_from_gguf(path: &Path, file: &GgufFile) -> Result<ModelArch, ModelError> {
    let a = file
        .architecture()
        .ok_or_else(|| ModelError::MissingField {
            path: path.into(),
            field: "general.architecture".into(),
        })?
        .to_string();
    let get = |key: &str| file.u64(&format!("{a}.{key}"));
    let req = |key: &str| {
        get(key)
            .filter(|&v| v > 0)
            .ok_or_else(|| ModelError::MissingField {
                path: path.into(),
                field: format!("{a}.{key}"),
            })
    };
    let hidden = req("embedding_length")?;
    let layers = req("block_count")?;
    // Before anything below walks the layers.
    if let Some(why) = arch::implausible_layer_count(layers) {
        return Err(ModelError::BadField {
            path: path.into(),
            field: format!("{a}.block_count"),
            why,
        });
    }
    // Recurrent mixers: every layer (Mamba, Mamba-2) or all but every n-th (Qwen3-Next's
    // gated DeltaNet with full attention every `full_attention_interval`-th layer).
    let ssm_kind = match a.as_str() {
        "mamba" => Some(arch::SsmKind::Mamba),
        "jamba" => Some(arch::SsmKind::JambaMamba),
        "mamba2" | "granitehybrid" | "nemotron_h" | "nemotron_h_moe" | "falcon-h1" => {
            Some(arch::SsmKind::Mamba2)
        }
        "qwen3next" => Some(arch::SsmKind::GatedDeltaNet),
        _ => None,
    };
    // RWKV: the token shift (two past inputs per layer, the time mix's and the channel mix's)
    // is the "convolution"; the WKV state is a head size per channel.
    let rwkv = match a.as_str() {
        "rwkv6" => Some(arch::SsmKind::Rwkv6),
        "rwkv7" => Some(arch::SsmKind::Rwkv7),
        _ => None,
    };
    let ssm = match (ssm_kind, rwkv) {
        (_, Some(kind)) => {
            let head_size = req("wkv.head_size")?;
            if hidden % head_size != 0 {
                return Err(ModelError::BadField {
                    path: path.into(),
                    field: format!("{a}.wkv.head_size"),
                    why: format!(
                        "is {head_size}, which does not divide the embedding length ({hidden}) \
                         into heads"
                    ),
                });
            }
            let ranks = match kind {
                arch::SsmKind::Rwkv6 => [
                    req("time_mix_extra_dim")?,
                    req("time_decay_extra_dim")?,
                    0,
                    0,
                ],
                _ => [
                    req("attention.decay_lora_rank")?,
                    req("attention.iclr_lora_rank")?,
                    req("attention.value_residual_mix_lora_rank")?,
                    req("attention.gate_lora_rank")?,
                ],
            };
            Some(arch::Ssm {
                kind,
                conv_kernel: get("token_shift_count").unwrap_or(2).saturating_add(1),
                inner: hidden,
                state: head_size,
                dt_rank: hidden / head_size,
                groups: 0,
                conv_bias: false,
                norm: true,
                ranks,
            })
        }
        (Some(kind), None) => Some(arch::Ssm {
            kind,
            conv_kernel: req("ssm.conv_kernel")?,
            inner: req("ssm.inner_size")?,
            state: req("ssm.state_size")?,
            dt_rank: req("ssm.time_step_rank")?,
            groups: match kind {
                arch::SsmKind::Mamba | arch::SsmKind::JambaMamba => 0,
                _ => req("ssm.group_count")?,
            },
            conv_bias: kind != arch::SsmKind::GatedDeltaNet
                && file
                    .tensors
                    .iter()
                    .any(|t| t.name.ends_with(".ssm_conv1d.bias")),
            norm: match kind {
                // FalconMamba's weightless RMS norms over Δ, B and C.
                arch::SsmKind::Mamba => file.boolean(&format!("{a}.ssm.dt_b_c_rms")) == Some(true),
                arch::SsmKind::Mamba2 => file
                    .tensors
                    .iter()
                    .any(|t| t.name.ends_with(".ssm_norm.weight")),
                _ => true,
            },
            ranks: [0; 4],
        }),
        (None, None) => None,
    };
    // A key given once per layer (an array of `block_count` integers).
    let per_layer = |key: &str| -> Result<Vec<i128>, ModelError> {
        match file.metadata.get(&format!("{a}.{key}")) {
            Some(GgufValue::Array { len, ints }) if *len == ints.len() as u64 && *len == layers => {
                Ok(ints.clone())
            }
            _ => Err(ModelError::MissingField {
                path: path.into(),
                field: format!("{a}.{key} (one per layer)"),
            }),
        }
    };
    let mut ffn_blocks_alone = false;
    let mut ffn_layers = SlidingLayers::All;
    let recurrent_layers = match a.as_str() {
        "qwen3next" => SlidingLayers::AllButEvery(get("full_attention_interval").unwrap_or(4)),
        // llama.cpp's rule for Granite-4.0-H and Jamba: a layer is recurrent when its KV head
        // count is 0.
        "granitehybrid" | "jamba" => SlidingLayers::Listed(
            per_layer("attention.head_count_kv")?
                .iter()
                .map(|&n| n == 0)
                .collect(),
        ),
        // Nemotron-H's layers are one block each: attention where there are KV heads, an MLP
        // (experts in nemotron_h_moe) where there is a feed-forward width, a Mamba-2 mixer where
        // there is neither.
        "nemotron_h" | "nemotron_h_moe" => {
            let kv = per_layer("attention.head_count_kv")?;
            let ff = per_layer("feed_forward_length")?;
            let mlp: Vec<bool> = ff.iter().map(|&n| n > 0).collect();
            ffn_blocks_alone = true;
            ffn_layers = SlidingLayers::Listed(mlp);
            SlidingLayers::Listed(
                kv.iter()
                    .zip(&ff)
                    .map(|(&k, &f)| k == 0 && f == 0)
                    .collect(),
            )
        }
        _ => SlidingLayers::All,
    };
    // Falcon-H1 attends beside the mixer in every layer, llama.cpp's Falcon beside the MLP, and
    // GPT-NeoX beside it unless the file says otherwise (llama.cpp requires the key).
    let parallel_attention = match a.as_str() {
        "falcon-h1" | "falcon" => true,
        "gptneox" => file.boolean("gptneox.use_parallel_residual") != Some(false),
        _ => false,
    };
    let all_recurrent =
        ssm.is_some() && recurrent_layers == SlidingLayers::All && !parallel_attention;
    let heads = match all_recurrent {
        true => 0,
        false => req("attention.head_count")?,
    };
    let kv = get("attention.head_count_kv")
        .filter(|&v| v > 0)
        .unwrap_or(heads);
    let ffn = get("feed_forward_length").unwrap_or(hidden.saturating_mul(4));
    let vocab = get("vocab_size")
        .or_else(|| match file.metadata.get("tokenizer.ggml.tokens") {
            Some(GgufValue::Array { len, .. }) => Some(*len),
            _ => None,
        })
        .or_else(|| {
            file.tensors
                .iter()
                .find(|t| t.name == "token_embd.weight")
                .and_then(|t| t.dims.get(1).copied())
        })
        .unwrap_or(0);
    let name = match file.metadata.get("general.name") {
        Some(GgufValue::Str(Some(n))) => n.clone(),
        _ => path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| a.clone()),
    };
    let mut arch = llama_like(&name, hidden, ffn, layers, heads, kv, vocab);
    arch.family = a.clone();
    arch.head_dim = get("attention.key_length")
        .filter(|&v| v > 0)
        .unwrap_or(hidden / heads.max(1));
    arch.ssm = ssm;
    arch.recurrent_layers = recurrent_layers;
    arch.parallel_attention = parallel_attention;
    arch.ffn_blocks_alone = ffn_blocks_alone;
    arch.ffn_layers = ffn_layers;
    if all_recurrent {
        arch.head_dim = 0;
        arch.intermediate_size = 0;
        arch.norms_per_layer = 1;
    }
    // RWKV's channel mix is a squared-ReLU MLP of key and value projections after every time
    // mix; LayerNorms (with biases) before each, after the embedding and at the end.
    if rwkv.is_some() {
        arch.intermediate_size = ffn;
        arch.mlp = Mlp::Plain;
        arch.norm = Norm::Layer;
        arch.norms_per_layer = 2;
        arch.embedding_norm = true;
    }
    // What the header's tensors show, whatever the architecture: biases, q/k norms, attention
    // sinks, an output gate folded into q (its rows twice the query width), the norms each layer
    // holds, and expert, router and shared-expert-gate extras.
    let has = |suffix: &str| {
        file.tensors
            .iter()
            .any(|t| t.name.starts_with("blk.") && t.name.ends_with(suffix))
    };
    // A norm as converters name it: `.weight` after it, or (Falcon-H1's ffn_norm) nothing.
    let has_norm = |norm: &str| has(&format!(".{norm}.weight")) || has(&format!(".{norm}"));
    if !all_recurrent {
        let q_rows = file
            .tensors
            .iter()
            .find(|t| t.name.starts_with("blk.") && t.name.ends_with(".attn_q.weight"))
            .and_then(|t| t.dims.get(1).copied());
        arch.attn_output_gate =
            q_rows == Some(heads.saturating_mul(arch.head_dim).saturating_mul(2));
        arch.attention = Attention::Standard {
            qkv_bias: has(".attn_q.bias") || has(".attn_qkv.bias"),
            o_bias: has(".attn_output.bias"),
            qk_norm: has(".attn_q_norm.weight"),
        };
        arch.attention_sinks = has(".attn_sinks.weight");
        arch.mlp_bias = has(".ffn_up.bias") || has(".ffn_up_exps.bias");
        // Phi-3 fuses gate and up into one ffn_up of twice the feed-forward width.
        let fused_projections = file.tensors.iter().any(|t| {
            t.name.starts_with("blk.")
                && t.name.ends_with(".ffn_up.weight")
                && t.dims.get(1) == Some(&ffn.saturating_mul(2))
        });
        arch.fused_projections = fused_projections;
        let ungated = |up: &str, gate: &str| has(up) && !has(gate) && !fused_projections;
        if ungated(".ffn_up.weight", ".ffn_gate.weight")
            || ungated(".ffn_up_exps.weight", ".ffn_gate_exps.weight")
        {
            arch.mlp = Mlp::Plain;
        }
        if has(".attn_norm.bias") {
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
    // llama.cpp scales Gemma's queries by an op of their own (query_pre_attn_scalar).
    arch.query_prescaled = matches!(a.as_str(), "gemma" | "gemma2" | "gemma3");
    arch.joint_qkvz = a == "qwen3next" && has(".ssm_in.weight");
    arch.fused_gate_up_exps = has(".ffn_gate_up_exps.weight");
    if a == "granitehybrid" {
        let set = |key: &str| file.float(&format!("{a}.{key}")).is_some_and(|f| f != 0.0);
        arch.granite_scales = GraniteScales {
            embedding: set("embedding_scale"),
            residual: set("residual_scale"),
            logits: set("logit_scale"),
        };
        // llama.cpp's switch for Granite's RoPE (on unless the key says otherwise).
        arch.no_rope = file.boolean(&format!("{a}.rope.scaling.finetuned")) == Some(false);
    }
    arch.max_position_embeddings = get("context_length");
    arch.tie_word_embeddings = !file.tensors.iter().any(|t| t.name == "output.weight");
    if let Some(rank) = get("attention.kv_lora_rank").filter(|&v| v > 0) {
        let rope = get("rope.dimension_count").unwrap_or(64);
        // Newer conversions split attn_kv_b and give the per-head sizes as `*_mla` keys (the
        // plain ones then describe the cached latent); llama.cpp caches the latent only then.
        // Older ones keep attn_kv_b whole, and llama.cpp caches full K and V per head.
        let split = get("attention.key_length_mla").is_some();
        let (key_len, value_len) = if split {
            (
                get("attention.key_length_mla").unwrap_or(192),
                get("attention.value_length_mla").unwrap_or(128),
            )
        } else {
            (
                get("attention.key_length").unwrap_or(192),
                get("attention.value_length").unwrap_or(128),
            )
        };
        arch.attention = Attention::Mla {
            q_lora_rank: get("attention.q_lora_rank").filter(|&v| v > 0),
            kv_lora_rank: rank,
            qk_nope_head_dim: key_len.saturating_sub(rope),
            qk_rope_head_dim: rope,
            v_head_dim: value_len,
        };
        arch.head_dim = key_len;
        arch.num_kv_heads = heads;
        arch.mla_full_cache = !split;
    }
    if let Some(experts) = get("expert_count").filter(|&v| v > 0) {
        let expert_ffn = get("expert_feed_forward_length").unwrap_or(ffn);
        // Which layers route: from the tensors when they say (a router in some layers only,
        // every `step`-th from `first`: Jamba), else from the keys.
        let routed: Vec<u64> = (0..layers)
            .filter(|i| {
                let name = format!("blk.{i}.ffn_gate_inp.weight");
                file.tensors.iter().any(|t| t.name == name)
            })
            .collect();
        // Layers with a feed-forward block at all (Nemotron-H's are a few of them).
        let ffn_layers = arch.ffn_layer_count();
        let from_tensors = match routed.as_slice() {
            [first, second, ..] if (routed.len() as u64) < ffn_layers => {
                Some((*first, second - first))
            }
            // One routed layer: the last (every layer from it routes, as a leading-dense model
            // trimmed to a few layers has it), or one alone in the middle.
            [only] if ffn_layers > 1 && only + 1 == layers => Some((*only, 1)),
            [only] if ffn_layers > 1 => Some((*only, layers)),
            _ => None,
        };
        let moe_step = from_tensors
            .map(|(_, step)| step)
            .or_else(|| get("interleave_moe_layer_step"))
            .unwrap_or(1)
            .max(1);
        arch.moe = Some(Moe {
            experts,
            experts_per_token: get("expert_used_count").unwrap_or(2),
            expert_intermediate: expert_ffn,
            shared_intermediate: match get("expert_shared_feed_forward_length") {
                Some(shared) => shared,
                // Llama 4's one shared expert is as wide as a routed one.
                None if has(".ffn_up_shexp.weight") && a == "llama4" => expert_ffn,
                None => get("expert_shared_count")
                    .unwrap_or(0)
                    .saturating_mul(expert_ffn),
            },
            // Llama 4 interleaves: layers i with (i + 1) % step == 0 are MoE.
            first_dense_layers: from_tensors.map(|(first, _)| first).unwrap_or_else(|| {
                get("leading_dense_block_count").unwrap_or(moe_step.saturating_sub(1))
            }),
            layer_freq: moe_step,
            router_bias: has(".ffn_gate_inp.bias") || has(".exp_probs_b.bias"),
            shared_gate: has(".ffn_gate_inp_shexp.weight"),
            scaled_weights: file
                .float(&format!("{a}.expert_weights_scale"))
                .is_some_and(|f| f != 0.0 && f != 1.0),
            groups: (
                get("expert_group_count").unwrap_or(0),
                get("expert_group_used_count").unwrap_or(0),
            ),
        });
    }
    // llama.cpp ignores Phi-3's sliding window (its log says so) and caches the full context;
    // Llama 4's chunked attention is fixed at 8192 tokens unless the file sets 0 (none).
    let window = match (a.as_str(), get("attention.sliding_window")) {
        ("phi3", _) => None,
        ("llama4", None) => Some(8192),
        (_, w) => w.filter(|&v| v > 0),
    };
    if let Some(window) = window {
        let layers = match a.as_str() {
            // llama.cpp's swa pattern 2: even layers slide, odd ones attend to everything.
            "gemma2" | "gpt-oss" => SlidingLayers::Even,
            "gemma3" => SlidingLayers::AllButEvery(6),
            // Three chunked (Llama 4) or sliding (Command R7B, Command A) layers to one full.
            "llama4" | "cohere2" => SlidingLayers::AllButEvery(4),
            _ => SlidingLayers::All,
        };
        arch.sliding_window = Some(SlidingWindow { window, layers });
    }
    arch.check_plausible()
        .map_err(|(field, why)| ModelError::BadField {
            path: path.into(),
            field: format!("{a}.{}", field.gguf_key()),
            why,
        })?;
    Ok(arch)
}

/// Seed 000's breakdown for a Llama-style model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct InferenceMemoryEstimate {
    /// Weight bytes at the requested precision.
    pub model_bytes: usize,
    /// K and V for every layer at the full context.
    pub kv_cache_bytes: usize,
    /// Scratch for one forward pass (the largest intermediate tensors).
    pub activation_bytes: usize,
    /// Sum of the three.
    pub total_bytes: usize,
}

impl InferenceMemoryEstimate {
    /// `total_bytes` in GiB (2^30), for code written against the seed.
    pub fn total_gb(&self) -> f64 {
        self.total_bytes as f64 / (1u64 << 30) as f64
    }
    /// `model_bytes` in MiB (2^20).
    pub fn model_mb(&self) -> f64 {
        self.model_bytes as f64 / (1u64 << 20) as f64
    }
    /// KV cache in MiB.
    pub fn kv_cache_mb(&self) -> f64 {
        self.kv_cache_bytes as f64 / (1u64 << 20) as f64
    }
    /// `activation_bytes` in MiB (2^20).
    pub fn activation_mb(&self) -> f64 {
        self.activation_bytes as f64 / (1u64 << 20) as f64
    }
}

/// Seed 000: weight bytes of a Llama-style (untied, gated, RMSNorm) model.
pub fn estimate_model_memory(
    hidden_size: usize,
    intermediate_size: usize,
    n_layers: usize,
    vocab_size: usize,
    n_heads: usize,
    n_kv_heads: usize,
    dtype_bytes: usize,
) -> usize {
    let arch = llama_like(
        "model",
        hidden_size as u64,
        intermediate_size as u64,
        n_layers as u64,
        n_heads as u64,
        n_kv_heads as u64,
        vocab_size as u64,
    );
    (arch.params().total as usize).saturating_mul(dtype_bytes)
}

/// Seed 000: KV-cache bytes for one sequence of `max_seq_len` tokens.
pub fn estimate_kv_cache_memory(
    n_layers: usize,
    n_kv_heads: usize,
    head_dim: usize,
    max_seq_len: usize,
    dtype_bytes: usize,
) -> usize {
    2usize
        .saturating_mul(n_layers)
        .saturating_mul(n_kv_heads)
        .saturating_mul(head_dim)
        .saturating_mul(max_seq_len)
        .saturating_mul(dtype_bytes)
}

/// Seed 000: weights, KV cache (one sequence) and activation scratch of a Llama-style model,
/// with activations in the same precision as the weights.
#[allow(clippy::too_many_arguments)]
pub fn estimate_inference_memory(
    hidden_size: usize,
    intermediate_size: usize,
    n_layers: usize,
    vocab_size: usize,
    n_heads: usize,
    n_kv_heads: usize,
    max_seq_len: usize,
    dtype_bytes: usize,
) -> InferenceMemoryEstimate {
    let arch = llama_like(
        "model",
        hidden_size as u64,
        intermediate_size as u64,
        n_layers as u64,
        n_heads as u64,
        n_kv_heads as u64,
        vocab_size as u64,
    );
    let model_bytes = (arch.params().total as usize).saturating_mul(dtype_bytes);
    let kv_cache_bytes = estimate_kv_cache_memory(
        n_layers,
        n_kv_heads,
        hidden_size / n_heads.max(1),
        max_seq_len,
        dtype_bytes,
    );
    let precision = Precision {
        name: "f32",
        block_bytes: 4,
        block_elems: 1,
    };
    let settings = Settings {
        dtype: Some(precision),
        kv_dtype: precision,
        batch: 1,
        context: max_seq_len as u64,
        ubatch: 512,
        flash_attention: false,
        swa_full: true,
        overhead: 0,
        fragmentation_reserve: 0.0,
        mode: Mode::Infer,
        optimizer: Optimizer::Adamw,
        checkpointing: false,
    };
    let activation_bytes = estimate::inference_activations(&arch, &settings) as usize;
    InferenceMemoryEstimate {
        model_bytes,
        kv_cache_bytes,
        activation_bytes,
        total_bytes: model_bytes
            .saturating_add(kv_cache_bytes)
            .saturating_add(activation_bytes),
    }
}

#[cfg(test)]
mod tests;
