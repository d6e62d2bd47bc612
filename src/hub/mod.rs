//! The Hugging Face Hub, read before download: a repository's file list, its small files
//! (config.json, the safetensors index) and the leading bytes of its weight files (the
//! safetensors JSON header, the GGUF header), by HTTP Range, side by side with bounded
//! concurrency, and kept in gpumem's cache by commit. No weight data is ever fetched.
//!
//! The endpoint and credentials are the ecosystem's: `HF_ENDPOINT` (a mirror, or a test's
//! stand-in), `HF_TOKEN` or the token file huggingface_hub writes, `HF_HUB_OFFLINE`,
//! `HF_HUB_DOWNLOAD_TIMEOUT`, and `HTTPS_PROXY`/`NO_PROXY`. Only its `http` module speaks HTTP.
//!
//! ```
//! use gpumem::hub::{Hub, HubError, HubRef, HubSettings};
//!
//! let id = HubRef::parse("unsloth/Qwen3-8B-GGUF:Q4_K_M").unwrap().unwrap();
//! assert_eq!((id.repo.as_str(), id.revision(), id.tag.as_deref()),
//!            ("unsloth/Qwen3-8B-GGUF", "main", Some("Q4_K_M")));
//! // Offline, with an empty cache, nothing is asked and the reason is said.
//! let cache = std::env::temp_dir().join("gpumem-doc-empty-cache");
//! let mut settings = HubSettings::from_env(true);
//! settings.cache = Some(cache);
//! let err = Hub::new(settings).repo(&id).unwrap_err();
//! assert!(matches!(err, HubError::Offline { .. }));
//! ```

mod cache;
mod error;
pub mod gguf_pick;
mod http;
mod ollama;
mod remote;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

pub use error::HubError;
pub use ollama::{OllamaModel, OllamaRef, DEFAULT_OLLAMA_REGISTRY};
pub use remote::RemoteFile;

/// The Hub's own address, when `HF_ENDPOINT` names no other.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";
/// Requests in flight at once for one model's headers.
pub const MAX_CONCURRENCY: usize = 32;
/// The largest small file fetched whole (an index of a few thousand tensors is under 1 MiB).
pub const MAX_SMALL_FILE: u64 = 64 << 20;
/// The safetensors crate's own cap on a header.
pub const MAX_SAFETENSORS_HEADER: u64 = 100_000_000;

/// `ORG/NAME[@REVISION][:TAG]`: a repository, a branch, tag or commit, and llama.cpp's
/// quantization tag for GGUF repositories.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubRef {
    /// `ORG/NAME`.
    pub repo: String,
    /// The revision asked for (`None`: the default branch, `main`).
    pub revision: Option<String>,
    /// The GGUF quantization tag (`Q4_K_M`), as llama.cpp's `-hf` takes it.
    pub tag: Option<String>,
}

impl HubRef {
    /// Parses `ORG/NAME[@REVISION][:TAG]`; `None` when the text is not of that form at all
    /// (one slash, no spaces), an error when it is but a part is not allowed.
    pub fn parse(text: &str) -> Option<Result<HubRef, HubError>> {
        let (rest, tag) = match text.rsplit_once(':') {
            Some((r, t)) => (r, Some(t)),
            None => (text, None),
        };
        let (repo, revision) = match rest.split_once('@') {
            Some((r, v)) => (r, Some(v)),
            None => (rest, None),
        };
        let parts: Vec<&str> = repo.split('/').collect();
        if parts.len() != 2 || text.contains(char::is_whitespace) || text.contains("://") {
            return None;
        }
        let bad = |why: &str| {
            Some(Err(HubError::BadId {
                given: text.to_string(),
                why: why.to_string(),
            }))
        };
        let name_ok = |p: &str| {
            !p.is_empty()
                && p.len() <= 96
                && p != "."
                && !p.contains("..")
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        };
        if !parts.iter().all(|p| name_ok(p)) {
            return bad("ORG and NAME are letters, digits and -_. (at most 96 each)");
        }
        if let Some(v) = revision {
            let ok = !v.is_empty()
                && v.len() <= 256
                && !v.contains("..")
                && v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c));
            if !ok {
                return bad(
                    "the revision after @ is a branch, tag or commit (letters, digits, -_./)",
                );
            }
        }
        if let Some(t) = tag {
            if t.is_empty()
                || t.len() > 64
                || !t
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            {
                return bad("the tag after : is a quantization such as Q4_K_M");
            }
        }
        Some(Ok(HubRef {
            repo: repo.to_string(),
            revision: revision.map(str::to_string),
            tag: tag.map(str::to_string),
        }))
    }

    /// The revision asked for, `main` by default.
    pub fn revision(&self) -> &str {
        self.revision.as_deref().unwrap_or("main")
    }
}

