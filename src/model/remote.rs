//! A model named by its Hub id, read before download: the same sources as local files (a
//! config.json, safetensors headers, a GGUF header), their bytes fetched by [`crate::hub`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::error::ModelError;
use super::gguf::{self, GgufFile};
use super::safetensors_header::{self, SafetensorsSummary};
use super::{hf_config, FileWeights, ModelSource, Projector, SourceKind};
use crate::hub::{gguf_pick, Hub, HubError, HubRef, OllamaRef, Repo};

/// Where a model read from the Hub came from: what an engine is told to load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubOrigin {
    /// `ORG/NAME`.
    pub repo: String,
    /// The revision asked for, when not the default branch.
    pub revision: Option<String>,
    /// The commit it resolved to.
    pub commit: String,
    /// The GGUF tag asked for (llama.cpp's `-hf ORG/NAME:TAG`).
    pub tag: Option<String>,
    /// The files read: config.json and the weights' files, or the GGUF parts.
    pub files: Vec<String>,
    /// Read from an Ollama registry (`ollama:NAME:TAG`), not the Hugging Face Hub.
    pub ollama: bool,
}

/// The largest config.json or safetensors index fetched.
const MAX_CONFIG: u64 = 16 << 20;
const MAX_INDEX: u64 = 64 << 20;
/// Bytes asked for a shard's header: its tensors at 256 bytes each and 8 KiB to spare (one
/// request for real headers, whose entries are about 110 bytes); a longer one takes a second.
const HEADER_BYTES_PER_TENSOR: u64 = 256;
const HEADER_SPARE: u64 = 8 << 10;
/// Asked for a single `model.safetensors`, whose tensor count no index gives.
const SINGLE_FILE_GUESS: u64 = 256 << 10;

/// Loads `id` from the Hub (or gpumem's cache of it).
pub(crate) fn load_hub(id: &HubRef, hub: &Hub) -> Result<ModelSource, ModelError> {
    let repo = hub.repo(id)?;
    let gguf_models = repo.files.iter().any(|f| gguf_pick::is_model(f));
    let safetensors = repo.files.iter().any(|f| f.ends_with(".safetensors"));
    let mut source = if id.tag.is_some() || (gguf_models && !safetensors) {
        load_gguf(id, hub, &repo)?
    } else if safetensors || repo.has("config.json") {
        load_checkpoint(id, hub, &repo)?
    } else {
        return Err(HubError::NothingToRead {
            repo: id.repo.clone(),
            revision: repo.revision.clone(),
        }
        .into());
    };
    source.name = id.to_string();
    Ok(source)
}

/// How errors name a file of the repository.
fn label(repo: &Repo, path: &str) -> PathBuf {
    PathBuf::from(format!("{}/{path}", repo.id))
}

fn origin(id: &HubRef, repo: &Repo, files: Vec<String>) -> HubOrigin {
    HubOrigin {
        repo: id.repo.clone(),
        revision: id.revision.clone(),
        commit: repo.commit.clone(),
        tag: id.tag.clone(),
        files,
        ollama: false,
    }
}

/// A safetensors checkpoint (or a config.json alone): config.json and the index side by side,
/// then every shard's header side by side.
fn load_checkpoint(id: &HubRef, hub: &Hub, repo: &Repo) -> Result<ModelSource, ModelError> {
    let index = "model.safetensors.index.json";
    let wanted: Vec<(&str, u64)> = [("config.json", MAX_CONFIG), (index, MAX_INDEX)]
        .into_iter()
        .filter(|(p, _)| repo.has(p))
        .collect();
    let mut small: BTreeMap<&str, Vec<u8>> = wanted
        .iter()
        .map(|(p, _)| *p)
        .zip(hub.map(&wanted, |(p, limit)| hub.small_file(repo, p, *limit))?)
        .collect();
    let shards: Vec<(String, Option<u64>)> = match small.remove(index) {
        Some(bytes) => safetensors_header::index_shards(&label(repo, index), &bytes)?
            .into_iter()
            .map(|(f, n)| (f, Some(n)))
            .collect(),
        None => repo
            .files
            .iter()
            .filter(|f| f.ends_with(".safetensors") && !f.contains('/'))
            .map(|f| (f.clone(), None))
            .collect(),
    };
    let config = small.remove("config.json");
    let mut files: Vec<String> = wanted.iter().map(|(p, _)| p.to_string()).collect();
    let weights = if shards.is_empty() {
        None
    } else {
        let heads = hub.map(&shards, |(path, tensors)| {
            let guess = tensors.map_or(SINGLE_FILE_GUESS, |n| {
                8 + n.saturating_mul(HEADER_BYTES_PER_TENSOR) + HEADER_SPARE
            });
            hub.safetensors_header(repo, path, guess)
        })?;
        let mut summary = SafetensorsSummary::default();
        for ((path, _), (size, header)) in shards.iter().zip(&heads) {
            safetensors_header::add_header(&label(repo, path), *size, header, &mut summary)?;
        }
        let summary = safetensors_header::finish(&label(repo, "*.safetensors"), summary)?;
        files.extend(shards.iter().map(|(p, _)| p.clone()));
        Some(FileWeights {
            parameters: summary.parameters,
            bytes: summary.bytes,
        })
    };
    let Some(config) = config else {
        return Err(HubError::NoSuchFile {
            repo: id.repo.clone(),
            path: "config.json".into(),
            revision: repo.revision.clone(),
            url: format!("{}/{}", hub.settings().endpoint, id.repo),
        }
        .into());
    };
    let (mut arch, warnings, quantized) =
        hf_config::config_from_bytes(&label(repo, "config.json"), &id.repo, &config)?;
    arch.name = id.to_string();
    Ok(ModelSource {
        name: id.to_string(),
        kind: if weights.is_some() {
            SourceKind::Safetensors
        } else {
            SourceKind::Config
        },
        arch,
        file_weights: weights.or(quantized),
        warnings,
        projector: None,
        layer_weights: None,
        hub: Some(origin(id, repo, files)),
        hf_vision: super::hf_vision::vision_of_bytes(&config),
    })
}

