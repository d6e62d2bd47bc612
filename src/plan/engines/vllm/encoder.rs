//! vLLM 0.33's multimodal profile run (`GPUModelRunner.profile_run`): before the language
//! model's dummy batch it encodes the largest dummy input its budget allows and keeps the
//! outputs in the encoder cache while that batch runs.
//!
//! ```text
//! tokens/item = the processor's largest item (Qwen2/2.5-VL: max_pixels / 28², a video's frames
//!               that fit max_model_len; Qwen3-VL: longest_edge / 32², a two-frame video at
//!               half the video processor's; Gemma 3: mm_tokens_per_image)
//! budget      = max(max_num_batched_tokens, tokens/item)         (compute_mm_encoder_budget)
//! items       = max(1, min(budget / tokens/item,
//!                          max_num_seqs × max(1, min(limit, max_model_len / tokens/item))))
//! peak        = max(encoder forward, language-model profile + encoder outputs + inputs)
//! ```
//!
//! The encoder's forward peak is modelled as the text profile is: the widest block's
//! activations per patch (`vllm/model_executor/models/qwen2_5_vl.py`, `qwen2_vl.py`,
//! `qwen3_vl.py`, `siglip.py`) times the patches of every item, beside the dummy pixels.

use serde::Serialize;

use crate::model::{TowerKind, VisionShape};

/// The modality vLLM profiles the encoder with (the one whose item has the most tokens).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Modality {
    /// Images.
    Image,
    /// Videos (frames through the same tower).
    Video,
}

/// `--limit-mm-per-prompt` and `--mm-processor-kwargs`, as gpumem reads them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VllmMultimodal {
    /// Images a prompt may carry (`None`: vLLM's 999).
    pub image_limit: Option<u64>,
    /// Videos a prompt may carry (`None`: vLLM's 999).
    pub video_limit: Option<u64>,
    /// `max_pixels` of the processor (`None`: the processor's own).
    pub max_pixels: Option<u64>,
    /// `--limit-mm-per-prompt` as given, for the launch.
    pub limit_json: Option<String>,
    /// `--mm-processor-kwargs` as given, for the launch.
    pub processor_json: Option<String>,
}

impl VllmMultimodal {
    /// vLLM builds no tower whose every modality is limited to 0 (`_mark_tower_model` puts a
    /// `StageMissingLayer` in its place): neither its weights nor its profile run.
    pub fn skips(&self, kind: TowerKind) -> bool {
        self.image_limit == Some(0) && (!kind.takes_video() || self.video_limit == Some(0))
    }
}

/// vLLM's default limit of items of a modality in a prompt (`get_limit_per_prompt`).
const DEFAULT_LIMIT: u64 = 999;

/// Frames a dummy video may have (`_MAX_FRAMES_PER_VIDEO` in `qwen2_vl.py`).
const MAX_FRAMES_PER_VIDEO: u64 = 14;

/// The Qwen2-VL image processor's default `max_pixels` (Qwen2-VL's and Qwen2.5-VL's
/// `preprocessor_config.json`: 16384 tokens of 28 × 28 pixels).
pub const QWEN_MAX_PIXELS: u64 = 12_845_056;

/// Qwen3-VL's image processor `size.longest_edge` (its `preprocessor_config.json`: 16384
/// tokens of 32 × 32 pixels, the 16,384-token image budget vLLM prints for Qwen3-VL-8B).
pub const QWEN3_MAX_PIXELS: u64 = 16_777_216;

/// Qwen3-VL's video processor `size.longest_edge` (`video_preprocessor_config.json`), which
/// spans a pair of frames: `Qwen3VLProcessingInfo.get_max_video_tokens` sizes the dummy
/// video's frames at half of it, 12,288 tokens, the video budget vLLM prints for a Qwen3-VL
/// whose images were made smaller than that.
const QWEN3_VIDEO_MAX_PIXELS: u64 = 25_165_824;

/// A config.json's vision tower as vLLM loads it beside the language model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VllmVision {
    /// Which tower.
    pub kind: TowerKind,
    /// Its shape.
    pub shape: VisionShape,
    /// Bytes of the tower and projector not already in the model's weights (0 where the
    /// checkpoint's own tensors were counted).
    pub weights_bytes: u64,
    /// Bytes of the tower and projector that the model's weights already hold (the
    /// checkpoint's own tensors; 0 where `weights_bytes` adds them).
    pub counted_bytes: u64,
}

