//! GGUF header reader (versions 2 and 3): metadata, tensor infos and exact tensor sizes, without
//! touching tensor data. Every count and length is checked against the file size and fixed caps
//! before anything is allocated, so a hostile header cannot make gpumem allocate without bound.

mod arch;
pub(crate) mod quantize_mix;

pub use arch::arch_from_gguf;

use std::collections::BTreeMap;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use super::dtype::{ggml_type, GgmlType};
use super::error::ModelError;

const MAGIC: &[u8; 4] = b"GGUF";
/// More tensors than any real model has (DeepSeek-V3: ~90k with experts unfused).
const MAX_TENSORS: u64 = 1 << 20;
const MAX_KV: u64 = 1 << 20;
/// Longest string kept in memory; longer ones (chat templates can be long) are skipped.
const MAX_KEPT_STRING: u64 = 1 << 16;
/// Longest key or tensor name.
const MAX_NAME: u64 = 1 << 16;
/// Numeric arrays up to this length are kept (per-layer head counts); longer ones are skipped.
const MAX_KEPT_ARRAY: u64 = 1 << 16;
const MAX_DEPTH: u32 = 4;
const MAX_DIMS: u32 = 4;

/// A metadata value, as much of it as gpumem keeps.
#[derive(Debug, Clone, PartialEq)]
pub enum GgufValue {
    /// Any GGUF integer type, widened.
    Int(i128),
    /// `f32` or `f64`, widened.
    Float(f64),
    /// A GGUF `bool`.
    Bool(bool),
    /// A string (or its length, when too long to keep).
    Str(Option<String>),
    /// An array: its length, and its numeric elements when short enough to keep.
    Array {
        /// How many elements the array holds.
        len: u64,
        /// Integer elements, when numeric and kept.
        ints: Vec<i128>,
    },
}

impl GgufValue {
    /// The value as an unsigned integer (a kept array must hold one value throughout).
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            GgufValue::Int(v) => u64::try_from(*v).ok(),
            GgufValue::Array { ints, .. } if !ints.is_empty() => {
                let max = ints.iter().max()?;
                u64::try_from(*max).ok()
            }
            _ => None,
        }
    }
}

/// One tensor's description from the header (its data is never read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GgufTensor {
    /// Name as stored, e.g. `blk.0.attn_q.weight`.
    pub name: String,
    /// Dimensions, innermost first.
    pub dims: Vec<u64>,
    /// Storage type, which fixes the bytes per block.
    pub ggml_type: GgmlType,
    /// Offset in the data section.
    pub offset: u64,
    /// Product of `dims`.
    pub elements: u64,
    /// Bytes the tensor's data occupies in the file, from its type's block size.
    pub bytes: u64,
}

impl GgufTensor {
    /// A tensor of `dims` (innermost first) in `ggml_type` at `offset`, with its elements and
    /// bytes worked out. Refuses a row that is not a whole number of the type's blocks, and
    /// counts that overflow 64 bits, saying which.
    pub fn new(
        name: String,
        dims: Vec<u64>,
        ggml_type: GgmlType,
        offset: u64,
    ) -> Result<GgufTensor, String> {
        let elements = dims
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| format!("tensor '{name}' has too many elements"))?;
        let row = dims.first().copied().unwrap_or(1);
        if row % ggml_type.block_elems != 0 {
            return Err(format!(
                "tensor '{name}': row of {row} is not a multiple of the {} block of {}",
                ggml_type.name, ggml_type.block_elems
            ));
        }
        let bytes = (elements / ggml_type.block_elems)
            .checked_mul(ggml_type.block_bytes)
            .ok_or_else(|| format!("tensor '{name}' is too large"))?;
        Ok(GgufTensor {
            name,
            dims,
            ggml_type,
            offset,
            elements,
            bytes,
        })
    }
}

/// What a GGUF header says.
#[derive(Debug, Clone)]
pub struct GgufFile {
    /// GGUF format version (2 or 3).
    pub version: u32,
    /// Every metadata key and value; arrays keep only their type and length.
    pub metadata: BTreeMap<String, GgufValue>,
    /// Tensor infos in file order, less the multi-token-prediction blocks' ([`Self::mtp`]).
    pub tensors: Vec<GgufTensor>,
    /// The multi-token-prediction blocks' tensors: the last `nextn_predict_layers` blocks,
    /// which llama.cpp's loaders of Qwen3-Next, Qwen3.5, GLM-4.5, DeepSeek and the other MTP
    /// architectures mark `TENSOR_SKIP` unless a draft context asks for them (`load_mtp`): they
    /// are in the file but neither loaded nor counted among `n_layer()`'s layers.
    pub mtp: Vec<GgufTensor>,
    /// Data alignment (`general.alignment`, default 32).
    pub alignment: u64,
    /// Size of the file.
    pub file_size: u64,
}

