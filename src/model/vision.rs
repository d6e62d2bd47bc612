//! A multimodal projector's vision tower as llama.cpp's clip loader reads it from the mmproj
//! GGUF (`clip.vision.*` keys, `clip.projector_type`, and which tensors are present): what an
//! engine needs to size the graph that encodes one image, apart from any engine.

use super::gguf::{GgufFile, GgufValue};

/// The projector types whose encoding graph gpumem knows (`clip.projector_type`, parsed once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProjectorKind {
    /// Gemma 3's: a SigLIP tower, its patches average-pooled `merge` × `merge`, an RMS norm,
    /// then a projection to the text model's width.
    Gemma3,
    /// Another type, by the name the file gives it: its weights count, its graph is not known.
    Other(String),
}

impl ProjectorKind {
    fn parse(name: &str) -> ProjectorKind {
        match name {
            "gemma3" => ProjectorKind::Gemma3,
            other => ProjectorKind::Other(other.to_string()),
        }
    }

    /// The name the file gives it.
    pub fn name(&self) -> &str {
        match self {
            ProjectorKind::Gemma3 => "gemma3",
            ProjectorKind::Other(n) => n,
        }
    }
}

/// A ViT's shape and the tensors that change its graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VisionTower {
    /// `clip.projector_type` (or `clip.vision.projector_type` in a mixed-modality file).
    pub kind: ProjectorKind,
    /// The square image the encoder reserves its graph for (`image_size`: clip's warm-up size
    /// for the fixed-resolution towers).
    pub image_size: u64,
    /// Pixels a patch's side.
    pub patch_size: u64,
    /// The tower's width.
    pub hidden: u64,
    /// Its MLP's width.
    pub ffn: u64,
    /// Its layers.
    pub layers: u64,
    /// Its attention heads.
    pub heads: u64,
    /// The text model's width the projector maps to.
    pub projection_dim: u64,
    /// Gemma 3's pooling kernel (`clip.vision.projector.scale_factor`, 4 by default).
    pub merge: u64,
    /// The patch embedding is stored in bf16: its im2col is f32 then, f16 otherwise.
    pub patch_bf16: bool,
    /// Bytes an element of the input projection (Gemma 3 transposes a copy of it per image).
    pub input_projection_elem_bytes: u64,
}

/// The vision tower a clip GGUF describes; `None` without a vision encoder (an audio-only
/// projector) or without the keys a tower needs.
pub(crate) fn vision_tower(file: &GgufFile) -> Option<VisionTower> {
    if file.boolean("clip.has_vision_encoder") == Some(false) {
        return None;
    }
    let string = |k: &str| match file.metadata.get(k) {
        Some(GgufValue::Str(Some(s))) => Some(s.as_str()),
        _ => None,
    };
    let kind = string("clip.vision.projector_type").or_else(|| string("clip.projector_type"))?;
    let key = |k: &str| file.u64(&format!("clip.vision.{k}"));
    let tensor = |n: &str| file.tensors.iter().find(|t| t.name == n);
    let projection = tensor("mm.input_projection.weight");
    Some(VisionTower {
        kind: ProjectorKind::parse(kind),
        image_size: key("image_size")?,
        patch_size: key("patch_size").filter(|&p| p > 0)?,
        hidden: key("embedding_length")?,
        ffn: key("feed_forward_length")?,
        layers: key("block_count")?,
        heads: key("attention.head_count").filter(|&h| h > 0)?,
        projection_dim: key("projection_dim").unwrap_or(0),
        merge: key("projector.scale_factor").unwrap_or(4),
        patch_bf16: tensor("v.patch_embd.weight")
            .is_some_and(|t| t.ggml_type.name.eq_ignore_ascii_case("bf16")),
        input_projection_elem_bytes: projection
            .map_or(2, |t| t.bytes.checked_div(t.elements).unwrap_or(2).max(1)),
    })
}
