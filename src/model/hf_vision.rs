//! A multimodal config.json's vision tower and projector (`vision_config` beside the language
//! model), as the serving engines build them from it. Every architecture gpumem models is a row
//! of [`TOWERS`]: which config class it is, which keys give its shape, and how its processor
//! sizes the largest image by default. A config with a `vision_config` of any other class is
//! [`HfVision::Unmodelled`], which an engine refuses by name rather than estimate.

use serde::Serialize;
use serde_json::{Map, Value};

/// The vision towers gpumem models, each as vLLM 0.33's model file builds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TowerKind {
    /// Qwen2-VL (`qwen2_vl.py`): a ViT of LayerNorms and a plain QuickGELU MLP over
    /// `temporal_patch_size` × `patch_size`² patches, 2×2 patches merged into a token.
    Qwen2Vl,
    /// Qwen2.5-VL (`qwen2_5_vl.py`): Qwen2-VL's patches and merger, RMSNorms and a gated
    /// SiLU MLP, windowed attention in most blocks.
    Qwen25Vl,
    /// Gemma 3 (`gemma3_mm.py`, `siglip.py`): a SigLIP tower at a fixed square image, its
    /// patches average-pooled into `mm_tokens_per_image` tokens, an RMS norm and a projection.
    Gemma3,
    /// Qwen3-VL (`qwen3_vl.py`; Qwen3-VL-MoE and Qwen3.5 build the same
    /// `Qwen3_VisionTransformer`): 16-pixel patches with learned position embeddings,
    /// LayerNorms and a plain biased MLP, 2×2 patches merged into a token, and "deepstack"
    /// mergers whose outputs ride beside the main merger's (one text width each).
    Qwen3Vl,
}

impl TowerKind {
    /// Its MLP is gated (gate and up projections): the activations hold three widths.
    pub fn gated(self) -> bool {
        matches!(self, TowerKind::Qwen25Vl)
    }

    /// It takes videos as well as images (a video's frames pass the same tower).
    pub fn takes_video(self) -> bool {
        matches!(
            self,
            TowerKind::Qwen2Vl | TowerKind::Qwen25Vl | TowerKind::Qwen3Vl
        )
    }
}

/// Reads a tower's shape from its `vision_config` and the config's top level.
type ReadShape = fn(&Map<String, Value>, &Map<String, Value>) -> Option<VisionShape>;

/// One row of the table: the top-level `model_type` and how its `vision_config` reads.
struct Row {
    model_type: &'static str,
    kind: TowerKind,
    read: ReadShape,
}

/// The architectures gpumem models, by the `model_type` of the multimodal config.
const TOWERS: &[Row] = &[
    Row {
        model_type: "qwen2_vl",
        kind: TowerKind::Qwen2Vl,
        read: qwen2_vl,
    },
    Row {
        model_type: "qwen2_5_vl",
        kind: TowerKind::Qwen25Vl,
        read: qwen2_5_vl,
    },
    Row {
        model_type: "gemma3",
        kind: TowerKind::Gemma3,
        read: gemma3,
    },
    Row {
        model_type: "qwen3_vl",
        kind: TowerKind::Qwen3Vl,
        read: qwen3_vl,
    },
    Row {
        model_type: "qwen3_vl_moe",
        kind: TowerKind::Qwen3Vl,
        read: qwen3_vl,
    },
    Row {
        model_type: "qwen3_5",
        kind: TowerKind::Qwen3Vl,
        read: qwen3_vl,
    },
    Row {
        model_type: "qwen3_5_moe",
        kind: TowerKind::Qwen3Vl,
        read: qwen3_vl,
    },
];

/// The architectures whose towers gpumem counts without modelling their profile run, by the
/// `model_type` of the multimodal config, and how their parameters are counted (with the text
/// model's width).
const COUNTED: &[(&str, CountTowers)] = &[("gemma4", super::gemma4_towers::parameters)];

/// Counts a config's towers with the text model's width (`None`: not a tower it can build).
type CountTowers = fn(&Map<String, Value>, u64) -> Option<u64>;

