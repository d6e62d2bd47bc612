//! gpumem's cache of what it read from the Hub: refs, file lists, small files and the leading
//! bytes (headers) of large ones, never a whole weight file. Keyed by the resolved commit, so
//! an entry never goes stale; a second run, or any run offline, answers from it with no
//! request. Every file is written atomically; an entry that cannot be read is a miss.
//!
//! ```text
//! ROOT/models--ORG--NAME/refs/REVISION          the commit REVISION resolved to
//! ROOT/models--ORG--NAME/COMMIT/files.json      the repository's file list
//! ROOT/models--ORG--NAME/COMMIT/files/PATH      a small file (config.json, an index)
//! ROOT/models--ORG--NAME/COMMIT/heads/PATH      8 bytes of the file's size, then its first bytes
//! ```

use std::path::{Path, PathBuf};

use super::error::HubError;

/// The largest cache entry read back (a GGUF header with its vocabulary is a few MiB).
const MAX_ENTRY: u64 = 512 << 20;

/// The cache folder, or none (no `HOME`): then nothing is kept.
#[derive(Debug, Clone)]
pub(crate) struct Cache {
    pub root: Option<PathBuf>,
}

impl Cache {
    /// `GPUMEM_CACHE_DIR`, else `XDG_CACHE_HOME/gpumem`, else `~/.cache/gpumem`; then `hub`.
    pub fn from_env() -> Cache {
        let var = crate::input::env_path;
        let root = var("GPUMEM_CACHE_DIR")
            .or_else(|| var("XDG_CACHE_HOME").map(|c| c.join("gpumem")))
            .or_else(|| var("HOME").map(|h| h.join(".cache/gpumem")))
            .map(|r| r.join("hub"));
        Cache { root }
    }

    /// Where it is, for messages.
    pub fn describe(&self) -> String {
        self.root.as_ref().map_or_else(
            || "none: HOME is not set".into(),
            |r| r.display().to_string(),
        )
    }

    fn repo_dir(&self, repo: &str) -> Option<PathBuf> {
        Some(
            self.root
                .as_ref()?
                .join(format!("models--{}", repo.replace('/', "--"))),
        )
    }

    fn ref_path(&self, repo: &str, revision: &str) -> Option<PathBuf> {
        Some(self.repo_dir(repo)?.join("refs").join(encode(revision)))
    }

    fn entry(&self, repo: &str, commit: &str, kind: &str, path: &str) -> Option<PathBuf> {
        Some(self.repo_dir(repo)?.join(commit).join(kind).join(path))
    }

    /// The commit `revision` resolved to, when cached.
    pub fn commit(&self, repo: &str, revision: &str) -> Option<String> {
        let text = read(&self.ref_path(repo, revision)?)?;
        let commit = String::from_utf8(text).ok()?.trim().to_string();
        super::valid_commit(&commit).then_some(commit)
    }

    /// Records that `revision` resolved to `commit`.
    pub fn set_commit(&self, repo: &str, revision: &str, commit: &str) -> Result<(), HubError> {
        match self.ref_path(repo, revision) {
            Some(p) => write(&p, commit.as_bytes()),
            None => Ok(()),
        }
    }

    /// The repository's file list at `commit`.
    pub fn list(&self, repo: &str, commit: &str) -> Option<Vec<String>> {
        let path = self.repo_dir(repo)?.join(commit).join("files.json");
        serde_json::from_slice(&read(&path)?).ok()
    }

    /// Keeps the repository's file list at `commit`.
    pub fn set_list(&self, repo: &str, commit: &str, files: &[String]) -> Result<(), HubError> {
        let Some(dir) = self.repo_dir(repo) else {
            return Ok(());
        };
        write(
            &dir.join(commit).join("files.json"),
            &serde_json::to_vec(files).unwrap_or_default(),
        )
    }

    /// A cached small file.
    pub fn file(&self, repo: &str, commit: &str, path: &str) -> Option<Vec<u8>> {
        read(&self.entry(repo, commit, "files", path)?)
    }

    /// Keeps a small file.
    pub fn set_file(
        &self,
        repo: &str,
        commit: &str,
        path: &str,
        body: &[u8],
    ) -> Result<(), HubError> {
        match self.entry(repo, commit, "files", path) {
            Some(p) => write(&p, body),
            None => Ok(()),
        }
    }

    /// A large file's leading bytes and its size.
    pub fn head(&self, repo: &str, commit: &str, path: &str) -> Option<(u64, Vec<u8>)> {
        let mut bytes = read(&self.entry(repo, commit, "heads", path)?)?;
        let size: [u8; 8] = bytes.get(..8)?.try_into().ok()?;
        bytes.drain(..8);
        Some((u64::from_le_bytes(size), bytes))
    }

    /// Keeps a large file's leading bytes and its size.
    pub fn set_head(
        &self,
        repo: &str,
        commit: &str,
        path: &str,
        size: u64,
        head: &[u8],
    ) -> Result<(), HubError> {
        let Some(p) = self.entry(repo, commit, "heads", path) else {
            return Ok(());
        };
        let mut bytes = Vec::with_capacity(head.len() + 8);
        bytes.extend_from_slice(&size.to_le_bytes());
        bytes.extend_from_slice(head);
        write(&p, &bytes)
    }
}

/// A revision as one file name: `/` (in `refs/pr/1`) and `%` escaped.
fn encode(revision: &str) -> String {
    revision.replace('%', "%25").replace('/', "%2F")
}

fn read(path: &Path) -> Option<Vec<u8>> {
    crate::input::read_bounded(path, MAX_ENTRY, "a Hub cache entry").ok()
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), HubError> {
    let err = |why: String| HubError::Cache {
        path: path.display().to_string(),
        why,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| err(e.to_string()))?;
    }
    crate::input::write_atomic(path, bytes, &[]).map_err(|e| err(e.to_string()))
}