impl GgufFile {
    /// A header from its parts (`tensors` in file order, `(alignment, file_size)`), with the
    /// multi-token-prediction blocks' tensors set apart as llama.cpp's loader skips them.
    pub fn from_parts(
        version: u32,
        metadata: BTreeMap<String, GgufValue>,
        tensors: Vec<GgufTensor>,
        (alignment, file_size): (u64, u64),
    ) -> Self {
        let mut file = GgufFile {
            version,
            metadata,
            tensors,
            mtp: Vec::new(),
            alignment,
            file_size,
        };
        file.set_mtp_apart();
        file
    }

    /// The `general.architecture` value (`llama`, `qwen2`, …), which prefixes the shape keys.
    pub fn architecture(&self) -> Option<&str> {
        match self.metadata.get("general.architecture") {
            Some(GgufValue::Str(Some(s))) => Some(s),
            _ => None,
        }
    }

    /// An unsigned metadata value.
    pub fn u64(&self, key: &str) -> Option<u64> {
        self.metadata.get(key).and_then(GgufValue::as_u64)
    }

    /// A `bool` metadata value.
    pub fn boolean(&self, key: &str) -> Option<bool> {
        match self.metadata.get(key) {
            Some(GgufValue::Bool(b)) => Some(*b),
            _ => None,
        }
    }

    /// A floating-point metadata value.
    pub fn float(&self, key: &str) -> Option<f64> {
        match self.metadata.get(key) {
            Some(GgufValue::Float(f)) => Some(*f),
            _ => None,
        }
    }

    /// The number of multi-token-prediction blocks at the end of the file's blocks
    /// (`{arch}.nextn_predict_layers`; 0 when none, or when it would leave no other block).
    pub fn mtp_blocks(&self) -> u64 {
        let key = |k: &str| {
            self.architecture()
                .and_then(|a| self.u64(&format!("{a}.{k}")))
        };
        match (key("nextn_predict_layers"), key("block_count")) {
            (Some(n), Some(blocks)) if n < blocks => n,
            _ => 0,
        }
    }

    /// Moves the multi-token-prediction blocks' tensors from `tensors` to `mtp`.
    fn set_mtp_apart(&mut self) {
        let n = self.mtp_blocks();
        if n == 0 {
            return;
        }
        let first = self.u64(&format!(
            "{}.block_count",
            self.architecture().unwrap_or("")
        ));
        let first = first.unwrap_or(0).saturating_sub(n);
        let is_mtp = |t: &GgufTensor| {
            t.name
                .strip_prefix("blk.")
                .and_then(|rest| rest.split('.').next())
                .and_then(|i| i.parse::<u64>().ok())
                .is_some_and(|i| i >= first)
        };
        let (mtp, trunk): (Vec<_>, Vec<_>) = std::mem::take(&mut self.tensors)
            .into_iter()
            .partition(is_mtp);
        self.tensors = trunk;
        self.mtp = mtp;
    }

    /// Total elements over all tensors (the parameter count).
    pub fn parameters(&self) -> u64 {
        self.tensors.iter().map(|t| t.elements).sum()
    }

    /// Sum of every tensor's bytes: the weights as llama.cpp loads them.
    pub fn tensor_bytes(&self) -> u64 {
        self.tensors.iter().map(|t| t.bytes).sum()
    }

    /// Bytes per ggml type, largest first.
    pub fn bytes_by_type(&self) -> Vec<(&'static str, u64)> {
        let mut by: BTreeMap<&'static str, u64> = BTreeMap::new();
        for t in &self.tensors {
            *by.entry(t.ggml_type.name).or_default() += t.bytes;
        }
        let mut v: Vec<_> = by.into_iter().collect();
        v.sort_by_key(|(name, bytes)| (std::cmp::Reverse(*bytes), *name));
        v
    }
}

struct Reader<R: Read> {
    inner: R,
    pos: u64,
    len: u64,
    path: PathBuf,
}

impl<R: Read> Reader<R> {
    fn err(&self, why: impl Into<String>) -> ModelError {
        ModelError::Format {
            path: self.path.clone(),
            why: format!("{} (at byte {})", why.into(), self.pos),
        }
    }