impl std::fmt::Display for HubRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.repo)?;
        if let Some(r) = &self.revision {
            write!(f, "@{r}")?;
        }
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        Ok(())
    }
}

/// A 40-digit hexadecimal commit.
pub(crate) fn valid_commit(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Where and how to ask.
#[derive(Debug, Clone)]
pub struct HubSettings {
    /// The endpoint, without a trailing slash.
    pub endpoint: String,
    /// The token sent to the endpoint.
    pub token: Option<String>,
    /// Why the network may not be used (`--offline`, `HF_HUB_OFFLINE=1`), if it may not.
    pub offline: Option<&'static str>,
    /// Connect and read timeout.
    pub timeout: Duration,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// gpumem's cache folder (`None`: nothing is kept).
    pub cache: Option<PathBuf>,
    /// The Ollama registry (`GPUMEM_OLLAMA_REGISTRY`, else registry.ollama.ai).
    pub ollama_registry: String,
}

impl HubSettings {
    /// As huggingface_hub reads the environment; `offline` is the `--offline` flag.
    pub fn from_env(offline: bool) -> HubSettings {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let truthy = |k: &str| {
            var(k).is_some_and(|v| {
                ["1", "ON", "YES", "TRUE"].contains(&v.trim().to_ascii_uppercase().as_str())
            })
        };
        let offline = if offline {
            Some("--offline")
        } else if truthy("HF_HUB_OFFLINE") {
            Some("HF_HUB_OFFLINE is set")
        } else {
            None
        };
        let timeout = var("HF_HUB_DOWNLOAD_TIMEOUT")
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s > 0.0)
            .map_or(Duration::from_secs(10), |s| {
                Duration::from_secs_f64(s.min(3600.0))
            });
        HubSettings {
            endpoint: var("HF_ENDPOINT")
                .unwrap_or_else(|| DEFAULT_ENDPOINT.into())
                .trim()
                .trim_end_matches('/')
                .to_string(),
            token: var("HF_TOKEN").or_else(token_file),
            offline,
            timeout,
            concurrency: MAX_CONCURRENCY,
            cache: cache::Cache::from_env().root,
            ollama_registry: var("GPUMEM_OLLAMA_REGISTRY")
                .unwrap_or_else(|| DEFAULT_OLLAMA_REGISTRY.into())
                .trim()
                .trim_end_matches('/')
                .to_string(),
        }
    }
}

/// The token huggingface_hub's `hf auth login` writes: `HF_TOKEN_PATH`, else `HF_HOME/token`,
/// else `~/.cache/huggingface/token`.
fn token_file() -> Option<String> {
    let var = crate::input::env_path;
    let path = var("HF_TOKEN_PATH")
        .or_else(|| var("HF_HOME").map(|h| h.join("token")))
        .or_else(|| var("XDG_CACHE_HOME").map(|c| c.join("huggingface/token")))
        .or_else(|| var("HOME").map(|h| h.join(".cache/huggingface/token")))?;
    let bytes = crate::input::read_bounded(&path, 4096, "a Hugging Face token").ok()?;
    let token = String::from_utf8(bytes).ok()?.trim().to_string();
    (!token.is_empty() && token.bytes().all(|b| b.is_ascii_graphic())).then_some(token)
}