/// A tower's shape, as its config gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct VisionShape {
    /// The tower's width.
    pub hidden: u64,
    /// Its MLP's width.
    pub ffn: u64,
    /// Its blocks.
    pub layers: u64,
    /// Its attention heads.
    pub heads: u64,
    /// Pixels a patch's side.
    pub patch: u64,
    /// Frames a patch spans (Qwen's `temporal_patch_size`; 1 for image towers).
    pub temporal_patch: u64,
    /// Patches a side merged or pooled into one token (Qwen's `spatial_merge_size`; Gemma 3's
    /// pooling kernel, `sqrt(patches / mm_tokens_per_image)`).
    pub merge: u64,
    /// The side of the fixed square image (Gemma 3's `image_size`; 0 where the size varies).
    pub image_size: u64,
    /// The text model's width the projector maps into.
    pub out_hidden: u64,
    /// Qwen3-VL's deepstack mergers (`deepstack_visual_indexes`), each adding one text width
    /// to every output token; 0 for other towers.
    pub deepstack: u64,
    /// Qwen3-VL's learned position embeddings (`num_position_embeddings`); 0 for others.
    pub positions: u64,
}

/// A config.json's vision tower.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "tower", rename_all = "snake_case")]
pub enum HfVision {
    /// One gpumem models.
    Modelled {
        /// Which.
        kind: TowerKind,
        /// Its shape.
        shape: VisionShape,
    },
    /// Towers gpumem counts but whose profile run it does not model (Gemma 4's vision and audio
    /// towers): vLLM plans such a model only with every modality limited to 0, which leaves
    /// the towers unbuilt.
    Unprofiled {
        /// The config's `model_type`.
        model_type: String,
        /// The towers' parameters with their projections into the text model.
        parameters: u64,
        /// An audio tower stands beside the vision tower (`audio_config`).
        audio: bool,
    },
    /// A `vision_config` gpumem has no row for (or one whose keys it cannot read): engines
    /// that load the tower refuse the model by this name.
    Unmodelled {
        /// The config's `model_type`.
        model_type: String,
    },
}

impl HfVision {
    /// The towers' parameters with their projections, where gpumem counts them.
    pub fn parameters(&self) -> Option<u64> {
        match self {
            HfVision::Modelled { kind, shape } => Some(shape.parameters(*kind)),
            HfVision::Unprofiled { parameters, .. } => Some(*parameters),
            HfVision::Unmodelled { .. } => None,
        }
    }
}

/// The vision tower of a config.json's top level, `None` for a model without a
/// `vision_config`.
pub(crate) fn vision_of(top: &Map<String, Value>) -> Option<HfVision> {
    let vision = top.get("vision_config")?.as_object()?;
    let model_type = top
        .get("model_type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if let Some(row) = COUNTED.iter().find(|r| r.0 == model_type) {
        return Some(match text_hidden(top).and_then(|h| (row.1)(top, h)) {
            Some(parameters) => HfVision::Unprofiled {
                model_type,
                parameters,
                audio: top.get("audio_config").is_some_and(Value::is_object),
            },
            None => HfVision::Unmodelled { model_type },
        });
    }
    let modelled = TOWERS
        .iter()
        .find(|r| r.model_type == model_type)
        .and_then(|r| (r.read)(vision, top).map(|shape| (r.kind, shape)));
    Some(match modelled {
        Some((kind, shape)) => HfVision::Modelled { kind, shape },
        None => HfVision::Unmodelled { model_type },
    })
}

/// [`vision_of`] over a config.json's bytes (`None` where they are not a JSON object).
pub(crate) fn vision_of_bytes(text: &[u8]) -> Option<HfVision> {
    let value: Value = serde_json::from_slice(text).ok()?;
    vision_of(value.as_object()?)
}

fn uint(map: &Map<String, Value>, key: &str) -> Option<u64> {
    map.get(key).and_then(Value::as_u64).filter(|&v| v > 0)
}

/// The language model's width: `text_config`'s, else the top level's.
fn text_hidden(top: &Map<String, Value>) -> Option<u64> {
    top.get("text_config")
        .and_then(Value::as_object)
        .and_then(|t| uint(t, "hidden_size"))
        .or_else(|| uint(top, "hidden_size"))
}

/// Qwen2-VL's `vision_config`: `embed_dim` wide, `mlp_ratio` × that its MLP; the merger maps
/// into the text model's width (the language model's `hidden_size`, which the merger's output
/// must match, rather than `vision_config.hidden_size`, which published configs do not all
/// keep equal to it).
fn qwen2_vl(v: &Map<String, Value>, top: &Map<String, Value>) -> Option<VisionShape> {
    let hidden = uint(v, "embed_dim")?;
    let ratio = v.get("mlp_ratio").and_then(Value::as_f64).unwrap_or(4.0);
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "the MLP width is a whole number well under 2^52 (Qwen2VLVisionConfig's int())"
    )]
    let ffn = (hidden as f64 * ratio) as u64;
    Some(VisionShape {
        hidden,
        ffn,
        layers: uint(v, "depth")?,
        heads: uint(v, "num_heads")?,
        patch: uint(v, "patch_size").unwrap_or(14),
        temporal_patch: uint(v, "temporal_patch_size").unwrap_or(2),
        merge: uint(v, "spatial_merge_size").unwrap_or(2),
        image_size: 0,
        out_hidden: text_hidden(top).or_else(|| uint(v, "hidden_size"))?,
        deepstack: 0,
        positions: 0,
    })
}

