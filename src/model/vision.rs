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
    /// Gemma 4's (`gemma4v`): a ViT of RMS norms with per-head q/k norms, 2-D RoPE, norms after
    /// attention and the gated MLP and clamped products, average-pooled `merge` × `merge`.
    Gemma4V,
    /// Qwen2-VL's (`qwen2vl_merger`): Qwen2.5-VL's graph with LayerNorms, a GELU MLP and no
    /// windows.
    Qwen2Vl,
    /// Qwen2.5-VL's (`qwen2.5vl_merger`): a tower of dynamic resolution over both patch
    /// kernels of its temporal pair, RMS-normed layers with M-RoPE and SwiGLU, attention within
    /// windows but in every `window_pattern`-th layer, then a merger of `merge` × `merge`
    /// patches.
    Qwen25Vl,
    /// Qwen3-VL's (`qwen3vl_merger`, which Qwen3.5's towers share): a tower of dynamic
    /// resolution with learned positions interpolated to the image, LayerNormed layers of a fused
    /// qkv with M-RoPE and a GELU MLP, the merger, and a deepstack merger after each of the
    /// `deepstack` layers.
    Qwen3Vl,
    /// Another type, by the name the file gives it: its weights count, its graph is not known.
    Other(String),
}

impl ProjectorKind {
    fn parse(name: &str) -> ProjectorKind {
        match name {
            "gemma3" => ProjectorKind::Gemma3,
            "gemma4v" => ProjectorKind::Gemma4V,
            "qwen2vl_merger" => ProjectorKind::Qwen2Vl,
            "qwen2.5vl_merger" => ProjectorKind::Qwen25Vl,
            "qwen3vl_merger" => ProjectorKind::Qwen3Vl,
            other => ProjectorKind::Other(other.to_string()),
        }
    }

    /// The name the file gives it.
    pub fn name(&self) -> &str {
        match self {
            ProjectorKind::Gemma3 => "gemma3",
            ProjectorKind::Gemma4V => "gemma4v",
            ProjectorKind::Qwen2Vl => "qwen2vl_merger",
            ProjectorKind::Qwen25Vl => "qwen2.5vl_merger",
            ProjectorKind::Qwen3Vl => "qwen3vl_merger",
            ProjectorKind::Other(n) => n,
        }
    }
}

/// A ViT's shape and the tensors that change its graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VisionTower {
    /// `clip.projector_type` (or `clip.vision.projector_type` in a mixed-modality file).
    pub kind: ProjectorKind,
    /// The square image the encoder reserves its graph for at warm-up: `image_size` for the
    /// fixed-resolution towers; for Qwen's, whose images vary, clip's warm-up image of 46 × 46
    /// merged patches (`set_warmup_n_tokens(46*46)`, whatever the file's pixel limits; the
    /// largest image is [`VisionTower::largest_image`]).
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
    /// Patches merged a side into one token: Gemma 3's pooling kernel
    /// (`clip.vision.projector.scale_factor`, 4 by default), Qwen's merger
    /// (`clip.vision.spatial_merge_size`, 2 by default).
    pub merge: u64,
    /// Qwen2.5-VL: every this many layers, one attends over the whole image, the others within
    /// windows (`clip.vision.n_wa_pattern`); 0 where every layer attends over the whole image.
    pub window_pattern: u64,
    /// Rows of the learned position table (`v.position_embd.weight`), 0 without one: clip
    /// interpolates it when the image's patches a side differ from its.
    pub positions: u64,
    /// Qwen3-VL: the layers whose output a deepstack merger reads (`v.deepstack.N.fc1` present).
    pub deepstack: Vec<u64>,
    /// The patch embedding is stored in bf16: its im2col is f32 then, f16 otherwise.
    pub patch_bf16: bool,
    /// Bytes an element of the input projection (Gemma 3 transposes a copy of it per image).
    pub input_projection_elem_bytes: u64,
}

/// Merged tokens a side of the image clip warms a Qwen tower up with (its reserve's size).
const WARMUP_SIDE_TOKENS: u64 = 46;

