//! A LoRA adapter GGUF (llama.cpp's `--lora FILE`: `general.type` `adapter`, `adapter.type`
//! `lora`): which matrices of the base model it adapts and its tensors' bytes. llama.cpp loads
//! each pair beside the matrix it adapts, into that matrix's buffer type, so the adapter's
//! memory follows the base model's placement (see `LayerWeights::with_adapter`).

use std::path::{Path, PathBuf};

use super::error::quoted;
use super::gguf::{self, GgufFile, GgufValue};
use super::{LayerWeights, ModelError};

/// One adapted matrix: the base tensor's name and the bytes of its two factors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoraPair {
    /// The base model's tensor (`blk.0.attn_q.weight`).
    pub base: String,
    /// `<base>.lora_a`'s bytes (ne = [in, rank]).
    pub a_bytes: u64,
    /// `<base>.lora_b`'s bytes (ne = [rank, out]).
    pub b_bytes: u64,
    /// The rank: `lora_a`'s outer dimension.
    pub rank: u64,
}

/// A LoRA adapter as llama.cpp reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct LoraAdapter {
    /// The file read.
    pub path: PathBuf,
    /// `general.architecture`: llama.cpp refuses an adapter of another architecture than the
    /// model's.
    pub architecture: String,
    /// `adapter.lora.alpha` (0 where absent: the scale is then 1).
    pub alpha: f64,
    /// The adapted matrices, by base name.
    pub pairs: Vec<LoraPair>,
}

impl LoraAdapter {
    /// All the adapter's tensor bytes, as stored.
    pub fn bytes(&self) -> u64 {
        self.pairs.iter().fold(0u64, |t, p| {
            t.saturating_add(p.a_bytes).saturating_add(p.b_bytes)
        })
    }

    /// Refuses an adapter for another model, as llama.cpp does on loading it: a factor whose
    /// matrix the model's GGUF does not hold. A model counted from its shape (no tensors read)
    /// is taken as it is.
    pub fn check_against(&self, weights: Option<&LayerWeights>) -> Result<(), ModelError> {
        let Some(w) = weights.filter(|w| !w.tensors.is_empty()) else {
            return Ok(());
        };
        match self.pairs.iter().find(|p| !w.tensors.contains_key(&p.base)) {
            Some(p) => Err(ModelError::BadField {
                path: self.path.clone(),
                field: "tensors".into(),
                why: format!(
                    "adapts '{}', which the model does not have: an adapter for another model",
                    quoted(&p.base)
                ),
            }),
            None => Ok(()),
        }
    }

    /// The largest rank among its pairs.
    pub fn rank(&self) -> u64 {
        self.pairs.iter().map(|p| p.rank).max().unwrap_or(0)
    }
}

/// Reads a LoRA adapter GGUF's header.
pub fn read_lora(path: &Path) -> Result<LoraAdapter, ModelError> {
    lora_of(path, &gguf::read_gguf(path)?)
}