/// Qwen2.5-VL's `vision_config`: `hidden_size` wide, `intermediate_size` its gated MLP,
/// `out_hidden_size` the text model's width.
fn qwen2_5_vl(v: &Map<String, Value>, top: &Map<String, Value>) -> Option<VisionShape> {
    Some(VisionShape {
        hidden: uint(v, "hidden_size")?,
        ffn: uint(v, "intermediate_size")?,
        layers: uint(v, "depth")?,
        heads: uint(v, "num_heads")?,
        patch: uint(v, "patch_size").unwrap_or(14),
        temporal_patch: uint(v, "temporal_patch_size").unwrap_or(2),
        merge: uint(v, "spatial_merge_size").unwrap_or(2),
        image_size: 0,
        out_hidden: uint(v, "out_hidden_size").or_else(|| text_hidden(top))?,
        deepstack: 0,
        positions: 0,
    })
}

/// Qwen3-VL's `vision_config`, with `Qwen3VLVisionConfig`'s defaults (transformers 5.24) for
/// the keys a config leaves out.
fn qwen3_vl(v: &Map<String, Value>, _top: &Map<String, Value>) -> Option<VisionShape> {
    let deepstack = match v.get("deepstack_visual_indexes") {
        Some(Value::Array(list)) => list.len() as u64,
        Some(_) => return None,
        None => 3,
    };
    Some(VisionShape {
        hidden: uint(v, "hidden_size").unwrap_or(1152),
        ffn: uint(v, "intermediate_size").unwrap_or(4304),
        layers: uint(v, "depth").unwrap_or(27),
        heads: uint(v, "num_heads").unwrap_or(16),
        patch: uint(v, "patch_size").unwrap_or(16),
        temporal_patch: uint(v, "temporal_patch_size").unwrap_or(2),
        merge: uint(v, "spatial_merge_size").unwrap_or(2),
        image_size: 0,
        out_hidden: uint(v, "out_hidden_size").unwrap_or(3584),
        deepstack,
        positions: uint(v, "num_position_embeddings").unwrap_or(2304),
    })
}

/// Gemma 3's SigLIP `vision_config` and the top level's `mm_tokens_per_image` (256 by
/// default): the patches of one image pooled into that many tokens.
fn gemma3(v: &Map<String, Value>, top: &Map<String, Value>) -> Option<VisionShape> {
    let image_size = uint(v, "image_size")?;
    let patch = uint(v, "patch_size")?;
    let tokens = uint(top, "mm_tokens_per_image").unwrap_or(256);
    let side = image_size / patch;
    let tokens_side = tokens.isqrt();
    if tokens_side == 0 || tokens_side * tokens_side != tokens || side % tokens_side != 0 {
        return None;
    }
    Some(VisionShape {
        hidden: uint(v, "hidden_size")?,
        ffn: uint(v, "intermediate_size")?,
        layers: uint(v, "num_hidden_layers")?,
        heads: uint(v, "num_attention_heads")?,
        patch,
        temporal_patch: 1,
        merge: side / tokens_side,
        image_size,
        out_hidden: text_hidden(top)?,
        deepstack: 0,
        positions: 0,
    })
}

