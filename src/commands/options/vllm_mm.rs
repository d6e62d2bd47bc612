//! vLLM's multimodal flags (`--limit-mm-per-prompt`, `--mm-processor-kwargs`) read as vLLM
//! reads them, and the usage errors for a vision tower gpumem does not model.

use anyhow::Result;
use serde_json::Value;

use crate::cli::VllmArgs;
use crate::error::CliError;
use crate::model::{HfVision, ModelSource, TowerKind};
use crate::plan::engines::vllm::VllmMultimodal;
use crate::plan::launch::Engine;

/// The towers gpumem models, for the refusal's message.
const MODELLED: &str =
    "qwen2_vl, qwen2_5_vl, gemma3, qwen3_vl, qwen3_vl_moe, qwen3_5 and qwen3_5_moe";

/// Items of each modality a prompt may carry, as `--limit-mm-per-prompt` gives them (`None`:
/// vLLM's default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MmLimits {
    /// Images.
    pub image: Option<u64>,
    /// Videos.
    pub video: Option<u64>,
    /// Audio clips.
    pub audio: Option<u64>,
}

/// `--limit-mm-per-prompt` as vLLM's `MultiModalConfig` takes it: each modality a count, or an
/// object with a `count`. The dummy sizes an object may also give (`width`, `height`,
/// `num_frames`) are refused: gpumem profiles the processor's largest item.
pub fn parse_limit_mm(json: &str) -> std::result::Result<MmLimits, String> {
    let value: Value = serde_json::from_str(json).map_err(|e| format!("not JSON ({e})"))?;
    let obj = value.as_object().ok_or("not a JSON object")?;
    let mut limits = MmLimits::default();
    for (modality, v) in obj {
        let count = match v {
            Value::Number(n) => n.as_u64(),
            Value::Object(o) => {
                if let Some(other) = o.keys().find(|k| *k != "count") {
                    return Err(format!(
                        "'{modality}': '{other}' sets the dummy input's size, which is not \
                         modelled (give the count only)"
                    ));
                }
                o.get("count").map_or(Some(999), Value::as_u64)
            }
            _ => None,
        }
        .ok_or_else(|| format!("'{modality}': {v} is not a count"))?;
        match modality.as_str() {
            "image" => limits.image = Some(count),
            "video" => limits.video = Some(count),
            "audio" => limits.audio = Some(count),
            _ => {}
        }
    }
    Ok(limits)
}

/// `--mm-processor-kwargs`: `max_pixels` (the largest image's area), and `min_pixels`, which
/// does not change the largest image; other keys are refused as not modelled.
pub fn parse_mm_processor_kwargs(json: &str) -> std::result::Result<Option<u64>, String> {
    let value: Value = serde_json::from_str(json).map_err(|e| format!("not JSON ({e})"))?;
    let obj = value.as_object().ok_or("not a JSON object")?;
    let mut max_pixels = None;
    for (key, v) in obj {
        let n = v
            .as_u64()
            .filter(|&n| n > 0)
            .ok_or_else(|| format!("'{key}': {v} is not a positive whole number"))?;
        match key.as_str() {
            "max_pixels" => max_pixels = Some(n),
            "min_pixels" => {}
            other => {
                return Err(format!(
                    "'{other}' is not modelled (gpumem reads max_pixels and min_pixels)"
                ))
            }
        }
    }
    Ok(max_pixels)
}

/// The multimodal settings `vllm_config` plans with (checked by [`check_vllm_vision`]).
pub fn vllm_multimodal(v: &VllmArgs) -> VllmMultimodal {
    let limits = v
        .limit_mm_per_prompt
        .as_deref()
        .and_then(|j| parse_limit_mm(j).ok())
        .unwrap_or_default();
    VllmMultimodal {
        image_limit: limits.image,
        video_limit: limits.video,
        max_pixels: v
            .mm_processor_kwargs
            .as_deref()
            .and_then(|j| parse_mm_processor_kwargs(j).ok())
            .flatten(),
        limit_json: v.limit_mm_per_prompt.clone(),
        processor_json: v.mm_processor_kwargs.clone(),
    }
}

