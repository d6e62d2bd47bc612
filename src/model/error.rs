//! Typed errors of model sources.

use std::path::PathBuf;

use thiserror::Error;

/// Where a store name (`ORG/NAME`, `ollama:NAME`) was looked for, when it was not found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotFound {
    /// The name as given.
    pub name: String,
    /// Every path that was tried.
    pub looked_in: Vec<PathBuf>,
}

/// Why a model could not be read.
#[derive(Debug, Error)]
pub enum ModelError {
    /// A config.json `model_type` gpumem has no rules for, refused without `--allow-generic`.
    #[error(
        "{model}: model_type '{model_type}' has no shape rules in gpumem (its attention, \
         feed-forward and cache layout are unknown); --allow-generic estimates it with the \
         generic decoder formula from {fields}"
    )]
    UnknownArchitecture {
        /// The model's name.
        model: String,
        /// The `model_type` the file declares.
        model_type: String,
        /// The config fields the generic formula would read, comma-separated.
        fields: String,
    },
    /// The name is not in the catalog (`suggestion`: the closest catalog name, if near).
    #[error("unknown model '{name}'{}; `gpumem estimate --list-models` lists the catalog (ORG/NAME reads the Hugging Face cache, then the Hub; ollama:NAME[:TAG] Ollama's store)", suggestion.map(|s| format!(" (did you mean '{s}'?)")).unwrap_or_default())]
    UnknownModel {
        /// The name given.
        name: String,
        /// The closest catalog name.
        suggestion: Option<&'static str>,
    },
    /// `--model` was given a file or directory rather than a name.
    #[error("'{0}' is a path, not a model name: give a file with --gguf FILE, --config config.json or --safetensors PATH")]
    PathNotName(String),
    /// An `ORG/NAME` or `ollama:NAME` model that is not in the local store.
    #[error("model '{}' is not in the local store (looked in {}); gpumem reads models offline and downloads nothing", .0.name, if .0.looked_in.is_empty() { "no store: HOME is not set".to_string() } else { .0.looked_in.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ") })]
    NotInStore(NotFound),
    /// An `ollama:` name that no store entry can have (a character outside letters, digits and
    /// `-_.`, too many `/` parts, an empty part).
    #[error("'{name}' is not an Ollama model name: {why}")]
    BadStoreName {
        /// The name as given.
        name: String,
        /// What about it is wrong.
        why: String,
    },
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file as given.
        path: PathBuf,
        /// Why the operating system refused to read it.
        source: std::io::Error,
    },
    /// The file is not valid JSON.
    #[error("{path}: not valid JSON: {why}")]
    Json {
        /// The file as given.
        path: PathBuf,
        /// serde_json's message, with line and column.
        why: String,
    },
    /// A required field is absent.
    #[error("{path}: missing field '{field}'")]
    MissingField {
        /// The file as given.
        path: PathBuf,
        /// The missing key, e.g. `num_attention_heads`.
        field: String,
    },
    /// A field has the wrong type or an impossible value.
    #[error("{path}: field '{field}' {why}")]
    BadField {
        /// The file as given.
        path: PathBuf,
        /// The offending key.
        field: String,
        /// What about its value is wrong, e.g. "must be at least 1".
        why: String,
    },
    /// A malformed GGUF or safetensors file.
    #[error("{path}: {why}")]
    Format {
        /// The file as given.
        path: PathBuf,
        /// What is wrong, with the byte offset where it helps.
        why: String,
    },
    /// A model named by its Hub id could not be read from the Hub.
    #[error(transparent)]
    Hub(#[from] crate::hub::HubError),
    /// The path is not a readable regular file, or is too large.
    #[error(transparent)]
    Input(#[from] crate::input::InputError),
    /// A precision name that is not known.
    #[error("unknown {what} '{name}'; expected one of {expected}")]
    UnknownPrecision {
        /// The flag that named it (`--model`, `--dtype`).
        what: &'static str,
        /// The name as given.
        name: String,
        /// The names that would have been accepted, comma-separated.
        expected: String,
    },
}

/// Longest value from a file echoed in a message; real `model_type`s are under 32 characters.
const MAX_ECHOED_CHARS: usize = 64;

/// `text` as a message quotes it: at most [`MAX_ECHOED_CHARS`] characters, the rest named by
/// its length, so a hostile file cannot make one error line megabytes long.
pub(crate) fn quoted(text: &str) -> String {
    match text.char_indices().nth(MAX_ECHOED_CHARS) {
        None => text.to_string(),
        Some((cut, _)) => format!("{}… ({} characters)", &text[..cut], text.chars().count()),
    }
}