impl VisionShape {
    /// Parameters of the tower and the projector, as vLLM 0.33 loads them.
    pub fn parameters(&self, kind: TowerKind) -> u64 {
        let w = u128::from;
        let (h, f, p, t) = (
            w(self.hidden),
            w(self.ffn),
            w(self.patch),
            w(self.temporal_patch),
        );
        let attention = 3 * h * h + 3 * h + h * h + h;
        let total = match kind {
            TowerKind::Qwen2Vl | TowerKind::Qwen25Vl => {
                let gated = kind == TowerKind::Qwen25Vl;
                let mlp = if gated {
                    2 * (h * f + f) + f * h + h
                } else {
                    h * f + f + f * h + h
                };
                // RMSNorm weights (Qwen2.5-VL) or LayerNorm weights and biases (Qwen2-VL).
                let norm = if gated { h } else { 2 * h };
                let merged = h * w(self.merge) * w(self.merge);
                let merger = norm
                    + merged * merged
                    + merged
                    + merged * w(self.out_hidden)
                    + w(self.out_hidden);
                let patch_embed = 3 * t * p * p * h;
                patch_embed + w(self.layers) * (attention + mlp + 2 * norm) + merger
            }
            TowerKind::Qwen3Vl => {
                let (o, merged) = (w(self.out_hidden), h * w(self.merge) * w(self.merge));
                // Biased Conv3d and the position table; blocks of LayerNorms (weights and
                // biases), a biased qkv and projection and a plain biased MLP.
                let embeddings = 3 * t * p * p * h + h + w(self.positions) * h;
                let block = attention + (h * f + f + f * h + h) + 4 * h;
                // The merger normalises the tower's width, each deepstack merger the merged
                // width, then both project merged -> merged -> the text's width.
                let projection = merged * merged + merged + merged * o + o;
                let mergers = (2 * h + projection) + w(self.deepstack) * (2 * merged + projection);
                embeddings + w(self.layers) * block + mergers
            }
            TowerKind::Gemma3 => {
                let mlp = h * f + f + f * h + h;
                let side = w(self.image_size) / p.max(1);
                let embeddings = 3 * p * p * h + h + side * side * h;
                let post_norm = 2 * h;
                // mm_soft_emb_norm and mm_input_projection_weight.
                let projector = h + h * w(self.out_hidden);
                embeddings + w(self.layers) * (attention + mlp + 4 * h) + post_norm + projector
            }
        };
        u64::try_from(total).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::{vision_of, HfVision, TowerKind};

    fn config(name: &str) -> serde_json::Value {
        let path = format!(
            "{}/tests/fixtures/hf-configs-as-published/{name}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn qwen2_5_vl_3b_tower_has_the_published_parameters() {
        let path = format!(
            "{}/tests/fixtures/vllm/configs/qwen2.5-vl-3b-instruct.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let value: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let Some(HfVision::Modelled { kind, shape }) = vision_of(value.as_object().unwrap()) else {
            panic!("Qwen2.5-VL's tower is modelled");
        };
        assert_eq!(kind, TowerKind::Qwen25Vl);
        // The same file's torchinfo print: Conv3d 1,505,280, each block 19,702,200, the
        // merger's norm 1,280 and MLP 36,707,328.
        assert_eq!(
            shape.parameters(kind),
            1_505_280 + 32 * 19_702_200 + 1_280 + 36_707_328
        );
    }

    #[test]
    fn gemma_3_pools_4096_patches_into_256_tokens() {
        let Some(HfVision::Modelled { kind, shape }) =
            vision_of(config("gemma-3-27b-it").as_object().unwrap())
        else {
            panic!("Gemma 3's tower is modelled");
        };
        assert_eq!(kind, TowerKind::Gemma3);
        assert_eq!((shape.image_size / shape.patch, shape.merge), (64, 4));
        assert_eq!(shape.out_hidden, 5376);
    }

    #[test]
    fn qwen3_vl_reads_its_deepstack_mergers_and_position_table() {
        let path = format!(
            "{}/tests/fixtures/vllm/configs/qwen3-vl-2b-instruct.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let value: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let Some(HfVision::Modelled { kind, shape }) = vision_of(value.as_object().unwrap()) else {
            panic!("Qwen3-VL's tower is modelled");
        };
        assert_eq!(kind, TowerKind::Qwen3Vl);
        assert_eq!(
            (
                shape.hidden,
                shape.ffn,
                shape.layers,
                shape.patch,
                shape.merge
            ),
            (1024, 4096, 24, 16, 2)
        );
        // deepstack_visual_indexes [5, 11, 17]; out_hidden_size 2048; 48 × 48 positions.
        assert_eq!(
            (shape.deepstack, shape.out_hidden, shape.positions),
            (3, 2048, 2304)
        );
    }

    #[test]
    fn other_towers_are_named() {
        for (name, model_type) in [
            ("llava-1.5-7b-hf", "llava"),
            ("mistral-small-3.1-24b-instruct-2503", "mistral3"),
        ] {
            assert_eq!(
                vision_of(config(name).as_object().unwrap()),
                Some(HfVision::Unmodelled {
                    model_type: model_type.into()
                })
            );
        }
        assert_eq!(vision_of(config("falcon-7b").as_object().unwrap()), None);
    }
}