/// What the multimodal profile run does on one rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EncoderProfile {
    /// The modality profiled.
    pub modality: Modality,
    /// Tokens of its largest item.
    pub tokens_per_item: u64,
    /// Items encoded at once.
    pub items: u64,
    /// The encoder cache's budget, in tokens (vLLM prints it).
    pub budget: u64,
    /// The encoder's forward peak on the rank, in bytes.
    pub peak_bytes: u64,
    /// The dummy inputs and the encoder outputs kept while the language model's dummy batch
    /// runs, in bytes.
    pub retained_bytes: u64,
}

/// The run's settings the profile depends on.
pub(super) struct Batch {
    pub max_model_len: u64,
    pub max_num_batched_tokens: u64,
    pub max_num_seqs: u64,
    pub tp: u64,
    pub activation_bytes: u64,
}

/// The profile run of `vision` under `mm`; `None` where every modality is limited to 0 (vLLM
/// then profiles no encoder).
pub(super) fn profile(
    vision: &VllmVision,
    mm: &VllmMultimodal,
    batch: &Batch,
) -> Option<EncoderProfile> {
    let image_limit = mm.image_limit.unwrap_or(DEFAULT_LIMIT);
    let video_limit = mm.video_limit.unwrap_or(DEFAULT_LIMIT);
    let image = (image_limit > 0).then(|| image_tokens(vision, mm));
    let video = (vision.kind.takes_video() && video_limit > 0)
        .then(|| video_tokens(vision, mm, batch.max_model_len));
    // The most tokens, ties to the later name ("video" over "image"), as vLLM's max over
    // (tokens, modality) picks.
    let (modality, tokens, limit) = match (image, video) {
        (Some(i), Some(v)) if v >= i => (Modality::Video, v, video_limit),
        (Some(i), _) => (Modality::Image, i, image_limit),
        (None, Some(v)) => (Modality::Video, v, video_limit),
        (None, None) => return None,
    };
    let tokens = tokens.max(1);
    let budget = batch.max_num_batched_tokens.max(tokens);
    let per_prompt = limit.min(batch.max_model_len / tokens).max(1);
    let items = (budget / tokens)
        .min(batch.max_num_seqs.saturating_mul(per_prompt))
        .max(1);
    let patches = items.saturating_mul(patches_per_item(vision, tokens));
    let s = &vision.shape;
    let input = 3 * s.temporal_patch * s.patch * s.patch;
    let b = batch.activation_bytes;
    let peak = patches.saturating_mul((input + block_peak(vision, batch.tp)) * b);
    // Qwen3-VL's deepstack features leave the tower concatenated beside the merger's.
    let outputs = items
        .saturating_mul(tokens)
        .saturating_mul(s.out_hidden * (1 + s.deepstack) * b);
    Some(EncoderProfile {
        modality,
        tokens_per_item: tokens,
        items,
        budget,
        peak_bytes: peak,
        retained_bytes: outputs.saturating_add(patches.saturating_mul(input * b)),
    })
}

/// Patches an item passes through the tower: Qwen's tokens are merged 2 × 2 patches (a
/// video's frames counted in its tokens); Gemma 3's image is the fixed square's.
fn patches_per_item(vision: &VllmVision, tokens: u64) -> u64 {
    let s = &vision.shape;
    match vision.kind {
        TowerKind::Qwen2Vl | TowerKind::Qwen25Vl | TowerKind::Qwen3Vl => tokens * s.merge * s.merge,
        TowerKind::Gemma3 => {
            let side = s.image_size / s.patch.max(1);
            side * side
        }
    }
}

/// Elements a patch holds at the widest point of a block on a rank of `tp`: the block's input
/// and what the attention or the MLP keeps alive beside it (the sharded projections split
/// over the ranks).
fn block_peak(vision: &VllmVision, tp: u64) -> u64 {
    let s = &vision.shape;
    let tp = tp.max(1);
    let (h, f) = (s.hidden, s.ffn.div_ceil(tp));
    let sharded_h = h.div_ceil(tp);
    match vision.kind {
        // The input, q/k/v, their rotated copies (q and k made contiguous, then rotated) and
        // the attention's output with its contiguous copy; or the input, the attention's
        // output, the fused norm's output and residual, the gate-up product, its activation
        // and the MLP's output.
        TowerKind::Qwen25Vl => (h + 9 * sharded_h).max(5 * h + 3 * f),
        // The same attention; a plain MLP over the block input, its norm and fc1's product
        // and activation beside fc2's output.
        TowerKind::Qwen2Vl => (h + 9 * sharded_h).max(3 * h + 2 * f),
        // Qwen2.5-VL's attention and Qwen2-VL's plain MLP, beside the interpolated position
        // embeddings (one width a patch, held in the encoder metadata through every block)
        // and the deepstack features gathered so far (a text width per merged token each).
        TowerKind::Qwen3Vl => {
            let merged = (s.merge * s.merge).max(1);
            (h + 9 * sharded_h).max(3 * h + 2 * f) + h + s.deepstack * s.out_hidden / merged
        }
        // SigLIP: the residual and normed input beside q/k/v and the attention's output, or
        // beside fc1's product, its activation and fc2's output.
        TowerKind::Gemma3 => (3 * h + 4 * sharded_h).max(3 * h + 2 * f),
    }
}

