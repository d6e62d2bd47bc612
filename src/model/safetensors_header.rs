//! safetensors headers: a `.safetensors` file, a directory of shards, or a
//! `model.safetensors.index.json`. Only the JSON header of each file is read (parsed with the
//! `safetensors` crate), never tensor data.

use std::io::Read;
use std::path::{Path, PathBuf};

use safetensors::tensor::Metadata;

use super::error::ModelError;

/// The safetensors crate's own cap on header size.
const MAX_HEADER: u64 = 100_000_000;

/// Most shard files an index may name (the largest published checkpoints have a few hundred).
pub const MAX_SHARDS: usize = 10_000;

/// What the headers of a checkpoint say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SafetensorsSummary {
    /// Every file whose header was read: the single file, or each shard the index names.
    pub files: Vec<PathBuf>,
    /// Tensors over all files.
    pub tensors: u64,
    /// Elements over all tensors.
    pub parameters: u64,
    /// Bytes over all tensors.
    pub bytes: u64,
    /// Bytes per dtype, largest first.
    pub by_dtype: Vec<(String, u64)>,
}

fn format_err(path: &Path, why: impl Into<String>) -> ModelError {
    ModelError::Format {
        path: path.to_path_buf(),
        why: why.into(),
    }
}

/// Reads one file's header and checks it against the file's size.
#[expect(
    clippy::cast_possible_truncation,
    reason = "usize is 64 bits (lib.rs refuses other targets)"
)]
fn read_one(path: &Path, summary: &mut SafetensorsSummary) -> Result<(), ModelError> {
    let (mut file, len) = crate::input::open_regular(path)?;
    let mut n = [0u8; 8];
    file.read_exact(&mut n)
        .map_err(|_| format_err(path, "too short to be a safetensors file"))?;
    let n = u64::from_le_bytes(n);
    if n > MAX_HEADER || n > len.saturating_sub(8) {
        return Err(format_err(
            path,
            format!("header length {n} is larger than the file or the 100 MB limit"),
        ));
    }
    let mut header = vec![0u8; n as usize];
    file.read_exact(&mut header)
        .map_err(|_| format_err(path, "truncated header"))?;
    add_header(path, len, &header, summary)
}

/// Adds one file's JSON `header` (the bytes after its 8-byte length) to `summary`, checking
/// it against the file's size `len`: every tensor's bytes match its shape and dtype, with no
/// gap or overlap, and together they fill the file.
pub(crate) fn add_header(
    path: &Path,
    len: u64,
    header: &[u8],
    summary: &mut SafetensorsSummary,
) -> Result<(), ModelError> {
    let n = header.len() as u64;
    let text = std::str::from_utf8(header).map_err(|_| format_err(path, "header is not UTF-8"))?;
    let metadata: Metadata =
        serde_json::from_str(text).map_err(|e| format_err(path, format!("bad header: {e}")))?;
    let mut infos: Vec<(String, &safetensors::tensor::TensorInfo)> =
        metadata.tensors().into_iter().collect();
    infos.sort_by_key(|(_, i)| i.data_offsets);
    let mut expect = 0usize;
    for (name, info) in &infos {
        let (start, end) = info.data_offsets;
        if start != expect || end < start {
            return Err(format_err(
                path,
                format!("tensor '{name}' offsets {start}..{end} leave a gap or overlap"),
            ));
        }
        let elements = info
            .shape
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d as u64));
        let bits = elements.and_then(|e| e.checked_mul(info.dtype.bitsize() as u64));
        match bits {
            Some(bits) if bits.div_ceil(8) == (end - start) as u64 => {}
            _ => {
                return Err(format_err(
                    path,
                    format!("tensor '{name}' size does not match its shape and dtype"),
                ))
            }
        }
        expect = end;
        summary.tensors += 1;
        summary.parameters += elements.unwrap_or(0);
        summary.bytes += (end - start) as u64;
        let dtype = format!("{:?}", info.dtype);
        match summary.by_dtype.iter_mut().find(|(d, _)| *d == dtype) {
            Some((_, b)) => *b += (end - start) as u64,
            None => summary.by_dtype.push((dtype, (end - start) as u64)),
        }
    }
    if 8 + n + expect as u64 != len {
        return Err(format_err(
            path,
            format!(
                "the header describes {expect} data bytes but the file holds {} (truncated?)",
                len - 8 - n
            ),
        ));
    }
    summary.files.push(path.to_path_buf());
    Ok(())
}

