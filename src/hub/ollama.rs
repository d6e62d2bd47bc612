//! An Ollama model not in the local store, read from its registry as `ollama pull` would find
//! it: the manifest (`/v2/NAMESPACE/NAME/manifests/TAG`) names the model's GGUF blob and its
//! projector's by digest; their headers are then read by Range from `/v2/…/blobs/DIGEST` like
//! any large file. Blobs are content-addressed, so the model's digest keys the cache.

use super::{Hub, HubError, Repo};

/// Ollama's public registry.
pub const DEFAULT_OLLAMA_REGISTRY: &str = "https://registry.ollama.ai";
/// The manifest media type Ollama asks for.
const MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
const MODEL: &str = "application/vnd.ollama.image.model";
const PROJECTOR: &str = "application/vnd.ollama.image.projector";
/// Real manifests are under 2 KiB.
const MAX_MANIFEST: u64 = 1 << 20;

/// `NAME[:TAG]` or `NAMESPACE/NAME[:TAG]` (namespace `library` by default, tag `latest`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OllamaRef {
    /// `library` for official models.
    pub namespace: String,
    /// The model.
    pub name: String,
    /// The tag.
    pub tag: String,
}

/// A registry model: the blobs to read, as files of a [`Repo`] whose paths are digests.
#[derive(Debug, Clone)]
pub struct OllamaModel {
    /// Where the blobs are.
    pub repo: Repo,
    /// The model's GGUF blob (`sha256:…`).
    pub model: String,
    /// The projector's GGUF blob, when the model has one.
    pub projector: Option<String>,
}

impl OllamaRef {
    /// The cache's name for it.
    fn id(&self) -> String {
        format!("ollama/{}/{}", self.namespace, self.name)
    }
}

impl std::fmt::Display for OllamaRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace == "library" {
            write!(f, "{}:{}", self.name, self.tag)
        } else {
            write!(f, "{}/{}:{}", self.namespace, self.name, self.tag)
        }
    }
}

/// A `sha256:` digest of 64 hex digits, or `None`.
fn digest(v: &serde_json::Value) -> Option<String> {
    let d = v.as_str()?;
    let hex = d.strip_prefix("sha256:")?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then(|| d.to_string())
}

impl Hub {
    /// The registry's manifest for `r`: from the cache when the tag was resolved before.
    pub fn ollama(&self, r: &OllamaRef) -> Result<OllamaModel, HubError> {
        let id = r.id();
        let registry = &self.settings.ollama_registry;
        let base = format!("{registry}/v2/{}/{}", r.namespace, r.name);
        let url = format!("{base}/manifests/{}", r.tag);
        let cached = self
            .cache
            .commit(&id, &r.tag)
            .and_then(|key| Some((self.cache.file(&id, &key, "manifest.json")?, key)));
        let body = match cached {
            Some((body, _)) => body,
            None => {
                let client = self.client(&format!("ollama:{r}"), None)?;
                let reply = client.get_as(&url, None, MAX_MANIFEST, Some(MANIFEST))?;
                if reply.status != 200 {
                    return Err(match reply.status {
                        401 | 404 => HubError::NotFound {
                            repo: format!("ollama:{r}"),
                            endpoint: registry.clone(),
                            url,
                            status: reply.status,
                            token: true,
                        },
                        s => HubError::BadReply {
                            url,
                            why: format!("HTTP {s}"),
                        },
                    });
                }
                reply.body
            }
        };
        let bad = |why: &str| HubError::BadReply {
            url: url.clone(),
            why: why.to_string(),
        };
        let doc: serde_json::Value =
            serde_json::from_slice(&body).map_err(|_| bad("the manifest is not JSON"))?;
        let layer = |media: &str| {
            doc["layers"]
                .as_array()
                .and_then(|ls| ls.iter().find(|l| l["mediaType"] == media))
        };
        let model = layer(MODEL)
            .and_then(|l| digest(&l["digest"]))
            .ok_or_else(|| bad("the manifest names no model layer with a sha256 digest"))?;
        let projector = match layer(PROJECTOR) {
            None => None,
            Some(l) => Some(
                digest(&l["digest"])
                    .ok_or_else(|| bad("the projector layer's digest is not sha256"))?,
            ),
        };
        // The model blob's digest (content-addressed) keys what is cached for this tag.
        let key = model.trim_start_matches("sha256:")[..40].to_string();
        self.keep(self.cache.set_commit(&id, &r.tag, &key));
        self.keep(self.cache.set_file(&id, &key, "manifest.json", &body));
        let mut files = vec![model.clone()];
        files.extend(projector.clone());
        Ok(OllamaModel {
            repo: Repo {
                id,
                revision: r.tag.clone(),
                commit: key,
                files,
                blobs: Some(format!("{base}/blobs")),
            },
            model,
            projector,
        })
    }
}