/// A repository at one commit, and its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    /// `ORG/NAME`.
    pub id: String,
    /// The revision asked for.
    pub revision: String,
    /// The commit it resolved to.
    pub commit: String,
    /// Every file's path, in the Hub's order.
    pub files: Vec<String>,
    /// Where its files are, when not the Hub's `resolve` (an Ollama registry's blobs).
    pub blobs: Option<String>,
}

impl Repo {
    /// Whether the repository has `path`.
    pub fn has(&self, path: &str) -> bool {
        self.files.iter().any(|f| f == path)
    }
}

/// A Hub client with its cache.
pub struct Hub {
    settings: HubSettings,
    cache: cache::Cache,
    client: OnceLock<http::Client>,
}

impl Hub {
    /// A client; nothing is asked until a read needs it.
    pub fn new(settings: HubSettings) -> Hub {
        let cache = cache::Cache {
            root: settings.cache.clone(),
        };
        Hub {
            settings,
            cache,
            client: OnceLock::new(),
        }
    }

    /// The settings it asks with.
    pub fn settings(&self) -> &HubSettings {
        &self.settings
    }

    fn client(&self, repo: &str, revision: Option<&str>) -> Result<&http::Client, HubError> {
        if let Some(why) = self.settings.offline {
            return Err(HubError::Offline {
                looked_in: Vec::new(),
                repo: repo.to_string(),
                revision: revision.filter(|r| *r != "main").map(str::to_string),
                cache: self.cache.describe(),
                why,
            });
        }
        let web = |v: &str| v.starts_with("http://") || v.starts_with("https://");
        for (variable, value) in [
            ("HF_ENDPOINT", &self.settings.endpoint),
            ("GPUMEM_OLLAMA_REGISTRY", &self.settings.ollama_registry),
        ] {
            if !web(value) {
                return Err(HubError::BadEndpoint {
                    variable,
                    value: value.clone(),
                });
            }
        }
        Ok(self.client.get_or_init(|| {
            http::Client::new(http::ClientSettings {
                token: self.settings.token.clone(),
                endpoint: self.settings.endpoint.clone(),
                timeout: self.settings.timeout,
            })
        }))
    }

    /// Keeps `f`'s result in the cache; a cache that cannot be written is logged, not fatal
    /// (the answer is right either way).
    fn keep(&self, what: Result<(), HubError>) {
        if let Err(e) = what {
            log::warn!("{e}");
        }
    }

    /// The repository at `id`'s revision: from the cache when that revision was resolved
    /// before, else from the Hub's model-info API (one request).
    pub fn repo(&self, id: &HubRef) -> Result<Repo, HubError> {
        let revision = id.revision();
        let commit = if valid_commit(revision) {
            Some(revision.to_ascii_lowercase())
        } else {
            self.cache.commit(&id.repo, revision)
        };
        if let Some(commit) = commit {
            if let Some(files) = self.cache.list(&id.repo, &commit) {
                return Ok(Repo {
                    id: id.repo.clone(),
                    revision: revision.to_string(),
                    commit,
                    files,
                    blobs: None,
                });
            }
        }
        let client = self.client(&id.repo, id.revision.as_deref())?;
        let url = format!(
            "{}/api/models/{}/revision/{}",
            self.settings.endpoint,
            id.repo,
            encode(revision, true)
        );
        let reply = client.get(&url, None, MAX_SMALL_FILE)?;
        if reply.status != 200 {
            return Err(self.refused(&id.repo, None, revision, &url, &reply));
        }
        let repo = parse_info(&id.repo, revision, &url, &reply.body)?;
        self.keep(self.cache.set_commit(&id.repo, revision, &repo.commit));
        self.keep(self.cache.set_list(&id.repo, &repo.commit, &repo.files));
        Ok(repo)
    }

