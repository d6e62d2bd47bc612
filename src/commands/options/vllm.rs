//! vLLM's settings: its flags turned into a [`VllmConfig`] (speculative decoding's JSON, the
//! LoRA slots, the layout asked for) and the usage errors vLLM's own checks would raise. `select`
//! and `estimate --engine vllm` take the same flags ([`VllmArgs`]) through [`vllm_request`].

use anyhow::Result;

use super::{gib_bytes, largest_gpu_group};
use crate::cli::VllmArgs;
use crate::error::CliError;
use crate::model::{self, ModelSource};
use crate::plan::engines::speculative::SpecAlgorithm;
use crate::plan::engines::vllm::{LayoutRejection, VllmConfig, VllmLora, VllmSpeculative};
use crate::plan::engines::Settings;
use crate::plan::launch::Engine;
use crate::plan::Candidate;

/// `--speculative-config`, read as vLLM reads it (see [`parse_speculative`]).
pub fn vllm_speculative(v: &VllmArgs) -> Result<Option<VllmSpeculative>> {
    match &v.speculative_config {
        None => Ok(None),
        Some(json) => parse_speculative(json)
            .map(Some)
            .map_err(|why| CliError::Usage(format!("--speculative-config: {why}")).into()),
    }
}

/// `--max-cpu-loras` below `--max-loras` is a usage error, as vLLM's `LoRAConfig` refuses it;
/// so is `--enable-lora` on a mixture of experts, whose expert slots are not modelled.
pub fn check_vllm_lora(v: &VllmArgs, arch: &crate::model::ModelArch) -> Result<()> {
    if v.enable_lora && arch.moe.is_some() {
        return Err(CliError::Usage(
            "--enable-lora on a mixture of experts: vLLM's LoRA slots on routed experts are not \
             modelled (dense models only)"
                .into(),
        )
        .into());
    }
    match (v.max_cpu_loras, v.max_loras.unwrap_or(1)) {
        (Some(cpu), n) if cpu < n => Err(CliError::Usage(format!(
            "--max-cpu-loras {cpu} is below --max-loras {n}: vLLM keeps at least the GPU's \
             adapters in host memory"
        ))
        .into()),
        _ => Ok(()),
    }
}

/// vLLM's flags checked against the model, the devices and the engine planned, then converted
/// once: the settings `select` and `estimate --engine vllm` plan vLLM with.
pub fn vllm_request(
    v: &VllmArgs,
    source: &ModelSource,
    settings: &Settings,
    candidates: &[Candidate],
    engine: Option<Engine>,
) -> Result<VllmConfig> {
    check_pp_layer_partition(v, source.arch.num_layers)?;
    check_tensor_parallel(v, &source.arch, candidates, engine)?;
    check_vllm_features(v, engine)?;
    vllm_speculative(v)?;
    check_vllm_lora(v, &source.arch)?;
    super::check_vllm_vision(v, source, engine)?;
    Ok(vllm_config(v, settings))
}

/// A draft or adapter slots change vLLM's plan only: under another engine they are refused,
/// never ignored.
fn check_vllm_features(v: &VllmArgs, engine: Option<Engine>) -> Result<()> {
    let given = [
        ("--speculative-config", v.speculative_config.is_some()),
        ("--enable-lora", v.enable_lora),
    ];
    match given.iter().find(|(_, given)| *given) {
        Some((flag, _)) if engine != Some(Engine::Vllm) => {
            Err(CliError::Usage(format!("{flag} is vLLM's: it needs --engine vllm")).into())
        }
        _ => Ok(()),
    }
}

/// The first of vLLM's flags given (`--block-size` where not its default), for `estimate`,
/// which plans vLLM only under `--engine vllm`.
pub fn vllm_flag_given(v: &VllmArgs) -> Option<&'static str> {
    [
        (
            "--gpu-memory-utilization",
            v.gpu_memory_utilization.is_some(),
        ),
        (
            "--max-num-batched-tokens",
            v.max_num_batched_tokens.is_some(),
        ),
        ("--max-num-seqs", v.max_num_seqs.is_some()),
        (
            "--block-size",
            v.block_size != VllmConfig::defaults(1).block_size,
        ),
        ("--enforce-eager", v.enforce_eager),
        ("--cpu-offload-gb", v.cpu_offload_gb.is_some()),
        ("--pp-layer-partition", !v.pp_layer_partition.is_empty()),
        ("--tensor-parallel-size", v.tensor_parallel_size.is_some()),
        ("--speculative-config", v.speculative_config.is_some()),
        ("--enable-lora", v.enable_lora),
        ("--limit-mm-per-prompt", v.limit_mm_per_prompt.is_some()),
        ("--mm-processor-kwargs", v.mm_processor_kwargs.is_some()),
    ]
    .into_iter()
    .find_map(|(flag, given)| given.then_some(flag))
}

