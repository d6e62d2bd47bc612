//! Typed errors of model sources.

use std::path::PathBuf;

use thiserror::Error;

/// Why a model could not be read.
#[derive(Debug, Error)]
pub enum ModelError {
    /// The name is not in the catalog.
    #[error("unknown model '{0}'; `gpumem estimate --list-models` lists the catalog")]
    UnknownModel(String),
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not valid JSON.
    #[error("{path}: not valid JSON: {why}")]
    Json {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        why: String,
    },
    /// A required field is absent.
    #[error("{path}: missing field '{field}'")]
    MissingField {
        /// The file.
        path: PathBuf,
        /// The field.
        field: String,
    },
    /// A field has the wrong type or an impossible value.
    #[error("{path}: field '{field}' {why}")]
    BadField {
        /// The file.
        path: PathBuf,
        /// The field.
        field: String,
        /// What is wrong.
        why: String,
    },
    /// A malformed GGUF or safetensors file.
    #[error("{path}: {why}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// The path is not a readable regular file, or is too large.
    #[error(transparent)]
    Input(#[from] crate::input::InputError),
    /// A precision name that is not known.
    #[error("unknown {what} '{name}'; expected one of {expected}")]
    UnknownPrecision {
        /// Which flag.
        what: &'static str,
        /// The name.
        name: String,
        /// Accepted names.
        expected: String,
    },
}