    /// The error for a reply that is not the file: gated, missing, or something else.
    fn refused(
        &self,
        repo: &str,
        path: Option<&str>,
        revision: &str,
        url: &str,
        reply: &http::Reply,
    ) -> HubError {
        let code = reply.error_code.as_deref().unwrap_or("");
        match (reply.status, code, path) {
            (401 | 403, "GatedRepo", _) => HubError::Gated {
                repo: repo.to_string(),
                page: format!("{}/{repo}", self.settings.endpoint),
                url: url.to_string(),
                status: reply.status,
            },
            (404, "EntryNotFound", Some(p)) => HubError::NoSuchFile {
                repo: repo.to_string(),
                path: p.to_string(),
                revision: revision.to_string(),
                url: url.to_string(),
            },
            (401 | 404, _, _) => HubError::NotFound {
                repo: repo.to_string(),
                endpoint: self.settings.endpoint.clone(),
                url: url.to_string(),
                status: reply.status,
                token: self.settings.token.is_some(),
            },
            (status, _, _) => HubError::BadReply {
                url: url.to_string(),
                why: format!(
                    "HTTP {status}{}",
                    if code.is_empty() {
                        String::new()
                    } else {
                        format!(" ({code})")
                    }
                ),
            },
        }
    }

    /// Where a file of `repo` is read from.
    fn url(&self, repo: &Repo, path: &str) -> String {
        // A registry blob's path is its digest (`sha256:` and hex, checked when read).
        if let Some(blobs) = &repo.blobs {
            return format!("{blobs}/{path}");
        }
        format!(
            "{}/{}/resolve/{}/{}",
            self.settings.endpoint,
            repo.id,
            repo.commit,
            encode(path, false)
        )
    }

    /// A small file whole (config.json, an index), at most `limit` bytes.
    pub fn small_file(&self, repo: &Repo, path: &str, limit: u64) -> Result<Vec<u8>, HubError> {
        if let Some(body) = self.cache.file(&repo.id, &repo.commit, path) {
            return Ok(body);
        }
        let client = self.client(&repo.id, Some(&repo.revision))?;
        let url = self.url(repo, path);
        let reply = client.get(&url, None, limit.min(MAX_SMALL_FILE))?;
        if reply.status != 200 {
            return Err(self.refused(&repo.id, Some(path), &repo.revision, &url, &reply));
        }
        self.keep(
            self.cache
                .set_file(&repo.id, &repo.commit, path, &reply.body),
        );
        Ok(reply.body)
    }

    /// `range` of a large file and the file's size (206, or the part of a 200).
    pub(crate) fn range(
        &self,
        repo: &Repo,
        path: &str,
        range: std::ops::Range<u64>,
    ) -> Result<(u64, Vec<u8>), HubError> {
        let client = self.client(&repo.id, Some(&repo.revision))?;
        let url = self.url(repo, path);
        let want = range.end - range.start;
        let reply = client.get(&url, Some(range), want)?;
        if reply.status != 206 && reply.status != 200 {
            return Err(self.refused(&repo.id, Some(path), &repo.revision, &url, &reply));
        }
        let total = reply.total.ok_or_else(|| HubError::BadReply {
            url: url.clone(),
            why: "the reply does not say the file's size (no Content-Range or Content-Length)"
                .into(),
        })?;
        Ok((total, reply.body))
    }