impl ProjectorKind {
    /// The most tokens clip lets an image take in a tower of dynamic resolution
    /// (`set_limit_image_tokens`: Qwen's 4096, Gemma 4's 1120), unless llama-server's
    /// `--image-max-tokens` says otherwise; `None` for a tower that encodes every image at its
    /// own size.
    pub fn image_max_tokens(&self) -> Option<u64> {
        match self {
            ProjectorKind::Qwen2Vl | ProjectorKind::Qwen25Vl | ProjectorKind::Qwen3Vl => Some(4096),
            ProjectorKind::Gemma4V => Some(1120),
            ProjectorKind::Gemma3 | ProjectorKind::Other(_) => None,
        }
    }
}

impl ProjectorKind {
    /// The fewest tokens clip lets an image take (`set_limit_image_tokens`' minimum): an
    /// `--image-max-tokens` under it leaves `image_max_pixels` under `image_min_pixels`, and
    /// clip refuses to load the projector.
    pub fn image_min_tokens(&self) -> Option<u64> {
        match self {
            ProjectorKind::Qwen2Vl | ProjectorKind::Qwen25Vl | ProjectorKind::Qwen3Vl => Some(8),
            ProjectorKind::Gemma4V => Some(70),
            ProjectorKind::Gemma3 | ProjectorKind::Other(_) => None,
        }
    }
}

impl VisionTower {
    /// The tower as it encodes the largest image it accepts, for a tower of dynamic resolution;
    /// `None` for one that encodes every image at its own size. clip's resize
    /// (`calc_size_preserved_ratio`) brings any square image past the pixel limit of
    /// `max_tokens × align²` (align: a merged patch's side) to `floor(√max_tokens) × align`
    /// pixels a side, the square clip itself names as its largest (`set_limit_image_tokens`'
    /// `warmup_image_size`).
    pub fn largest_image(&self, max_tokens: Option<u64>) -> Option<VisionTower> {
        let tokens = max_tokens.unwrap_or(self.kind.image_max_tokens()?);
        let align = self.patch_size.checked_mul(self.merge)?;
        let image_size = tokens.isqrt().checked_mul(align)?.max(align);
        Some(VisionTower {
            image_size,
            ..self.clone()
        })
    }
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
    let kind = ProjectorKind::parse(kind);
    let patch_size = key("patch_size").filter(|&p| p > 0)?;
    let ffn_key = key("feed_forward_length")?;
    let (merge, image_size, ffn) = match kind {
        ProjectorKind::Qwen2Vl | ProjectorKind::Qwen25Vl | ProjectorKind::Qwen3Vl => {
            let merge = key("spatial_merge_size").unwrap_or(2);
            // The graph's MLP is its tensors' width: Qwen2-VL's converter writes the text
            // model's width as `feed_forward_length`.
            let ffn = tensor("v.blk.0.ffn_up.weight")
                .and_then(|t| t.dims.get(1).copied())
                .unwrap_or(ffn_key);
            (merge, WARMUP_SIDE_TOKENS * patch_size * merge, ffn)
        }
        ProjectorKind::Gemma4V => {
            // clip warms Gemma 4 up with 16 × 16 pooled tokens (`set_warmup_n_tokens(256)`).
            let merge = key("projector.scale_factor").unwrap_or(3);
            (merge, 16 * patch_size * merge, ffn_key)
        }
        _ => (
            key("projector.scale_factor").unwrap_or(4),
            key("image_size")?,
            ffn_key,
        ),
    };
    let layers = key("block_count")?;
    let deepstack = (0..layers)
        .filter(|i| tensor(&format!("v.deepstack.{i}.fc1.weight")).is_some())
        .collect();
    let positions = tensor("v.position_embd.weight")
        .and_then(|t| t.dims.get(1).copied())
        .unwrap_or(0);
    Some(VisionTower {
        kind,
        image_size,
        patch_size,
        hidden: key("embedding_length")?,
        ffn,
        layers,
        heads: key("attention.head_count").filter(|&h| h > 0)?,
        projection_dim: key("projection_dim").unwrap_or(0),
        merge,
        window_pattern: key("n_wa_pattern").unwrap_or(0),
        positions,
        deepstack,
        patch_bf16: tensor("v.patch_embd.weight")
            .is_some_and(|t| t.ggml_type.name.eq_ignore_ascii_case("bf16")),
        input_projection_elem_bytes: projection
            .map_or(2, |t| t.bytes.checked_div(t.elements).unwrap_or(2).max(1)),
    })
}