    fn bytes<const N: usize>(&mut self) -> Result<[u8; N], ModelError> {
        let mut buf = [0u8; N];
        self.inner
            .read_exact(&mut buf)
            .map_err(|_| self.err("unexpected end of file"))?;
        self.pos += N as u64;
        Ok(buf)
    }

    fn u8(&mut self) -> Result<u8, ModelError> {
        Ok(self.bytes::<1>()?[0])
    }
    fn u32(&mut self) -> Result<u32, ModelError> {
        Ok(u32::from_le_bytes(self.bytes()?))
    }
    fn u64(&mut self) -> Result<u64, ModelError> {
        Ok(u64::from_le_bytes(self.bytes()?))
    }

    fn remaining(&self) -> u64 {
        self.len.saturating_sub(self.pos)
    }

    fn skip(&mut self, n: u64) -> Result<(), ModelError> {
        if n > self.remaining() {
            return Err(self.err(format!(
                "a length of {n} bytes runs past the end of the file"
            )));
        }
        let copied = std::io::copy(&mut (&mut self.inner).take(n), &mut std::io::sink())
            .map_err(|_| self.err("read failed"))?;
        if copied != n {
            return Err(self.err("unexpected end of file"));
        }
        self.pos += n;
        Ok(())
    }

    /// A string: kept when at most `keep` bytes, else skipped.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "usize is 64 bits (lib.rs refuses other targets)"
    )]
    fn string(&mut self, keep: u64) -> Result<Option<String>, ModelError> {
        let n = self.u64()?;
        if n > self.remaining() {
            return Err(self.err(format!(
                "a string of {n} bytes runs past the end of the file"
            )));
        }
        if n > keep {
            self.skip(n)?;
            return Ok(None);
        }
        let mut buf = vec![0u8; n as usize];
        self.inner
            .read_exact(&mut buf)
            .map_err(|_| self.err("unexpected end of file"))?;
        self.pos += n;
        String::from_utf8(buf)
            .map(Some)
            .map_err(|_| self.err("a string is not UTF-8"))
    }

    fn name(&mut self, what: &str) -> Result<String, ModelError> {
        self.string(MAX_NAME)?
            .ok_or_else(|| self.err(format!("{what} longer than {MAX_NAME} bytes")))
    }

    fn value(&mut self, ty: u32, depth: u32) -> Result<GgufValue, ModelError> {
        Ok(match ty {
            0 => GgufValue::Int(self.u8()?.into()),
            1 => GgufValue::Int((self.u8()? as i8).into()),
            2 => GgufValue::Int(u16::from_le_bytes(self.bytes()?).into()),
            3 => GgufValue::Int(i16::from_le_bytes(self.bytes()?).into()),
            4 => GgufValue::Int(self.u32()?.into()),
            5 => GgufValue::Int(i32::from_le_bytes(self.bytes()?).into()),
            6 => GgufValue::Float(f32::from_le_bytes(self.bytes()?).into()),
            7 => match self.u8()? {
                0 => GgufValue::Bool(false),
                1 => GgufValue::Bool(true),
                b => return Err(self.err(format!("bool value {b}"))),
            },
            8 => GgufValue::Str(self.string(MAX_KEPT_STRING)?),
            9 => {
                if depth >= MAX_DEPTH {
                    return Err(self.err("arrays nested too deeply"));
                }
                let elem = self.u32()?;
                let len = self.u64()?;
                let min_size = match elem {
                    0 | 1 | 7 => 1,
                    2 | 3 => 2,
                    4..=6 => 4,
                    8..=12 => 8,
                    other => return Err(self.err(format!("unknown array element type {other}"))),
                };
                if len
                    .checked_mul(min_size)
                    .is_none_or(|b| b > self.remaining())
                {
                    return Err(self.err(format!(
                        "an array of {len} elements runs past the end of the file"
                    )));
                }
                // Integers, and booleans as 0 and 1 (GLM-5's indexer types).
                let keep = len <= MAX_KEPT_ARRAY && matches!(elem, 0..=5 | 7 | 10 | 11);
                let mut ints = Vec::new();
                for _ in 0..len {
                    match self.value(elem, depth + 1)? {
                        GgufValue::Int(v) if keep => ints.push(v),
                        GgufValue::Bool(b) if keep => ints.push(i128::from(b)),
                        _ => {}
                    }
                }
                GgufValue::Array { len, ints }
            }
            10 => GgufValue::Int(self.u64()?.into()),
            11 => GgufValue::Int(i64::from_le_bytes(self.bytes()?).into()),
            12 => GgufValue::Float(f64::from_le_bytes(self.bytes()?)),
            other => return Err(self.err(format!("unknown metadata value type {other}"))),
        })
    }
}