    /// A safetensors file's JSON header and the file's size: one Range request of `guess`
    /// bytes, and a second for the rest when the header is longer.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "usize is 64 bits (lib.rs refuses other targets)"
    )]
    pub fn safetensors_header(
        &self,
        repo: &Repo,
        path: &str,
        guess: u64,
    ) -> Result<(u64, Vec<u8>), HubError> {
        let header_len = |bytes: &[u8]| {
            bytes
                .get(..8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_le_bytes)
        };
        if let Some((size, head)) = self.cache.head(&repo.id, &repo.commit, path) {
            if let Some(n) = header_len(&head).filter(|n| head.len() as u64 >= 8 + n) {
                return Ok((size, head[8..8 + n as usize].to_vec()));
            }
        }
        let url = self.url(repo, path);
        let (size, mut head) = self.range(repo, path, 0..guess.max(8))?;
        let bad = |why: String| HubError::BadReply {
            url: url.clone(),
            why,
        };
        let n = header_len(&head)
            .ok_or_else(|| bad(format!("{size} bytes: too short to be a safetensors file")))?;
        if n > MAX_SAFETENSORS_HEADER || n > size.saturating_sub(8) {
            return Err(bad(format!(
                "not a safetensors file: a header of {n} bytes in a file of {size}"
            )));
        }
        let end = 8 + n;
        if (head.len() as u64) < end {
            let (_, rest) = self.range(repo, path, head.len() as u64..end)?;
            head.extend_from_slice(&rest);
        }
        head.truncate(end as usize);
        if (head.len() as u64) < end {
            return Err(bad(format!(
                "the header broke off at {} of {end} bytes",
                head.len()
            )));
        }
        self.keep(
            self.cache
                .set_head(&repo.id, &repo.commit, path, size, &head),
        );
        head.drain(..8);
        Ok((size, head))
    }

    /// A large file read from its start on demand (a GGUF header), from the cache when it
    /// holds it.
    pub fn open<'a>(&'a self, repo: &'a Repo, path: &str) -> Result<RemoteFile<'a>, HubError> {
        RemoteFile::open(self, repo, path)
    }

    /// `f` over `items`, at most [`HubSettings::concurrency`] at once; results in order, the
    /// first error (by position) if any.
    pub fn map<T: Sync, R: Send, E: Send>(
        &self,
        items: &[T],
        f: impl Fn(&T) -> Result<R, E> + Sync,
    ) -> Result<Vec<R>, E> {
        let next = AtomicUsize::new(0);
        let slots: Vec<Mutex<Option<Result<R, E>>>> =
            items.iter().map(|_| Mutex::new(None)).collect();
        let workers = self
            .settings
            .concurrency
            .clamp(1, MAX_CONCURRENCY)
            .min(items.len());
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let r = f(item);
                    if let Ok(mut slot) = slots[i].lock() {
                        *slot = Some(r);
                    }
                });
            }
        });
        slots
            .into_iter()
            .filter_map(|m| m.into_inner().ok().flatten())
            .collect()
    }
}

/// Percent-encodes what a URL path segment may not hold; `/` too when `slash`.
fn encode(text: &str, slash: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) || (b == b'/' && !slash) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The model-info reply: `sha` and `siblings[].rfilename`.
fn parse_info(repo: &str, revision: &str, url: &str, body: &[u8]) -> Result<Repo, HubError> {
    let bad = |why: &str| HubError::BadReply {
        url: url.to_string(),
        why: why.to_string(),
    };
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|_| bad("the model info is not JSON"))?;
    let commit = v["sha"]
        .as_str()
        .filter(|s| valid_commit(s))
        .ok_or_else(|| bad("the model info has no commit ('sha')"))?
        .to_ascii_lowercase();
    let siblings = v["siblings"]
        .as_array()
        .ok_or_else(|| bad("the model info lists no files ('siblings')"))?;
    let mut files = Vec::with_capacity(siblings.len());
    for s in siblings.iter().take(1_000_000) {
        let Some(path) = s["rfilename"].as_str() else {
            continue;
        };
        // Paths climbing out of the repository, or absolute, are never used as cache names.
        let safe = !path.is_empty()
            && !path.starts_with('/')
            && path
                .split('/')
                .all(|c| !c.is_empty() && c != "." && c != "..")
            && !path.contains(['\\', '\0']);
        if safe {
            files.push(path.to_string());
        }
    }
    Ok(Repo {
        id: repo.to_string(),
        revision: revision.to_string(),
        commit,
        files,
        blobs: None,
    })
}

#[cfg(test)]
mod tests;