/// One GGUF file's header, read by Range until its tensor infos end.
fn remote_gguf(hub: &Hub, repo: &Repo, path: &str) -> Result<GgufFile, ModelError> {
    let mut file = hub.open(repo, path)?;
    let size = file.size();
    let read = gguf::read_gguf_from(&mut file, size, &label(repo, path));
    match read {
        Ok(header) => {
            file.keep();
            Ok(header)
        }
        Err(e) => Err(file.take_error().map_or(e, ModelError::from)),
    }
}

/// The GGUF llama.cpp's `-hf` picks for the tag: every part's header side by side, merged as
/// for a local split file, and the projector beside it.
fn load_gguf(id: &HubRef, hub: &Hub, repo: &Repo) -> Result<ModelSource, ModelError> {
    let pick =
        gguf_pick::pick(&repo.files, id.tag.as_deref()).map_err(|available| HubError::NoGguf {
            repo: id.repo.clone(),
            tag: id.tag.clone(),
            available,
        })?;
    let mut wanted = pick.parts.clone();
    wanted.extend(pick.mmproj.iter().cloned());
    let mut headers = hub.map(&wanted, |p| remote_gguf(hub, repo, p))?;
    let projector = match &pick.mmproj {
        Some(path) => {
            let file = headers.pop().ok_or_else(|| HubError::NothingToRead {
                repo: id.repo.clone(),
                revision: repo.revision.clone(),
            })?;
            Some(projector_of(&label(repo, path), &file)?)
        }
        None => None,
    };
    let first = label(repo, &pick.parts[0]);
    let split = headers
        .first()
        .and_then(|h| h.u64("split.count"))
        .unwrap_or(1);
    let file = if headers.len() == 1 && split <= 1 {
        headers.pop().ok_or_else(|| HubError::NothingToRead {
            repo: id.repo.clone(),
            revision: repo.revision.clone(),
        })?
    } else {
        let count = headers.len() as u64;
        let mut model = None;
        let mut names = std::collections::HashSet::new();
        for (k, (part, path)) in headers.into_iter().zip(&pick.parts).enumerate() {
            gguf::add_part(
                &mut model,
                &mut names,
                part,
                k as u64 + 1,
                count,
                &label(repo, path),
            )?;
        }
        model.ok_or_else(|| ModelError::Format {
            path: first.clone(),
            why: "no shards".into(),
        })?
    };
    let mut source = super::source_of_gguf(&first, &file)?;
    source.projector = projector;
    source.hub = Some(origin(id, repo, wanted));
    Ok(source)
}

/// A projector GGUF's weights, refused when it is not one.
pub(crate) fn projector_of(path: &Path, file: &GgufFile) -> Result<Projector, ModelError> {
    match file.architecture() {
        Some("clip") => Ok(Projector {
            path: path.to_path_buf(),
            parameters: file.parameters(),
            bytes: file.tensor_bytes(),
            vision: super::vision::vision_tower(file),
            image_max_tokens: None,
        }),
        other => Err(ModelError::BadField {
            path: path.into(),
            field: "general.architecture".into(),
            why: format!(
                "is {}, not clip: not a multimodal projector (mmproj) GGUF",
                other.map_or("missing".to_string(), |a| format!(
                    "'{}'",
                    super::error::quoted(a)
                ))
            ),
        }),
    }
}

/// `ollama:NAME[:TAG]` or `ollama:NAMESPACE/NAME[:TAG]` not in the local store, read from the
/// registry: the manifest, then the model's GGUF header and its projector's by Range.
pub(crate) fn load_ollama(name: &str, rest: &str, hub: &Hub) -> Result<ModelSource, ModelError> {
    let (namespace, model, tag) = super::stores::ollama_name(name, rest)?;
    let r = OllamaRef {
        namespace: namespace.into(),
        name: model.into(),
        tag: tag.into(),
    };
    let found = hub.ollama(&r)?;
    let mut wanted = vec![found.model.clone()];
    wanted.extend(found.projector.iter().cloned());
    let mut headers = hub.map(&wanted, |d| remote_gguf(hub, &found.repo, d))?;
    let projector = match &found.projector {
        Some(d) => match headers.pop() {
            Some(file) => Some(projector_of(&label(&found.repo, d), &file)?),
            None => None,
        },
        None => None,
    };
    let file = headers.pop().ok_or_else(|| ModelError::Format {
        path: label(&found.repo, &found.model),
        why: "no header was read".into(),
    })?;
    let mut source = super::source_of_gguf(&label(&found.repo, &found.model), &file)?;
    source.name = name.to_string();
    source.projector = projector;
    source.hub = Some(HubOrigin {
        repo: format!("ollama:{r}"),
        revision: None,
        commit: found.repo.commit.clone(),
        tag: Some(r.tag.clone()),
        files: wanted,
        ollama: true,
    });
    Ok(source)
}
