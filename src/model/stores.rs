//! Models where users keep them, found offline: the local Hugging Face cache (`--model
//! ORG/NAME`) and Ollama's model store (`--model ollama:NAME[:TAG]`). Nothing is downloaded.

use std::path::{Path, PathBuf};

use super::error::ModelError;
pub use super::error::NotFound;
use super::SourceSpec;

use crate::input::env_path as var;

/// The Hugging Face hub cache: `HF_HUB_CACHE`, else `HF_HOME/hub`, else
/// `~/.cache/huggingface/hub` (with `XDG_CACHE_HOME` honoured as the hub library does).
pub fn hf_hub_cache() -> Option<PathBuf> {
    var("HF_HUB_CACHE")
        .or_else(|| var("HF_HOME").map(|h| h.join("hub")))
        .or_else(|| var("XDG_CACHE_HOME").map(|c| c.join("huggingface/hub")))
        .or_else(|| var("HOME").map(|h| h.join(".cache/huggingface/hub")))
}

/// Ollama's model store: `OLLAMA_MODELS`, else `~/.ollama/models`.
pub fn ollama_models() -> Option<PathBuf> {
    var("OLLAMA_MODELS").or_else(|| var("HOME").map(|h| h.join(".ollama/models")))
}

/// Where the stores are: each root, or `None` where the environment names none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreRoots {
    /// The Hugging Face hub cache (see [`hf_hub_cache`]).
    pub hf_hub: Option<PathBuf>,
    /// Ollama's model store (see [`ollama_models`]).
    pub ollama: Option<PathBuf>,
}

impl StoreRoots {
    /// The roots the environment names, as the hub library and Ollama find them.
    pub fn from_env() -> Self {
        StoreRoots {
            hf_hub: hf_hub_cache(),
            ollama: ollama_models(),
        }
    }
}

/// A `--model` name that is not in the catalog, resolved against the stores: `ollama:…` in
/// Ollama's (with the multimodal projector its manifest names, if any), `ORG/NAME` in the
/// Hugging Face cache. `Ok(None)` when the name has neither form.
pub fn locate(name: &str) -> Result<Option<(SourceSpec, Option<PathBuf>)>, ModelError> {
    locate_in(name, &StoreRoots::from_env())
}

/// [`locate`] in the stores at `roots`.
pub fn locate_in(
    name: &str,
    roots: &StoreRoots,
) -> Result<Option<(SourceSpec, Option<PathBuf>)>, ModelError> {
    if let Some(rest) = name.strip_prefix("ollama:") {
        let root = roots
            .ollama
            .as_deref()
            .ok_or_else(|| not_found(name, Vec::new()))?;
        return ollama(name, rest, root).map(Some);
    }
    let parts: Vec<&str> = name.split('/').collect();
    if parts.len() == 2 && parts.iter().all(|p| valid_part(p)) {
        let root = roots
            .hf_hub
            .as_deref()
            .ok_or_else(|| not_found(name, Vec::new()))?;
        return hugging_face(name, parts[0], parts[1], root).map(|spec| Some((spec, None)));
    }
    Ok(None)
}