/// vLLM loads a multimodal model's vision tower: one gpumem does not model is refused by name,
/// never estimated without it; the multimodal flags need vLLM, a model with a tower, and
/// JSON vLLM would take.
pub fn check_vllm_vision(v: &VllmArgs, source: &ModelSource, engine: Option<Engine>) -> Result<()> {
    let usage = |m: String| Err(CliError::Usage(m).into());
    let flags = [
        ("--limit-mm-per-prompt", v.limit_mm_per_prompt.is_some()),
        ("--mm-processor-kwargs", v.mm_processor_kwargs.is_some()),
    ];
    if let Some((flag, _)) = flags.iter().find(|(_, given)| *given) {
        if engine != Some(Engine::Vllm) {
            return usage(format!("{flag} is vLLM's: it needs --engine vllm"));
        }
        if source.hf_vision.is_none() {
            return usage(format!(
                "{flag}: {} has no vision tower (its config.json has no vision_config)",
                source.name
            ));
        }
    }
    let limits = match v.limit_mm_per_prompt.as_deref().map(parse_limit_mm) {
        Some(Err(why)) => return usage(format!("--limit-mm-per-prompt: {why}")),
        Some(Ok(limits)) => limits,
        None => MmLimits::default(),
    };
    if let Some(json) = &v.mm_processor_kwargs {
        match (parse_mm_processor_kwargs(json), &source.hf_vision) {
            (Err(why), _) => return usage(format!("--mm-processor-kwargs: {why}")),
            (
                Ok(Some(_)),
                Some(HfVision::Modelled {
                    kind: TowerKind::Gemma3,
                    ..
                }),
            ) => {
                return usage(
                    "--mm-processor-kwargs: max_pixels does not apply to Gemma 3, whose \
                     processor resizes every image to the tower's fixed size"
                        .into(),
                )
            }
            _ => {}
        }
    }
    let nothing = Some(0);
    match (&source.hf_vision, engine) {
        (
            Some(HfVision::Unprofiled {
                model_type,
                parameters,
                audio,
            }),
            Some(Engine::Vllm),
        ) if limits.image != nothing
            || limits.video != nothing
            || (*audio && limits.audio != nothing) =>
        {
            let (towers, zeros) = if *audio {
                (
                    "vision and audio towers",
                    r#"{"image":0,"video":0,"audio":0}"#,
                )
            } else {
                ("vision tower", r#"{"image":0,"video":0}"#)
            };
            usage(format!(
                "{} is a multimodal model ('{model_type}'): vLLM loads and profiles its {towers} \
                 ({} parameters), whose profile run gpumem does not model; \
                 --limit-mm-per-prompt '{zeros}' leaves them out and plans the language model",
                source.name,
                crate::units::format_params(*parameters)
            ))
        }
        (Some(HfVision::Unmodelled { model_type }), Some(Engine::Vllm)) => usage(format!(
            "{} is a vision-language model ('{model_type}'): vLLM loads and profiles its vision \
             tower, which gpumem does not model (it models {MODELLED}); it is not planned \
             without it",
            source.name
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_limit_mm, parse_mm_processor_kwargs};

    #[test]
    fn limits_read_both_of_vllms_spellings() {
        let limits = |image, video, audio| {
            Ok(super::MmLimits {
                image,
                video,
                audio,
            })
        };
        assert_eq!(
            parse_limit_mm(r#"{"image": 2, "video": 0}"#),
            limits(Some(2), Some(0), None)
        );
        assert_eq!(
            parse_limit_mm(r#"{"image": {"count": 1}, "audio": 1}"#),
            limits(Some(1), None, Some(1))
        );
        assert!(parse_limit_mm(r#"{"image": {"count": 1, "width": 512}}"#).is_err());
        assert!(parse_limit_mm(r#"{"image": -1}"#).is_err());
        assert!(parse_limit_mm("image=2").is_err());
    }

    #[test]
    fn processor_kwargs_read_max_pixels() {
        assert_eq!(
            parse_mm_processor_kwargs(r#"{"max_pixels": 1003520, "min_pixels": 3136}"#),
            Ok(Some(1_003_520))
        );
        assert!(parse_mm_processor_kwargs(r#"{"fps": 2}"#).is_err());
    }
}
