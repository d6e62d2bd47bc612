//! Model sources and their memory footprint: the built-in catalog, Hugging Face config.json,
//! GGUF and safetensors headers, the stores they sit in, and what they say apart from any engine:
//! the architecture, its parameters and its weights (each engine's estimate over them is in
//! [`crate::plan::engines`]).

mod adapter;
pub(crate) mod arch;
mod catalog;
mod catalog_instruct;
mod catalog_shapes;
pub(crate) mod dtype;
mod error;
pub(crate) mod family;
pub(crate) mod gemma4_towers;
mod gguf;
mod hf_config;
pub(crate) mod hf_vision;
pub(crate) mod layers;
mod quantized;
mod remote;
mod safetensors_header;
pub mod stores;
mod vision;
mod weights;

use std::path::{Path, PathBuf};

use serde::Serialize;

pub use adapter::{read_lora, LoraAdapter, LoraPair};
pub use arch::{
    llama_like, Attention, Classifier, Encoder, FullAttention, GraniteScales, Indexer, Mlp,
    ModelArch, Moe, Norm, ParamCount, Pooling, ShapeField, SlidingLayers, SlidingWindow, Ssm,
    SsmKind, MAX_PARAMETERS,
};
pub use catalog::{catalog, closest_model, find_by_hub_id, find_model, instruct_of, CatalogModel};
pub use dtype::{
    ggml_type, kv_precision, weight_precision, GgmlType, Precision, WeightFormat, GGML_TYPES,
    KV_F16, KV_PRECISIONS, WEIGHT_BF16, WEIGHT_F16, WEIGHT_F32, WEIGHT_FP8, WEIGHT_PRECISIONS,
};
pub use error::{ModelError, NotFound};
pub use family::{Family, Spellings, FAMILIES};
pub use gguf::{arch_from_gguf, read_gguf, GgufFile, GgufTensor, GgufValue};
pub use hf_config::{parse_config, read_config};
pub use hf_vision::{HfVision, TowerKind, VisionShape};
pub use layers::{FfnBytes, FfnClass, FfnMove, LayerMove, LayerWeights};
pub use remote::HubOrigin;
pub use safetensors_header::{read_safetensors, SafetensorsSummary};
pub use vision::{ProjectorKind, VisionTower};
pub use weights::{FileWeights, WeightsDtype, DEFAULT_WEIGHT_PRECISION};

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
    /// The weights by the layer llama.cpp puts them in, exact from a GGUF's tensors (`None`
    /// for other sources, which count them from the shape).
    pub layer_weights: Option<LayerWeights>,
    /// The Hub repository it was read from, when named by its id.
    pub hub: Option<HubOrigin>,
    /// A multimodal config.json's vision tower (`vision_config`), which engines that load it
    /// (vLLM) count or refuse.
    pub hf_vision: Option<HfVision>,
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
    /// Its vision tower, where the file describes one.
    pub vision: Option<VisionTower>,
    /// llama-server's `--image-max-tokens`: the most tokens an image may take, which bounds the
    /// largest image a dynamic-resolution tower encodes (`None`: the projector's own limit).
    pub image_max_tokens: Option<u64>,
}

impl Projector {
    /// Whether gpumem knows the graph that encodes an image with it (so an engine can size
    /// its compute buffer).
    pub fn graph_known(&self) -> bool {
        self.vision
            .as_ref()
            .is_some_and(|v| !matches!(v.kind, ProjectorKind::Other(_)))
    }
}

/// Reads a projector GGUF's header. Refuses a GGUF of another architecture, naming it (a
/// language model given as `--mmproj` is a mistake to report, not to add).
pub fn read_projector(path: &Path) -> Result<Projector, ModelError> {
    remote::projector_of(path, &gguf::read_gguf_model(path)?)
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
    /// A multimodal config.json whose towers gpumem counts but no engine's figures hold
    /// (Gemma 4's vision and audio towers): their parameters, with their projections.
    TowersNotCounted {
        /// The towers' parameters.
        parameters: u64,
    },
    /// A safetensors model without a config.json beside it: weights are exact, KV cache and
    /// activations are not estimated.
    NoConfig {
        /// The safetensors path given.
        path: std::path::PathBuf,
    },
    /// A multimodal projector is counted by its weights; the compute buffer it uses to encode
    /// an image is not.
    ProjectorComputeNotCounted,
    /// A catalog model's Hub id answered from gpumem's bundled copy of its config.json, since
    /// the Hub could not be asked.
    BundledConfig {
        /// The repository.
        repo: String,
        /// Why the Hub was not read.
        why: String,
    },
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
    /// Never ask the Hub (`--offline`; `HF_HUB_OFFLINE=1` does the same): a Hub id is answered
    /// from gpumem's cache or the Hugging Face cache, or refused.
    pub offline: bool,
    /// llama-server's `--image-max-tokens` for the projector, if one is loaded.
    pub image_max_tokens: Option<u64>,
}