/// The adapter `file` describes, refused as llama.cpp refuses it: not an adapter, an adapter of
/// another kind (a control vector), a tensor that is not a `.lora_a`/`.lora_b` factor (norm
/// vectors, which llama.cpp skips, aside), or a factor without its pair.
pub(crate) fn lora_of(path: &Path, file: &GgufFile) -> Result<LoraAdapter, ModelError> {
    let bad = |field: &str, why: String| ModelError::BadField {
        path: path.into(),
        field: field.into(),
        why,
    };
    let string = |key: &str| match file.metadata.get(key) {
        Some(GgufValue::Str(Some(s))) => Some(s.as_str()),
        _ => None,
    };
    let shown = |v: Option<&str>| v.map_or("missing".to_string(), |s| format!("'{}'", quoted(s)));
    let general = string("general.type");
    if general != Some("adapter") {
        return Err(bad(
            "general.type",
            format!(
                "is {}, not 'adapter': not a LoRA adapter GGUF",
                shown(general)
            ),
        ));
    }
    let kind = string("adapter.type");
    if !matches!(kind, Some("lora" | "alora")) {
        return Err(bad(
            "adapter.type",
            format!(
                "is {}, not 'lora': llama.cpp's --lora loads LoRA adapters",
                shown(kind)
            ),
        ));
    }
    let architecture = file.architecture().unwrap_or_default().to_string();
    let mut pairs: std::collections::BTreeMap<&str, (Option<u64>, Option<u64>, u64)> =
        std::collections::BTreeMap::new();
    for t in &file.tensors {
        if let Some(base) = t.name.strip_suffix(".lora_a") {
            let e = pairs.entry(base).or_default();
            e.0 = Some(t.bytes);
            e.2 = t.dims.get(1).copied().unwrap_or(0);
        } else if let Some(base) = t.name.strip_suffix(".lora_b") {
            pairs.entry(base).or_default().1 = Some(t.bytes);
        } else if !t.name.ends_with("_norm.weight") {
            return Err(bad(
                "tensors",
                format!(
                    "'{}' is neither a .lora_a nor a .lora_b factor",
                    quoted(&t.name)
                ),
            ));
        }
    }
    let pairs = pairs
        .into_iter()
        .map(|(base, (a, b, rank))| match (a, b) {
            (Some(a_bytes), Some(b_bytes)) => Ok(LoraPair {
                base: base.to_string(),
                a_bytes,
                b_bytes,
                rank,
            }),
            _ => Err(bad(
                "tensors",
                format!("'{}' has one of its two LoRA factors only", quoted(base)),
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(LoraAdapter {
        path: path.to_path_buf(),
        architecture,
        alpha: file.float("adapter.lora.alpha").unwrap_or(0.0),
        pairs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::gguf::GgufTensor;
    use crate::model::{ggml_type, LayerWeights};
    use std::collections::BTreeMap;

    fn adapter_file(kind: &str, names: &[&str]) -> GgufFile {
        let mut metadata = BTreeMap::new();
        let s = |v: &str| GgufValue::Str(Some(v.to_string()));
        metadata.insert("general.type".to_string(), s(kind));
        metadata.insert("general.architecture".to_string(), s("llama"));
        metadata.insert("adapter.type".to_string(), s("lora"));
        metadata.insert("adapter.lora.alpha".to_string(), GgufValue::Float(32.0));
        let f16 = ggml_type(1).unwrap();
        let tensors = names
            .iter()
            .map(|n| {
                let dims = if n.ends_with("lora_a") {
                    vec![64, 8]
                } else {
                    vec![8, 96]
                };
                GgufTensor::new((*n).to_string(), dims, f16, 0).unwrap()
            })
            .collect();
        GgufFile::from_parts(3, metadata, tensors, (32, 0))
    }

    // Pairs by base name, the rank from lora_a's outer dimension, norms skipped as llama.cpp
    // skips them.
    #[test]
    fn pairs_factors_by_their_base_matrix() {
        let file = adapter_file(
            "adapter",
            &[
                "blk.0.attn_q.weight.lora_a",
                "blk.0.attn_q.weight.lora_b",
                "blk.1.ffn_up.weight.lora_b",
                "blk.1.ffn_up.weight.lora_a",
                "blk.1.attn_norm.weight",
            ],
        );
        let a = lora_of(Path::new("a.gguf"), &file).unwrap();
        assert_eq!(a.pairs.len(), 2);
        assert_eq!(a.pairs[0].base, "blk.0.attn_q.weight");
        assert_eq!(
            (a.pairs[0].a_bytes, a.pairs[0].b_bytes, a.rank()),
            (1024, 1536, 8)
        );
        assert_eq!(a.bytes(), 2 * (1024 + 1536));
        assert_eq!((a.architecture.as_str(), a.alpha), ("llama", 32.0));
    }

    // What llama.cpp refuses is refused, naming the field.
    #[test]
    fn refuses_what_llama_cpp_refuses() {
        let model = adapter_file("model", &[]);
        let e = lora_of(Path::new("m.gguf"), &model)
            .unwrap_err()
            .to_string();
        assert!(e.contains("general.type") && e.contains("'model'"), "{e}");
        let half = adapter_file("adapter", &["blk.0.attn_q.weight.lora_a"]);
        let e = lora_of(Path::new("h.gguf"), &half).unwrap_err().to_string();
        assert!(e.contains("one of its two LoRA factors"), "{e}");
        let odd = adapter_file("adapter", &["blk.0.attn_q.weight"]);
        let e = lora_of(Path::new("o.gguf"), &odd).unwrap_err().to_string();
        assert!(e.contains("neither a .lora_a nor a .lora_b"), "{e}");
    }

    // The factors join the layer, and the feed-forward part, of the matrix they adapt.
    #[test]
    fn factors_follow_their_base_matrix() {
        let file = adapter_file(
            "adapter",
            &[
                "blk.1.ffn_up.weight.lora_a",
                "blk.1.ffn_up.weight.lora_b",
                "output.weight.lora_a",
                "output.weight.lora_b",
            ],
        );
        let a = lora_of(Path::new("a.gguf"), &file).unwrap();
        let base = LayerWeights::of(&adapter_file("adapter", &[]), 2, 32);
        let w = base.with_adapter(&a);
        assert_eq!(w.layers, vec![0, 1024 + 1536]);
        assert_eq!(w.ffn[1].up, 1024 + 1536);
        assert_eq!(w.output, 1024 + 1536);
        assert_eq!(w.tensors.len(), 4);
    }
}
