//! What can go wrong reading the Hub, each said in one line with the URL and what to do.

/// A Hub read that failed.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// The repository (or the revision) does not exist, or is private and no token was given.
    #[error("{repo} is not on {endpoint} (HTTP {status} for {url}); check the id{}", if *.token { "" } else { ", or set HF_TOKEN if the repository is private" })]
    NotFound {
        /// The repository id.
        repo: String,
        /// The endpoint asked.
        endpoint: String,
        /// The URL that answered.
        url: String,
        /// The HTTP status.
        status: u16,
        /// Whether a token was sent.
        token: bool,
    },
    /// A file the answer needs is not in the repository at that revision.
    #[error("{repo} has no file '{path}' at {revision} ({url})")]
    NoSuchFile {
        /// The repository id.
        repo: String,
        /// The file.
        path: String,
        /// The revision.
        revision: String,
        /// The URL that answered 404.
        url: String,
    },
    /// A gated repository asked for without access.
    #[error("{repo} is gated: accept its licence at {page} and set HF_TOKEN to a token of that account ({url} answered HTTP {status})")]
    Gated {
        /// The repository id.
        repo: String,
        /// The repository's page, where the licence is accepted.
        page: String,
        /// The URL that refused.
        url: String,
        /// 401 or 403.
        status: u16,
    },
    /// Offline (`--offline` or `HF_HUB_OFFLINE=1`) and not in gpumem's cache.
    #[error("{repo}{} is not in {}gpumem's cache ({cache}) and the Hub may not be asked ({why}); run once online to cache its headers", revision.as_deref().map(|r| format!("@{r}")).unwrap_or_default(), if looked_in.is_empty() { String::new() } else { format!("the Hugging Face cache ({}) or ", looked_in.join(", ")) })]
    Offline {
        /// Where the Hugging Face cache was looked in first, if it was.
        looked_in: Vec<String>,
        /// The repository id.
        repo: String,
        /// The revision asked for, if not the default branch.
        revision: Option<String>,
        /// The cache folder looked in.
        cache: String,
        /// Which switch is on.
        why: &'static str,
    },
    /// The request failed after its retries: a connection, a timeout, or a server error.
    #[error("{url}: {why} (after {attempts} attempt{}); check the network{}, or run with --offline to answer from the cache", if *.attempts == 1 { "" } else { "s" }, if *.proxy { " and HTTPS_PROXY" } else { " or HF_ENDPOINT" })]
    Network {
        /// The URL.
        url: String,
        /// What went wrong the last time.
        why: String,
        /// Requests made.
        attempts: u32,
        /// Whether a proxy is set.
        proxy: bool,
    },
    /// The server answered with something gpumem cannot use.
    #[error("{url}: {why}")]
    BadReply {
        /// The URL.
        url: String,
        /// What was wrong.
        why: String,
    },
    /// `HF_ENDPOINT` (or `GPUMEM_OLLAMA_REGISTRY`) is not an http(s) address.
    #[error("{variable} is '{value}', not an http:// or https:// address")]
    BadEndpoint {
        /// The variable.
        variable: &'static str,
        /// Its value.
        value: String,
    },
    /// `--model` is not a valid Hub reference.
    #[error("'{given}' is not a Hub model id: {why}")]
    BadId {
        /// What was given.
        given: String,
        /// What is wrong with it.
        why: String,
    },
    /// A GGUF repository has no file for the tag.
    #[error("{repo} has no GGUF file {}; it has {}", tag.as_deref().map(|t| format!("for the tag {t}")).unwrap_or_else(|| "to run".into()), if available.is_empty() { "none".to_string() } else { available.join(", ") })]
    NoGguf {
        /// The repository id.
        repo: String,
        /// The tag asked for.
        tag: Option<String>,
        /// The tags the repository has.
        available: Vec<String>,
    },
    /// The repository holds neither weights nor a config gpumem reads.
    #[error("{repo} at {revision} has no config.json, safetensors or GGUF file to read")]
    NothingToRead {
        /// The repository id.
        repo: String,
        /// The revision.
        revision: String,
    },
    /// gpumem's cache could not be written or read.
    #[error("the Hub cache {path}: {why}")]
    Cache {
        /// The file or folder.
        path: String,
        /// What went wrong.
        why: String,
    },
}

impl HubError {
    /// Whether the model does not exist as named: a usage error, like an unknown catalog name.
    pub fn is_missing(&self) -> bool {
        matches!(
            self,
            HubError::NotFound { .. }
                | HubError::BadId { .. }
                | HubError::BadEndpoint { .. }
                | HubError::NoGguf { .. }
                | HubError::NoSuchFile { .. }
                | HubError::NothingToRead { .. }
        )
    }
}