/// Loads a model source, refusing a `model_type` gpumem has no rules for.
pub fn load(spec: &SourceSpec) -> Result<ModelSource, ModelError> {
    load_with(spec, &LoadOptions::default())
}

/// Loads a model source under `options`.
pub fn load_with(spec: &SourceSpec, options: &LoadOptions) -> Result<ModelSource, ModelError> {
    let mut source = load_any(spec, options)?;
    if let Some(path) = &options.projector {
        source.projector = Some(read_projector(path)?);
    }
    if let Some(p) = source.projector.as_mut() {
        p.image_max_tokens = options.image_max_tokens;
        let minimum = p.vision.as_ref().and_then(|v| v.kind.image_min_tokens());
        if let (Some(given), Some(minimum)) = (p.image_max_tokens, minimum) {
            if given < minimum {
                return Err(ModelError::Format {
                    path: p.path.clone(),
                    why: format!(
                        "--image-max-tokens {given} is under the {minimum} tokens this \
                         projector's images take at least; llama.cpp refuses to load it"
                    ),
                });
            }
        }
    }
    if source.projector.as_ref().is_some_and(|p| !p.graph_known()) {
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

fn load_any(spec: &SourceSpec, options: &LoadOptions) -> Result<ModelSource, ModelError> {
    match spec {
        SourceSpec::Catalog(name) => load_named(name, options),
        SourceSpec::Config(path) => load_config(path),
        SourceSpec::Gguf(path) => load_gguf(path),
        SourceSpec::Safetensors(path) => load_safetensors(path),
    }
}

/// A catalog name, else a model in the Hugging Face cache or Ollama's store, else a Hub id
/// read from the Hub (or gpumem's cache of it).
fn load_named(name: &str, options: &LoadOptions) -> Result<ModelSource, ModelError> {
    let Some(m) = find_model(name) else {
        // A file given where a name goes (`models/x.gguf` would otherwise be looked up
        // as a Hugging Face ORG/NAME).
        if std::path::Path::new(name).exists() {
            return Err(ModelError::PathNotName(name.to_string()));
        }
        let hub_id = crate::hub::HubRef::parse(name).transpose()?;
        // The Hugging Face cache first, for a plain ORG/NAME (a revision or a GGUF tag is
        // read from the Hub or gpumem's cache); Ollama's store for `ollama:`.
        if let Some(rest) = name.strip_prefix("ollama:") {
            return match stores::locate(name) {
                Err(ModelError::NotInStore(nf)) => {
                    let hub =
                        crate::hub::Hub::new(crate::hub::HubSettings::from_env(options.offline));
                    remote::load_ollama(name, rest, &hub).map_err(|e| match e {
                        ModelError::Hub(crate::hub::HubError::Offline { .. }) => {
                            ModelError::NotInStore(nf)
                        }
                        e => e,
                    })
                }
                found => {
                    let (spec, projector) = found?.ok_or_else(|| ModelError::UnknownModel {
                        name: name.to_string(),
                        suggestion: None,
                    })?;
                    let mut source = load_any(&spec, options)?;
                    source.name = name.to_string();
                    if let Some(p) = projector {
                        source.projector = Some(read_projector(&p)?);
                    }
                    Ok(source)
                }
            };
        }
        let mut looked_in = Vec::new();
        let local = match &hub_id {
            Some(id) if id.revision.is_some() || id.tag.is_some() => None,
            _ => match stores::locate(name) {
                Ok(found) => found,
                Err(ModelError::NotInStore(nf)) if hub_id.is_some() => {
                    looked_in = nf.looked_in;
                    None
                }
                Err(e) => return Err(e),
            },
        };
        return match (local, hub_id) {
            (Some((spec, projector)), _) => {
                let mut source = load_any(&spec, options)?;
                source.name = name.to_string();
                if let Some(p) = projector {
                    source.projector = Some(read_projector(&p)?);
                }
                Ok(source)
            }
            (None, Some(id)) => load_hub_id(&id, &looked_in, options),
            (None, None) => Err(ModelError::UnknownModel {
                name: name.to_string(),
                suggestion: catalog::closest_model(name),
            }),
        };
    };
    Ok(catalog_source(m))
}

/// A Hub id read from the Hub or gpumem's cache. Where the Hub cannot be asked (offline, or
/// the network failed) and the id is a catalog model's, its bundled shape answers, with a
/// warning saying why; otherwise the failure names the caches looked in.
fn load_hub_id(
    id: &crate::hub::HubRef,
    looked_in: &[PathBuf],
    options: &LoadOptions,
) -> Result<ModelSource, ModelError> {
    use crate::hub::{Hub, HubError, HubSettings};
    let hub = Hub::new(HubSettings::from_env(options.offline));
    let err = match remote::load_hub(id, &hub) {
        Ok(source) => return Ok(source),
        Err(ModelError::Hub(e @ (HubError::Offline { .. } | HubError::Network { .. }))) => e,
        Err(e) => return Err(e),
    };
    let bundled = (id.revision.is_none() && id.tag.is_none())
        .then(|| find_by_hub_id(&id.repo))
        .flatten();
    if let Some(m) = bundled {
        let mut source = catalog_source(m);
        source.name = id.repo.clone();
        source.warnings.push(ModelWarning::BundledConfig {
            repo: id.repo.clone(),
            why: err.to_string(),
        });
        return Ok(source);
    }
    Err(ModelError::Hub(match err {
        HubError::Offline {
            repo,
            revision,
            cache,
            why,
            ..
        } => HubError::Offline {
            looked_in: looked_in.iter().map(|p| p.display().to_string()).collect(),
            repo,
            revision,
            cache,
            why,
        },
        e => e,
    }))
}

/// A catalog model as a source: its bundled shape, weights at `--dtype` unless its
/// quantization fixes them.
fn catalog_source(m: CatalogModel) -> ModelSource {
    ModelSource {
        name: m.name.to_string(),
        kind: SourceKind::Catalog,
        arch: m.arch,
        file_weights: m.checkpoint_weights,
        warnings: Vec::new(),
        projector: None,
        layer_weights: None,
        hub: None,
        hf_vision: None,
    }
}

fn load_config(path: &Path) -> Result<ModelSource, ModelError> {
    let (arch, warnings, quantized) = hf_config::read_config_with_weights(path)?;
    Ok(ModelSource {
        name: arch.name.clone(),
        kind: SourceKind::Config,
        arch,
        file_weights: quantized,
        warnings,
        projector: None,
        layer_weights: None,
        hub: None,
        hf_vision: config_vision(path),
    })
}

/// A GGUF (any shard of a split one), warning where llama.cpp will cache full per-head K and V
/// for latent attention.
fn load_gguf(path: &Path) -> Result<ModelSource, ModelError> {
    source_of_gguf(path, &gguf::read_gguf_model(path)?)
}

/// The source a GGUF header describes (`path` names it in errors).
fn source_of_gguf(path: &Path, file: &GgufFile) -> Result<ModelSource, ModelError> {
    let arch = arch_from_gguf(path, file)?;
    let arch_layers = arch.num_layers;
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
        // Padded to the CPU's and RPC devices' 32-byte alignment.
        layer_weights: Some(LayerWeights::of(file, arch_layers, 32)),
        hub: None,
        hf_vision: None,
    })
}

