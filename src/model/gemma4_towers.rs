//! Gemma 4's vision and audio towers (`vision_config`, `audio_config` beside `text_config`) and
//! the projections that map their outputs into the text model's width, counted as transformers
//! 5.24's `modeling_gemma4.py` builds them (vLLM 0.33 builds the towers with the same classes).
//! A key a config leaves out takes transformers' default (`configuration_gemma4.py`), as the
//! published configs rely on: E2B's and E4B's `audio_config` names no width at all.
//!
//! The zero-dimensional clipping bounds of `Gemma4ClippableLinear` (four a linear layer) are
//! not counted: they hold no weights to speak of, and the Hub's parameter totals leave them out.

use serde_json::{Map, Value};

/// The vision tower: a ViT of RMS norms with q/k norms and a gated MLP, its patches projected
/// in with a two-axis table of learned positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Vision {
    hidden: u64,
    ffn: u64,
    layers: u64,
    heads: u64,
    kv_heads: u64,
    head_dim: u64,
    patch: u64,
    positions: u64,
    /// `standardize`: a bias and a scale over the pooled output.
    standardize: bool,
}

/// The audio tower: a conformer (two half-step feed-forwards, chunked attention with a
/// relative-position key projection, a light convolution) behind two strided convolutions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Audio {
    hidden: u64,
    heads: u64,
    layers: u64,
    channels: (u64, u64),
    kernel: u64,
    out: u64,
}

/// The largest width read: far above any tower's, and low enough that no product of a
/// layer's widths overflows the count.
const MAX_WIDTH: u64 = 1 << 24;

fn uint(map: &Map<String, Value>, key: &str, default: u64) -> Option<u64> {
    match map.get(key) {
        None | Some(Value::Null) => Some(default),
        Some(v) => v.as_u64().filter(|&n| n > 0 && n <= MAX_WIDTH),
    }
}

fn vision(v: &Map<String, Value>) -> Option<Vision> {
    let heads = uint(v, "num_attention_heads", 12)?;
    Some(Vision {
        hidden: uint(v, "hidden_size", 768)?,
        ffn: uint(v, "intermediate_size", 3072)?,
        layers: uint(v, "num_hidden_layers", 16)?,
        heads,
        kv_heads: uint(v, "num_key_value_heads", heads)?,
        head_dim: uint(v, "head_dim", 64)?,
        patch: uint(v, "patch_size", 16)?,
        positions: uint(v, "position_embedding_size", 10 * 1024)?,
        standardize: v
            .get("standardize")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    })
}

fn audio(a: &Map<String, Value>) -> Option<Audio> {
    let channels = match a.get("subsampling_conv_channels") {
        None | Some(Value::Null) => (128, 32),
        Some(Value::Array(c)) if c.len() == 2 => (
            c[0].as_u64().filter(|&n| n > 0 && n <= MAX_WIDTH)?,
            c[1].as_u64().filter(|&n| n > 0 && n <= MAX_WIDTH)?,
        ),
        Some(_) => return None,
    };
    let hidden = uint(a, "hidden_size", 1024)?;
    let heads = uint(a, "num_attention_heads", 8)?;
    // Each head's width is the hidden width's share; one that does not divide is not a
    // tower transformers can build.
    if hidden % heads != 0 {
        return None;
    }
    Some(Audio {
        hidden,
        heads,
        layers: uint(a, "num_hidden_layers", 12)?,
        channels,
        kernel: uint(a, "conv_kernel_size", 5)?,
        out: uint(a, "output_proj_dims", 1536)?,
    })
}

impl Vision {
    fn parameters(&self) -> u128 {
        let w = u128::from;
        let (h, f, d) = (w(self.hidden), w(self.ffn), w(self.head_dim));
        let (q, kv) = (w(self.heads) * d, w(self.kv_heads) * d);
        // q, k, v and o; the q and k norms; gate, up and down; four norms.
        let layer = h * q + 2 * h * kv + q * h + 2 * d + 3 * h * f + 4 * h;
        let patches = 3 * w(self.patch) * w(self.patch) * h + 2 * w(self.positions) * h;
        let standardize = if self.standardize { 2 * h } else { 0 };
        patches + w(self.layers) * layer + standardize
    }
}