// Repository and model names: letters, digits and `-_.`, never `..` (no path can climb out).
fn valid_part(p: &str) -> bool {
    !p.is_empty()
        && p != "."
        && p != ".."
        && p.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

fn not_found(name: &str, looked_in: Vec<PathBuf>) -> ModelError {
    ModelError::NotInStore(NotFound {
        name: name.to_string(),
        looked_in,
    })
}

/// The longest `refs/main` read: a commit hash and a newline, with room to spare.
const MAX_REF_BYTES: u64 = 4096;
/// The longest Ollama manifest read (real ones are under 2 KiB).
const MAX_MANIFEST_BYTES: u64 = 1 << 20;

/// A store file read through the bounded reader: `Ok(None)` when nothing is there (the name
/// is then not in the store), an error when something is there that cannot be read (a FIFO, a
/// device, a file over `limit`), so a broken store is reported as broken, never as absent.
fn read_store_file(
    path: &Path,
    limit: u64,
    what: &'static str,
) -> Result<Option<Vec<u8>>, ModelError> {
    match crate::input::read_bounded(path, limit, what) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(crate::input::InputError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// `models--ORG--NAME/snapshots/REV/` in the hub cache, REV from `refs/main` when there is one
/// (else the only, or newest, snapshot): its safetensors (exact weights) with config.json, or
/// config.json alone.
fn hugging_face(name: &str, org: &str, model: &str, root: &Path) -> Result<SourceSpec, ModelError> {
    let repo = root.join(format!("models--{org}--{model}"));
    let snapshots = repo.join("snapshots");
    let refs = repo.join("refs/main");
    let by_ref = match read_store_file(&refs, MAX_REF_BYTES, "a Hugging Face ref")? {
        None => None,
        Some(bytes) => {
            let rev = std::str::from_utf8(&bytes).map(str::trim).unwrap_or("");
            if !valid_part(rev) {
                return Err(ModelError::Format {
                    path: refs,
                    why: "is not a revision (a commit hash)".into(),
                });
            }
            Some(snapshots.join(rev)).filter(|p| p.is_dir())
        }
    };
    let newest = || {
        let entries = std::fs::read_dir(&snapshots).ok()?;
        entries
            .flatten()
            .take(MAX_SNAPSHOTS)
            .filter(|e| e.path().is_dir())
            .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
            .map(|e| e.path())
    };
    let Some(snapshot) = by_ref.or_else(newest) else {
        return Err(not_found(name, vec![snapshots]));
    };
    let has_safetensors = std::fs::read_dir(&snapshot)
        .map(|d| {
            d.flatten()
                .take(MAX_SNAPSHOT_ENTRIES)
                .any(|e| e.path().extension().is_some_and(|x| x == "safetensors"))
        })
        .unwrap_or(false);
    // `exists`, not `is_file`: whatever is there is handed to the bounded reader, which names
    // a FIFO or a device as such instead of it passing for "not in the store".
    let index = snapshot.join("model.safetensors.index.json");
    if index.exists() {
        Ok(SourceSpec::Safetensors(index))
    } else if has_safetensors {
        Ok(SourceSpec::Safetensors(snapshot))
    } else if snapshot.join("config.json").exists() {
        Ok(SourceSpec::Config(snapshot.join("config.json")))
    } else {
        Err(not_found(name, vec![snapshot]))
    }
}

/// Snapshots looked at for the newest one, and entries of a snapshot looked at for a
/// safetensors file: far above any real cache, low enough that a hostile folder cannot stall.
const MAX_SNAPSHOTS: usize = 4096;
const MAX_SNAPSHOT_ENTRIES: usize = 65_536;

/// `manifests/registry.ollama.ai/{library/NAME | USER/NAME}/TAG` → the manifest's model layer
/// → `blobs/sha256-…`, a GGUF; and its projector layer's blob, when the model has one.
fn ollama(
    name: &str,
    rest: &str,
    root: &Path,
) -> Result<(SourceSpec, Option<PathBuf>), ModelError> {
    let (namespace, model, tag) = ollama_name(name, rest)?;
    let namespaced = format!("{namespace}/{model}");
    let manifest = root
        .join("manifests/registry.ollama.ai")
        .join(namespaced)
        .join(tag);
    let Some(text) = read_store_file(&manifest, MAX_MANIFEST_BYTES, "an Ollama manifest")? else {
        return Err(not_found(name, vec![manifest]));
    };
    let doc: serde_json::Value = serde_json::from_slice(&text).map_err(|e| ModelError::Json {
        path: manifest.clone(),
        why: e.to_string(),
    })?;
    let layer = |media: &str| {
        doc["layers"].as_array().and_then(|layers| {
            layers
                .iter()
                .find(|l| l["mediaType"] == media)
                .map(|l| l["digest"].as_str())
        })
    };
    const MODEL: &str = "application/vnd.ollama.image.model";
    let digest = layer(MODEL)
        .flatten()
        .ok_or_else(|| ModelError::MissingField {
            path: manifest.clone(),
            field: format!("layers[mediaType={MODEL}].digest"),
        })?;
    let model_blob = blob(root, &manifest, digest)?;
    let projector = match layer("application/vnd.ollama.image.projector") {
        None => None,
        Some(digest) => {
            let digest = digest.ok_or_else(|| ModelError::MissingField {
                path: manifest.clone(),
                field: "layers[mediaType=application/vnd.ollama.image.projector].digest".into(),
            })?;
            let path = blob(root, &manifest, digest)?;
            if !path.exists() {
                return Err(not_found(name, vec![path]));
            }
            Some(path)
        }
    };
    if model_blob.exists() {
        Ok((SourceSpec::Gguf(model_blob), projector))
    } else {
        Err(not_found(name, vec![model_blob]))
    }
}

/// `NAME[:TAG]` or `USER/NAME[:TAG]` (after `ollama:`) as namespace, name and tag (`library`
/// and `latest` by default), each part letters, digits and `-_.` (no path can climb out).
pub(crate) fn ollama_name<'a>(
    name: &str,
    rest: &'a str,
) -> Result<(&'a str, &'a str, &'a str), ModelError> {
    let (model, tag) = rest.split_once(':').unwrap_or((rest, "latest"));
    match model.split('/').collect::<Vec<_>>().as_slice() {
        [m] if valid_part(m) && valid_part(tag) => Ok(("library", m, tag)),
        [u, m] if valid_part(u) && valid_part(m) && valid_part(tag) => Ok((u, m, tag)),
        _ => Err(ModelError::BadStoreName {
            name: name.to_string(),
            why: "expected ollama:NAME[:TAG] or ollama:USER/NAME[:TAG], each part letters, \
                  digits and -_. only"
                .into(),
        }),
    }
}

/// The blob a manifest's `sha256:…` digest names.
fn blob(root: &Path, manifest: &Path, digest: &str) -> Result<PathBuf, ModelError> {
    let hex = digest
        .strip_prefix("sha256:")
        .filter(|h| h.len() == 64 && h.chars().all(|c| c.is_ascii_hexdigit()))
        .ok_or_else(|| ModelError::BadField {
            path: manifest.to_path_buf(),
            field: "layers[].digest".into(),
            why: format!("'{digest}' is not a sha256 digest"),
        })?;
    Ok(root.join("blobs").join(format!("sha256-{hex}")))
}