/// Safetensors headers: exact weights, and the shape from the config.json beside them (without
/// one the layer structure is unknown).
fn load_safetensors(path: &Path) -> Result<ModelSource, ModelError> {
    let summary = read_safetensors(path)?;
    let dir = if path.is_dir() {
        path.to_path_buf()
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
    // `exists`: a config.json that is there but unreadable (a FIFO, a directory) is reported by
    // the bounded reader, not passed over as missing.
    if config.exists() {
        let (mut arch, warnings) = read_config(&config)?;
        arch.name = name.clone();
        Ok(ModelSource {
            name,
            kind: SourceKind::Safetensors,
            arch,
            file_weights: Some(weights),
            warnings,
            projector: None,
            layer_weights: None,
            hub: None,
            hf_vision: config_vision(&config),
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
            layer_weights: None,
            hub: None,
            hf_vision: None,
        })
    }
}

/// The vision tower of the config.json at `path` (read once more: the language model's parser
/// keeps none of it).
fn config_vision(path: &Path) -> Option<HfVision> {
    let text = crate::input::read_bounded(path, 16 << 20, "a config.json").ok()?;
    hf_vision::vision_of_bytes(&text)
}

/// The unified-pool design's breakdown for a Llama-style model.
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
    /// `total_bytes` in GiB (2^30), for code written against the unified-pool design.
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

/// The Llama-style shape the unified-pool design's calls take their sizes for.
pub(crate) fn design_shape(
    hidden_size: usize,
    intermediate_size: usize,
    n_layers: usize,
    vocab_size: usize,
    n_heads: usize,
    n_kv_heads: usize,
) -> ModelArch {
    llama_like(
        "model",
        hidden_size as u64,
        intermediate_size as u64,
        n_layers as u64,
        n_heads as u64,
        n_kv_heads as u64,
        vocab_size as u64,
    )
}

/// The unified-pool design: weight bytes of a Llama-style (untied, gated, RMSNorm) model.
pub fn estimate_model_memory(
    hidden_size: usize,
    intermediate_size: usize,
    n_layers: usize,
    vocab_size: usize,
    n_heads: usize,
    n_kv_heads: usize,
    dtype_bytes: usize,
) -> usize {
    let arch = design_shape(
        hidden_size,
        intermediate_size,
        n_layers,
        vocab_size,
        n_heads,
        n_kv_heads,
    );
    usize::try_from(arch.params().total)
        .unwrap_or(usize::MAX)
        .saturating_mul(dtype_bytes)
}

/// The unified-pool design: KV-cache bytes for one sequence of `max_seq_len` tokens.
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

#[cfg(test)]
mod tests;