/// vLLM's `--speculative-config` JSON: its method (vLLM 0.33's MTP spellings, such as
/// `deepseek_mtp` and `qwen3_5_mtp`, are MTP) and `num_speculative_tokens`; why not, for JSON
/// that is not an object, a method gpumem does not model (a draft model of its own, `suffix`,
/// `dflash`…) or a token count that is not from 1 to 64.
pub fn parse_speculative(json: &str) -> std::result::Result<VllmSpeculative, String> {
    let value: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("not JSON ({e})"))?;
    let obj = value.as_object().ok_or("not a JSON object")?;
    let method = match obj.get("method").and_then(serde_json::Value::as_str) {
        Some("eagle") => SpecAlgorithm::Eagle,
        Some("eagle3") => SpecAlgorithm::Eagle3,
        Some("ngram") => SpecAlgorithm::Ngram,
        Some(m) if m == "mtp" || m.ends_with("_mtp") => SpecAlgorithm::Mtp,
        None if obj.get("model").and_then(serde_json::Value::as_str) == Some("ngram") => {
            SpecAlgorithm::Ngram
        }
        other => {
            return Err(format!(
                "method {} is not modelled (gpumem models eagle, eagle3, mtp and ngram drafts; \
                 a draft model of its own is not)",
                other.map_or("(none: a draft model)".into(), |m| format!("'{m}'"))
            ))
        }
    };
    let tokens = match obj.get("num_speculative_tokens") {
        Some(n) => n
            .as_u64()
            .filter(|&n| (1..=64).contains(&n))
            .ok_or_else(|| format!("num_speculative_tokens {n} is not from 1 to 64"))?,
        None if method == SpecAlgorithm::Mtp => 1,
        None => return Err("num_speculative_tokens is missing".into()),
    };
    Ok(VllmSpeculative {
        method,
        tokens,
        json: json.to_string(),
    })
}

/// vLLM's settings from its flags (checked by [`vllm_request`]), the context as
/// `--max-model-len`, and the KV-cache element size from `--kv-dtype` (vLLM's fp8 cache is one
/// byte an element).
pub fn vllm_config(v: &VllmArgs, settings: &Settings) -> VllmConfig {
    let defaults = VllmConfig::for_settings(settings);
    VllmConfig {
        gpu_memory_utilization: v
            .gpu_memory_utilization
            .unwrap_or(defaults.gpu_memory_utilization),
        max_num_batched_tokens: v.max_num_batched_tokens,
        max_num_seqs: v.max_num_seqs,
        block_size: v.block_size,
        enforce_eager: v.enforce_eager,
        pp_layer_partition: (!v.pp_layer_partition.is_empty())
            .then(|| v.pp_layer_partition.clone()),
        cpu_offload_bytes: v.cpu_offload_gb.map_or(0, gib_bytes),
        tensor_parallel: v.tensor_parallel_size,
        // Checked where the plan starts (`vllm_speculative`'s usage errors).
        speculative: vllm_speculative(v).ok().flatten(),
        lora: v.enable_lora.then(|| VllmLora {
            max_loras: v.max_loras.unwrap_or(1),
            max_lora_rank: v.max_lora_rank.unwrap_or(16),
            max_cpu_loras: v.max_cpu_loras,
        }),
        // Checked where the plan starts (`check_vllm_vision`'s usage errors).
        multimodal: super::vllm_multimodal(v),
        ..defaults
    }
}

/// `--pp-layer-partition` must give every layer of a model of `layers` to a stage, as vLLM's
/// `get_pp_indices` requires of VLLM_PP_LAYER_PARTITION.
pub fn check_pp_layer_partition(v: &VllmArgs, layers: u64) -> Result<()> {
    let p = &v.pp_layer_partition;
    let sum: u64 = p.iter().sum();
    if !p.is_empty() && sum != layers {
        return Err(CliError::Usage(format!(
            "--pp-layer-partition gives {sum} layers; the model has {layers}"
        ))
        .into());
    }
    Ok(())
}

/// `--tensor-parallel-size` is vLLM's, must be a size vLLM accepts for the model (its
/// attention heads, KV heads and recurrent heads divide over the ranks), and needs that many
/// identical GPUs on one host among `candidates`.
pub fn check_tensor_parallel(
    v: &VllmArgs,
    arch: &model::ModelArch,
    candidates: &[Candidate],
    engine: Option<Engine>,
) -> Result<()> {
    let Some(tp) = v.tensor_parallel_size else {
        return Ok(());
    };
    // SGLang takes it as its own --tp-size (checked with it).
    if engine == Some(Engine::Sglang) {
        return Ok(());
    }
    if engine != Some(Engine::Vllm) {
        return Err(CliError::Usage(
            "--tensor-parallel-size is vLLM's: it needs --engine vllm or a model vLLM serves"
                .into(),
        )
        .into());
    }
    let largest = largest_gpu_group(candidates);
    if tp > largest {
        return Err(CliError::Usage(format!(
            "--tensor-parallel-size {tp} needs {tp} identical GPUs on one host; the most here \
             is {largest}"
        ))
        .into());
    }
    let why = match crate::plan::engines::vllm::accepts_tp(arch, tp) {
        Ok(()) => return Ok(()),
        Err(LayoutRejection::HeadsNotDivisible { heads }) => {
            format!("the model's {heads} attention heads")
        }
        Err(LayoutRejection::KvHeadsIncompatible { kv_heads }) => {
            format!("the model's {kv_heads} KV heads (or be a multiple of them)")
        }
        Err(LayoutRejection::RecurrentNotDivisible { heads }) => {
            format!("the model's {heads} recurrent heads and inner width")
        }
    };
    Err(CliError::Usage(format!(
        "--tensor-parallel-size {tp}: vLLM requires it to divide {why}"
    ))
    .into())
}
