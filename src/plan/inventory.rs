//! Devices to plan over: this machine's discovery, or saved `gpumem discover --json` documents.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use thiserror::Error;

use super::Candidate;
use crate::backend::{BackendInfo, BackendKind, HostInfo};

/// Why an inventory file was refused.
#[derive(Debug, Error)]
pub enum InventoryError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The inventory file as given.
        path: PathBuf,
        /// Why the operating system refused to read it.
        source: std::io::Error,
    },
    /// The path is not a readable regular file, or is too large.
    #[error(transparent)]
    Input(#[from] crate::input::InputError),
    /// The file is not a discover document; names the field.
    #[error("{path}: {why}")]
    Invalid {
        /// The inventory file as given.
        path: PathBuf,
        /// What is wrong, with the field's path.
        why: String,
    },
}

#[derive(Debug, Deserialize)]
struct Inventory {
    schema_version: u32,
    host: Option<HostInfo>,
    backends: Vec<BackendInfo>,
}

/// Candidates from probe results: every available device but NVML's (CUDA rows cover them).
pub fn candidates_from_discovery(backends: &[BackendInfo], host: &str) -> Vec<Candidate> {
    backends
        .iter()
        .filter(|b| b.available && b.backend != BackendKind::Nvml)
        .flat_map(|b| {
            b.devices.iter().map(move |d| Candidate {
                host: host.to_string(),
                backend: b.backend,
                device: d.index,
                name: d.name.clone(),
                device_type: d.device_type,
                total_bytes: d.total_bytes,
                free_bytes: d.free_bytes,
                simulated: false,
            })
        })
        .collect()
}

/// The largest inventory read: far above any real fleet's `discover` document.
const MAX_INVENTORY_BYTES: u64 = 64 << 20;

/// Reads one saved `gpumem discover --json` document.
pub fn read_inventory(path: &Path) -> Result<Vec<Candidate>, InventoryError> {
    let invalid = |why: String| InventoryError::Invalid {
        path: path.to_path_buf(),
        why,
    };
    let text = crate::input::read_bounded(path, MAX_INVENTORY_BYTES, "an inventory")?;
    let mut de = serde_json::Deserializer::from_slice(&text);
    let doc: Inventory = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let field = e.path().to_string();
        let inner = e.into_inner();
        if field.is_empty() || field == "." {
            invalid(format!("not a gpumem discover document: {inner}"))
        } else {
            invalid(format!("field '{field}': {inner}"))
        }
    })?;
    // One document per file: a second document, JSON lines or trailing bytes are refused.
    de.end()
        .map_err(|e| invalid(format!("trailing data after the document: {e}")))?;
    if doc.schema_version != 1 {
        return Err(invalid(format!(
            "field 'schema_version': {} is not supported (1 is)",
            doc.schema_version
        )));
    }
    let host = doc.host.and_then(|h| h.hostname).unwrap_or_else(|| {
        path.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    Ok(candidates_from_discovery(&doc.backends, &host))
}