/// The image processor's `max_pixels` (`--mm-processor-kwargs` over the default).
fn max_pixels(vision: &VllmVision, mm: &VllmMultimodal) -> u64 {
    mm.max_pixels.unwrap_or(match vision.kind {
        TowerKind::Qwen3Vl => QWEN3_MAX_PIXELS,
        _ => QWEN_MAX_PIXELS,
    })
}

/// Tokens of the largest image: Qwen's `get_image_size_with_most_features` (the most merged
/// patches `max_pixels` allows, factored into a side ratio of at most 200); Gemma 3's fixed
/// `mm_tokens_per_image`.
fn image_tokens(vision: &VllmVision, mm: &VllmMultimodal) -> u64 {
    let s = &vision.shape;
    match vision.kind {
        TowerKind::Gemma3 => {
            let side = s.image_size / s.patch.max(1) / s.merge.max(1);
            side * side
        }
        TowerKind::Qwen2Vl | TowerKind::Qwen25Vl | TowerKind::Qwen3Vl => {
            tokens_within(vision, max_pixels(vision, mm))
        }
    }
}

/// Qwen's `get_image_size_with_most_features` at `pixels`: the most merged patches they allow,
/// factored into a side ratio of at most 200.
fn tokens_within(vision: &VllmVision, pixels: u64) -> u64 {
    let s = &vision.shape;
    let unit = (s.patch * s.merge).max(1);
    let most = pixels / (unit * unit);
    (1..=most)
        .rev()
        .find(|&n| {
            let (h, w) = closest_factor_pair(n);
            w <= 200 * h
        })
        .unwrap_or(1)
}

/// The factor pair of `n` closest to its square root, the smaller first.
fn closest_factor_pair(n: u64) -> (u64, u64) {
    let d = (1..=n.isqrt()).rev().find(|d| n % d == 0).unwrap_or(1);
    (d, n / d)
}

/// Frames of the dummy video (`get_num_frames_with_most_features` with one video): the most
/// whose tokens fit `max_model_len`, at most 14, at least 1.
fn video_frames(vision: &VllmVision, mm: &VllmMultimodal, max_model_len: u64) -> u64 {
    let per_frame_pair = image_tokens(vision, mm).max(1);
    let t = vision.shape.temporal_patch.max(1);
    let mut frames: u64 = 1;
    while (frames + 1).div_ceil(t) * per_frame_pair <= max_model_len {
        frames += 1;
        if frames > MAX_FRAMES_PER_VIDEO * t {
            break;
        }
    }
    frames.clamp(1, MAX_FRAMES_PER_VIDEO)
}

/// Tokens of the largest video: its frames padded to whole temporal patches, each pair of
/// frames an image's tokens.
fn video_tokens(vision: &VllmVision, mm: &VllmMultimodal, max_model_len: u64) -> u64 {
    let t = vision.shape.temporal_patch.max(1);
    if vision.kind == TowerKind::Qwen3Vl {
        // Qwen3-VL profiles a two-frame video at the video processor's own pixel budget
        // (`max_pixels` given to the processor is assumed to apply to videos as well).
        let pixels = mm.max_pixels.unwrap_or(QWEN3_VIDEO_MAX_PIXELS) / t;
        return tokens_within(vision, pixels);
    }
    video_frames(vision, mm, max_model_len).div_ceil(t) * image_tokens(vision, mm)
}

#[cfg(test)]
mod tests {
    use super::{image_tokens, profile, video_tokens, Batch, Modality, VllmMultimodal, VllmVision};
    use crate::model::{TowerKind, VisionShape};