/// Reads a file, a directory of `*.safetensors` shards, or an index JSON.
pub fn read_safetensors(path: &Path) -> Result<SafetensorsSummary, ModelError> {
    let io = |source| ModelError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut summary = SafetensorsSummary::default();
    let meta = std::fs::metadata(path).map_err(io)?;
    let files: Vec<PathBuf> = if meta.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(io)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "safetensors"))
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(format_err(path, "no .safetensors files in this directory"));
        }
        if files.len() > MAX_SHARDS {
            return Err(format_err(
                path,
                format!("holds more than {MAX_SHARDS} .safetensors files"),
            ));
        }
        files
    } else if path.to_string_lossy().ends_with(".json") {
        let text = crate::input::read_bounded(path, 64 << 20, "a safetensors index")?;
        let dir = path.parent().unwrap_or(Path::new("."));
        index_shards(path, &text)?
            .into_keys()
            .map(|name| dir.join(name))
            .collect()
    } else {
        vec![path.to_path_buf()]
    };
    for file in &files {
        read_one(file, &mut summary)?;
    }
    finish(path, summary)
}

/// The shards an index's `weight_map` names, each with how many tensors it holds. A shard
/// named outside the index's folder (`..`, an absolute path) is refused.
pub(crate) fn index_shards(
    path: &Path,
    text: &[u8],
) -> Result<std::collections::BTreeMap<String, u64>, ModelError> {
    let value: serde_json::Value = serde_json::from_slice(text).map_err(|e| ModelError::Json {
        path: path.into(),
        why: e.to_string(),
    })?;
    let map = value
        .get("weight_map")
        .and_then(|m| m.as_object())
        .ok_or_else(|| ModelError::MissingField {
            path: path.into(),
            field: "weight_map".into(),
        })?;
    if map.is_empty() {
        return Err(ModelError::BadField {
            path: path.into(),
            field: "weight_map".into(),
            why: "is empty: the index names no tensors".into(),
        });
    }
    let mut shards = std::collections::BTreeMap::new();
    for (tensor, file) in map {
        let name = file.as_str().ok_or_else(|| ModelError::BadField {
            path: path.into(),
            field: format!("weight_map.{}", super::error::quoted(tensor)),
            why: "is not a file name".into(),
        })?;
        // Shards live beside the index; a path that climbs out is refused.
        if name.is_empty() || name.contains("..") || Path::new(name).is_absolute() {
            return Err(format_err(
                path,
                format!(
                    "shard '{}' is outside the index's directory",
                    super::error::quoted(name)
                ),
            ));
        }
        *shards.entry(name.to_string()).or_insert(0) += 1;
        if shards.len() > MAX_SHARDS {
            return Err(format_err(
                path,
                format!("names more than {MAX_SHARDS} shard files"),
            ));
        }
    }
    Ok(shards)
}

/// The summary once every file is in: refused when it holds no tensors, dtypes largest first.
pub(crate) fn finish(
    path: &Path,
    mut summary: SafetensorsSummary,
) -> Result<SafetensorsSummary, ModelError> {
    if summary.tensors == 0 {
        return Err(format_err(path, "holds no tensors"));
    }
    summary
        .by_dtype
        .sort_by_key(|(d, b)| (std::cmp::Reverse(*b), d.clone()));
    Ok(summary)
}