impl Audio {
    fn parameters(&self) -> u128 {
        let w = u128::from;
        let h = w(self.hidden);
        let (c0, c1) = (w(self.channels.0), w(self.channels.1));
        // Two 3 × 3 convolutions with their norms, and the projection of the second's
        // channels over a quarter of the first's into the hidden width.
        let subsample = c0 * 9 + c0 + c1 * c0 * 9 + c1 + (c0 / 4) * c1 * h;
        // Two feed-forwards (4h wide, with norms before and after); q, k, v, the output and
        // the relative-position key projection, the per-dimension scale; the convolution's
        // start (2h) and end projections, its depthwise kernel and two norms; three norms.
        let feed_forward = 2 * (8 * h * h + 2 * h);
        let attention = 5 * h * h + h / w(self.heads);
        let conv = 3 * h * h + h * w(self.kernel) + 2 * h;
        let layer = feed_forward + attention + conv + 3 * h;
        subsample + w(self.layers) * layer + (h + 1) * w(self.out)
    }
}

/// The parameters of a Gemma 4 config's towers and their projections into `text_hidden`, or
/// `None` where its `vision_config` or `audio_config` is not one transformers could build.
pub(crate) fn parameters(top: &Map<String, Value>, text_hidden: u64) -> Option<u64> {
    if text_hidden > MAX_WIDTH {
        return None;
    }
    let t = u128::from(text_hidden);
    let mut total: u128 = 0;
    if let Some(v) = top.get("vision_config").and_then(Value::as_object) {
        let v = vision(v)?;
        total += v.parameters() + u128::from(v.hidden) * t;
    }
    if let Some(a) = top.get("audio_config").and_then(Value::as_object) {
        let a = audio(a)?;
        total += a.parameters() + u128::from(a.out) * t;
    }
    u64::try_from(total).ok()
}

#[cfg(test)]
mod tests {
    use super::parameters;
    use serde_json::{json, Map, Value};

    fn top(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    // E2B's towers as transformers 5.24 builds them from the published config's defaults
    // (a meta-device Gemma4ForConditionalGeneration): vision 167,364,608, its projection into
    // 1536 wide 1,179,648, audio 304,824,608, its projection 2,359,296. With the language
    // model's stored tensors these give the Hub's 5,123,178,051 (tests/it/checkpoint_sizes.rs).
    #[test]
    fn e2bs_towers_count_as_transformers_builds_them() {
        let config = top(json!({
            "vision_config": {"model_type": "gemma4_vision", "use_clipped_linears": true},
            "audio_config": {"model_type": "gemma4_audio"},
        }));
        assert_eq!(parameters(&config, 1536), Some(475_728_160));
        // The 31B's tower: 27 blocks of 1152, heads of 72, standardized (a bias and a scale),
        // into 5376: 569,550,384 and 6,193,152, as its shard headers hold them.
        let big = top(json!({"vision_config": {
            "hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27,
            "num_attention_heads": 16, "head_dim": 72, "standardize": true,
        }}));
        assert_eq!(parameters(&big, 5376), Some(575_743_536));
    }

    #[test]
    fn towers_transformers_could_not_build_are_not_counted() {
        for bad in [
            json!({"audio_config": {"hidden_size": 1000, "num_attention_heads": 3}}),
            json!({"audio_config": {"subsampling_conv_channels": [128]}}),
            json!({"vision_config": {"hidden_size": 0}}),
            json!({"vision_config": {"num_hidden_layers": "16"}}),
        ] {
            assert_eq!(parameters(&top(bad.clone()), 1536), None, "{bad}");
        }
    }

    proptest::proptest! {
        // Any widths a config may hold give a count or none, never a panic or an overflow.
        #[test]
        fn any_widths_count_or_refuse(
            widths in proptest::collection::vec(0u64..=u64::MAX, 8),
            text in 0u64..=u64::MAX,
        ) {
            let config = top(json!({
                "vision_config": {
                    "hidden_size": widths[0], "intermediate_size": widths[1],
                    "num_hidden_layers": widths[2], "position_embedding_size": widths[3],
                },
                "audio_config": {
                    "hidden_size": widths[4], "num_attention_heads": widths[5],
                    "subsampling_conv_channels": [widths[6], widths[7]],
                },
            }));
            let _ = parameters(&config, text);
        }
    }
}