    fn qwen25() -> VllmVision {
        VllmVision {
            kind: TowerKind::Qwen25Vl,
            shape: VisionShape {
                hidden: 1280,
                ffn: 3420,
                layers: 32,
                heads: 16,
                patch: 14,
                temporal_patch: 2,
                merge: 2,
                image_size: 0,
                out_hidden: 3584,
                deepstack: 0,
                positions: 0,
            },
            weights_bytes: 0,
            counted_bytes: 0,
        }
    }

    #[test]
    fn qwen_items_are_sized_as_vllm_prints_its_budget() {
        let mm = VllmMultimodal::default();
        // vLLM's logs: a 16384-token budget for images, and at max_model_len 128000 "a
        // budget of 114688 tokens, and profiled with 1 video items" (7 pairs of 14 frames).
        assert_eq!(image_tokens(&qwen25(), &mm), 16_384);
        assert_eq!(video_tokens(&qwen25(), &mm, 128_000), 114_688);
        // Too short a context for two frames: one frame, padded to a pair.
        assert_eq!(video_tokens(&qwen25(), &mm, 8_192), 16_384);
        let small = VllmMultimodal {
            max_pixels: Some(1_003_520),
            ..VllmMultimodal::default()
        };
        assert_eq!(image_tokens(&qwen25(), &small), 1_280);
    }

    #[test]
    fn qwen3_vl_profiles_an_image_over_its_two_frame_video() {
        let qwen3 = VllmVision {
            kind: TowerKind::Qwen3Vl,
            shape: VisionShape {
                hidden: 1152,
                ffn: 4304,
                layers: 27,
                heads: 16,
                patch: 16,
                temporal_patch: 2,
                merge: 2,
                image_size: 0,
                out_hidden: 4096,
                deepstack: 3,
                positions: 2304,
            },
            weights_bytes: 0,
            counted_bytes: 0,
        };
        let mm = VllmMultimodal::default();
        // vLLM's logs: Qwen3-VL-8B "a budget of 16384 tokens, and profiled with 1 image
        // items" by default; a budget of 12288 tokens for "1 video items" where a Qwen3-VL
        // embedding model's images were made smaller (search-index file id 63123021464).
        assert_eq!(image_tokens(&qwen3, &mm), 16_384);
        assert_eq!(video_tokens(&qwen3, &mm, 16_384), 12_288);
        let batch = Batch {
            max_model_len: 16_384,
            max_num_batched_tokens: 16_384,
            max_num_seqs: 256,
            tp: 1,
            activation_bytes: 2,
        };
        let p = profile(&qwen3, &mm, &batch).unwrap();
        assert_eq!(
            (p.modality, p.tokens_per_item, p.items, p.budget),
            (Modality::Image, 16_384, 1, 16_384)
        );
        let videos = VllmMultimodal {
            image_limit: Some(0),
            ..VllmMultimodal::default()
        };
        let p = profile(&qwen3, &videos, &batch).unwrap();
        assert_eq!((p.modality, p.tokens_per_item), (Modality::Video, 12_288));
    }

    #[test]
    fn gemma_3_profiles_as_many_images_as_the_budget_holds() {
        let gemma = VllmVision {
            kind: TowerKind::Gemma3,
            shape: VisionShape {
                hidden: 1152,
                ffn: 4304,
                layers: 27,
                heads: 16,
                patch: 14,
                temporal_patch: 1,
                merge: 4,
                image_size: 896,
                out_hidden: 5376,
                deepstack: 0,
                positions: 0,
            },
            weights_bytes: 0,
            counted_bytes: 0,
        };
        let batch = Batch {
            max_model_len: 4096,
            max_num_batched_tokens: 8192,
            max_num_seqs: 1024,
            tp: 1,
            activation_bytes: 2,
        };
        let p = profile(&gemma, &VllmMultimodal::default(), &batch).unwrap();
        // 256 embeddings an image (0.33 counts embeddings, not the placeholder's boi/eoi), so
        // 8192 / 256 = 32 images of 64 × 64 patches.
        assert_eq!(
            (p.modality, p.tokens_per_item, p.items, p.budget),
            (Modality::Image, 256, 32, 8192)
        );
        // A limit of 0 images profiles nothing (Gemma 3 takes no video).
        let none = VllmMultimodal {
            image_limit: Some(0),
            ..VllmMultimodal::default()
        };
        assert!(profile(&gemma, &none, &batch).is_none());
    }
}