/// Most shards a split GGUF may have.
pub const MAX_SPLITS: u64 = 10_000;

/// Reads a GGUF header and, when it is one shard of a split model (`split.count` > 1, named
/// `PREFIX-0000k-of-0000N.gguf` as llama.cpp's gguf-split writes them), every other shard's
/// tensors too, so the model's weights are counted whole whichever shard is named.
pub fn read_gguf_model(path: &Path) -> Result<GgufFile, ModelError> {
    let first = read_gguf(path)?;
    let count = first.u64("split.count").unwrap_or(1);
    if count <= 1 {
        return Ok(first);
    }
    let bad = |why: String| ModelError::Format {
        path: path.to_path_buf(),
        why,
    };
    if count > MAX_SPLITS {
        return Err(bad(format!(
            "split.count is {count}, more than {MAX_SPLITS}"
        )));
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let prefix = name
        .strip_suffix(".gguf")
        .and_then(|stem| stem.rsplit_once("-of-"))
        .and_then(|(head, total)| {
            let (prefix, no) = head.rsplit_once('-')?;
            no.parse::<u64>().ok()?;
            (total.parse::<u64>().ok()? == count).then(|| prefix.to_string())
        })
        .ok_or_else(|| {
            bad(format!(
                "a split GGUF (split.count {count}) whose name is not \
                 PREFIX-0000k-of-{count:05}.gguf"
            ))
        })?;
    read_shards(path, &prefix, count)
}

/// Every shard of a `count`-way split named `PREFIX-0000k-of-0000N.gguf` beside `path`, merged.
/// Each shard must be a file of its own (a symlink or hard link to another shard is refused,
/// so one file cannot be counted twice), say its own `split.no`, and add tensors no other
/// shard has; all shards together hold at most [`MAX_TENSORS`] tensors.
fn read_shards(path: &Path, prefix: &str, count: u64) -> Result<GgufFile, ModelError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut seen = std::collections::HashMap::new();
    let mut names = std::collections::HashSet::new();
    let mut model: Option<GgufFile> = None;
    // Shard 1 holds the metadata; every shard holds some tensors.
    for k in 1..=count {
        let shard = dir.join(format!("{prefix}-{k:05}-of-{count:05}.gguf"));
        let bad = |why: String| ModelError::Format {
            path: shard.clone(),
            why,
        };
        if let Some(id) = crate::input::file_id(&shard) {
            if let Some(first) = seen.insert(id, k) {
                return Err(bad(format!(
                    "is the same file as shard {first}; each shard of a split GGUF is a file \
                     of its own"
                )));
            }
        }
        let part = read_gguf(&shard)?;
        add_part(&mut model, &mut names, part, k, count, &shard)?;
    }
    model.ok_or_else(|| ModelError::Format {
        path: path.to_path_buf(),
        why: "no shards".into(),
    })
}

/// Adds shard `k` of a `count`-way split to `model`, checking it says it is that shard and
/// holds tensors no earlier shard has, and that all together hold at most [`MAX_TENSORS`].
pub fn add_part(
    model: &mut Option<GgufFile>,
    names: &mut std::collections::HashSet<String>,
    part: GgufFile,
    k: u64,
    count: u64,
    shard: &Path,
) -> Result<(), ModelError> {
    let bad = |why: String| ModelError::Format {
        path: shard.to_path_buf(),
        why,
    };
    if part.u64("split.count") != Some(count) {
        return Err(bad(format!(
            "is not shard {k} of the same {count}-way split"
        )));
    }
    if part.u64("split.no").is_some_and(|no| no != k - 1) {
        return Err(bad(format!(
            "says it is shard {} (split.no), not shard {k}",
            part.u64("split.no").unwrap_or(0) + 1
        )));
    }
    let total = model.as_ref().map_or(0, |m| m.tensors.len()) + part.tensors.len();
    if total as u64 > MAX_TENSORS {
        return Err(bad(format!(
            "the shards so far hold {total} tensors, more than the {MAX_TENSORS} a split \
             model may have"
        )));
    }
    if let Some(t) = part.tensors.iter().find(|t| !names.insert(t.name.clone())) {
        return Err(bad(format!(
            "tensor '{}' is also in an earlier shard",
            super::error::quoted(&t.name)
        )));
    }
    match model {
        None => *model = Some(part),
        Some(m) => m.tensors.extend(part.tensors),
    }
    Ok(())
}

/// Reads the header of a GGUF file.
pub fn read_gguf(path: &Path) -> Result<GgufFile, ModelError> {
    let (file, len) = crate::input::open_regular(path)?;
    read_gguf_from(BufReader::with_capacity(1 << 16, file), len, path)
}

/// Reads a GGUF header from `inner`, the start of a file of `len` bytes that errors name
/// `path` (a local file, or a remote one read by Range).
#[expect(
    clippy::cast_possible_truncation,
    reason = "usize is 64 bits (lib.rs refuses other targets)"
)]
pub fn read_gguf_from(inner: impl Read, len: u64, path: &Path) -> Result<GgufFile, ModelError> {
    let mut r = Reader {
        inner,
        pos: 0,
        len,
        path: path.to_path_buf(),
    };
    let magic: [u8; 4] = r
        .bytes()
        .map_err(|_| r.err("too short to be a GGUF file"))?;
    if &magic != MAGIC {
        return Err(r.err("not a GGUF file (bad magic)"));
    }
    let version = r.u32()?;
    if !(2..=3).contains(&version) {
        return Err(r.err(format!(
            "GGUF version {version} is not supported (2 and 3 are)"
        )));
    }
    let tensor_count = r.u64()?;
    let kv_count = r.u64()?;
    // A count no real model has is a corrupt header; a sane count that the file is too short
    // to describe (24 bytes a tensor, 13 a metadata entry, at the least) is a truncated file.
    if tensor_count > MAX_TENSORS {
        return Err(r.err(format!("implausible tensor count {tensor_count}")));
    }
    if kv_count > MAX_KV {
        return Err(r.err(format!("implausible metadata count {kv_count}")));
    }
    let least = tensor_count
        .saturating_mul(24)
        .saturating_add(kv_count.saturating_mul(13));
    if least > len {
        return Err(r.err(format!(
            "truncated: {tensor_count} tensors and {kv_count} metadata entries need at least \
             {least} bytes, the file has {len}"
        )));
    }
    let mut metadata = BTreeMap::new();
    for _ in 0..kv_count {
        let key = r.name("a metadata key")?;
        let ty = r.u32()?;
        let value = r.value(ty, 0)?;
        metadata.insert(key, value);
    }
    let alignment = match metadata.get("general.alignment") {
        None => 32,
        Some(v) => match v.as_u64() {
            Some(a) if a > 0 && a.is_power_of_two() && a <= 1 << 20 => a,
            _ => return Err(r.err(format!("general.alignment {v:?} is not a power of two"))),
        },
    };
    let mut tensors = Vec::with_capacity(tensor_count as usize);
    for _ in 0..tensor_count {
        let name = r.name("a tensor name")?;
        let n_dims = r.u32()?;
        if n_dims == 0 || n_dims > MAX_DIMS {
            return Err(r.err(format!("tensor '{name}' has {n_dims} dimensions")));
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for _ in 0..n_dims {
            dims.push(r.u64()?);
        }
        let type_id = r.u32()?;
        let ggml_type = ggml_type(type_id)
            .ok_or_else(|| r.err(format!("tensor '{name}' has unknown ggml type {type_id}")))?;
        let offset = r.u64()?;
        let tensor = GgufTensor::new(name, dims, ggml_type, offset).map_err(|why| r.err(why))?;
        if offset % alignment != 0 {
            return Err(r.err(format!(
                "tensor '{}' offset {offset} is not aligned to {alignment}",
                tensor.name
            )));
        }
        tensors.push(tensor);
    }
    // The data section starts at the next alignment boundary; every tensor must lie inside the
    // file, or the file is truncated.
    let data_start = r.pos.div_ceil(alignment) * alignment;
    for t in &tensors {
        let end = data_start
            .checked_add(t.offset)
            .and_then(|s| s.checked_add(t.bytes));
        if end.is_none_or(|e| e > len) {
            return Err(r.err(format!(
                "tensor '{}' lies past the end of the file (truncated?)",
                t.name
            )));
        }
    }
    Ok(GgufFile::from_parts(
        version,
        metadata,
        tensors,
        (alignment, len),
    ))
}
