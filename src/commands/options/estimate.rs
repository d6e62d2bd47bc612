//! `estimate`'s engine-resolved settings, and the engines' own settings read from flags and
//! from their environment (Ollama's `OLLAMA_*`).

use anyhow::Result;

use super::{estimate_settings, names};
use crate::cli;
use crate::error::CliError;
use crate::model::{kv_precision, WeightFormat, KV_PRECISIONS};
use crate::plan::engines::pytorch::training::{Lora, LoraTargets};
use crate::plan::engines::{self, Settings};

/// `estimate`'s settings: the shared flags, and `--engine transformers`' generation (an
/// inference figure: with `--mode train` a usage error).
pub fn estimate_command_settings(args: &cli::EstimateArgs) -> Result<Settings> {
    let mut settings = estimate_settings(&args.settings)?;
    let engine = estimate_engine(args);
    // The serving engines `estimate` plans on devices, as `select --engine` does.
    let planned = matches!(
        engine,
        cli::InferenceEngine::Vllm
            | cli::InferenceEngine::Sglang
            | cli::InferenceEngine::Ollama
            | cli::InferenceEngine::All
    );
    if engine == cli::InferenceEngine::Ollama {
        ollama_kv_type(&args.settings, &mut settings)?;
    }
    let train = settings.mode == engines::Mode::Train;
    if !args.device.is_empty() && (train || engine == cli::InferenceEngine::Transformers) {
        return Err(CliError::Usage(
            "--device is the GPUs an engine's need is planned on: give it with --engine vllm, \
             sglang or llama.cpp (`select --mode train --device` plans a training step)"
                .into(),
        )
        .into());
    }
    let name = engine_name(engine);
    if planned && train {
        return Err(CliError::Usage(format!(
            "--engine {name} serves; --mode train is PyTorch's training step: drop one"
        ))
        .into());
    }
    if planned && args.fits {
        return Err(CliError::Usage(format!(
            "--engine {name} already plans on the devices (--device, else this machine's); \
             --fits is for llama.cpp's and transformers' figures"
        ))
        .into());
    }
    let generate_feature = args.assistant_model.is_some()
        || args.adapter_rank.is_some()
        || args.adapter_config.is_some();
    if generate_feature && engine != cli::InferenceEngine::Transformers {
        return Err(CliError::Usage(
            "--assistant-model, --adapter-rank and --adapter-config are transformers' generate: \
             they need --engine transformers"
                .into(),
        )
        .into());
    }
    // `--engine all` plans its vLLM row with them.
    if let Some(flag) = super::vllm_flag_given(&args.vllm).filter(|_| {
        !matches!(
            engine,
            cli::InferenceEngine::Vllm | cli::InferenceEngine::All
        )
    }) {
        let sglang = if engine == cli::InferenceEngine::Sglang && flag == "--tensor-parallel-size" {
            " (SGLang takes --tp-size)"
        } else {
            ""
        };
        return Err(
            CliError::Usage(format!("{flag} is vLLM's: it needs --engine vllm{sglang}")).into(),
        );
    }
    if args.settings.sglang.tp_size.is_some() && engine != cli::InferenceEngine::Sglang {
        return Err(
            CliError::Usage("--tp-size is SGLang's: it needs --engine sglang".into()).into(),
        );
    }
    if !train {
        // Inference's figures are the engine's own account: no generic reserve unless asked.
        settings.overhead = args.settings.overhead.unwrap_or(0);
        settings.fragmentation_reserve = args.settings.fragmentation_reserve.unwrap_or(0.0);
    }
    if engine == cli::InferenceEngine::Transformers {
        transformers_settings(args, &mut settings)?;
    }
    if matches!(
        engine,
        cli::InferenceEngine::LlamaCpp | cli::InferenceEngine::All
    ) && !train
    {
        llamacpp_estimate_settings(args, &mut settings)?;
    }
    Ok(settings)
}

/// `--engine`'s value as written.
fn engine_name(engine: cli::InferenceEngine) -> &'static str {
    match engine {
        cli::InferenceEngine::LlamaCpp => "llama.cpp",
        cli::InferenceEngine::Transformers => "transformers",
        cli::InferenceEngine::Vllm => "vllm",
        cli::InferenceEngine::Sglang => "sglang",
        cli::InferenceEngine::Ollama => "ollama",
        cli::InferenceEngine::All => "all",
    }
}

/// The engine whose inference `estimate` counts: `--engine`, else llama.cpp's.
pub fn estimate_engine(args: &cli::EstimateArgs) -> cli::InferenceEngine {
    args.engine.unwrap_or(cli::InferenceEngine::LlamaCpp)
}

/// `estimate --engine transformers`: generate's walk is bf16's.
fn transformers_settings(args: &cli::EstimateArgs, settings: &mut Settings) -> Result<()> {
    if settings.mode == engines::Mode::Train {
        return Err(CliError::Usage(
            "--engine transformers estimates generation; --mode train is PyTorch's training \
             step already"
                .into(),
        )
        .into());
    }
    // The walk of generate is bf16's (f16 weighs the same); another precision would be
    // estimated in bf16 under its name.
    if let Some(p) = settings.dtype.filter(|p| !matches!(p.name, "bf16" | "f16")) {
        let gguf = if p.weight_format() == WeightFormat::GgufOnly {
            " (a GGUF type, which llama.cpp runs)"
        } else {
            ""
        };
        return Err(CliError::Usage(format!(
            "--engine transformers walks generate in bf16, not --dtype {}{gguf}: give \
             --dtype bf16 or f16, or drop --engine transformers",
            p.name
        ))
        .into());
    }
    settings.pytorch.generate_new_tokens = Some(u64::from(args.new_tokens));
    settings.pytorch.generate_lora = generate_lora(args)?;
    if args.assistant_model.is_some() && settings.batch != 1 {
        return Err(CliError::Usage(format!(
            "transformers' assisted generation runs one sequence (it refuses batch {}): give \
             --batch 1 with --assistant-model",
            settings.batch
        ))
        .into());
    }
    Ok(())
}

/// `--adapter-rank` with `--adapter-targets`, or `--adapter-config`'s `r` and `target_modules`.
fn generate_lora(args: &cli::EstimateArgs) -> Result<Option<Lora>> {
    if let Some(rank) = args.adapter_rank {
        let targets = match args.adapter_targets {
            cli::AdapterTargets::QV => LoraTargets::QUERY_VALUE,
            cli::AdapterTargets::Attention => LoraTargets::ATTENTION,
            cli::AdapterTargets::AllLinear => LoraTargets::ALL_LINEAR,
        };
        return Ok(Some(Lora { rank, targets }));
    }
    let Some(path) = &args.adapter_config else {
        return Ok(None);
    };
    let bad = |why: String| CliError::Usage(format!("--adapter-config {}: {why}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let config: AdapterConfig = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    if config.peft_type.as_deref().is_some_and(|t| t != "LORA") {
        return Err(bad(format!(
            "a {} adapter, not LoRA",
            config.peft_type.unwrap_or_default()
        ))
        .into());
    }
    let rank = u32::try_from(config.r)
        .ok()
        .filter(|r| *r > 0)
        .ok_or_else(|| bad(format!("rank {} is not a LoRA rank", config.r)))?;
    let targets = match config.target_modules {
        TargetModules::One(name) if name == "all-linear" => LoraTargets::ALL_LINEAR,
        TargetModules::One(name) => targets_of(std::slice::from_ref(&name)).map_err(bad)?,
        TargetModules::Many(names) => targets_of(&names).map_err(bad)?,
    };
    Ok(Some(Lora { rank, targets }))
}

/// The parts of PEFT's adapter_config.json the walk reads.
#[derive(serde::Deserialize)]
struct AdapterConfig {
    peft_type: Option<String>,
    r: u64,
    target_modules: TargetModules,
}

/// `target_modules`: module names, or one name (PEFT's `all-linear`).
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum TargetModules {
    One(String),
    Many(Vec<String>),
}

/// The decoder projections `names` target; a name the walk does not know is refused.
fn targets_of(names: &[String]) -> std::result::Result<LoraTargets, String> {
    let mut t = LoraTargets {
        q: false,
        k: false,
        v: false,
        o: false,
        gate: false,
        up: false,
        down: false,
    };
    for name in names {
        let slot = match name.as_str() {
            "q_proj" => &mut t.q,
            "k_proj" => &mut t.k,
            "v_proj" => &mut t.v,
            "o_proj" => &mut t.o,
            "gate_proj" => &mut t.gate,
            "up_proj" => &mut t.up,
            "down_proj" => &mut t.down,
            other => {
                return Err(format!(
                    "target module {other:?} is not one of a Llama-style layer's projections \
                     (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj)"
                ))
            }
        };
        *slot = true;
    }
    Ok(t)
}

/// llama.cpp's inference as llama-server runs it: `-fa auto` (on: every backend gpumem models
/// supports it) unless `--flash-attn off`; a quantized V cache needs it.
fn llamacpp_estimate_settings(args: &cli::EstimateArgs, settings: &mut Settings) -> Result<()> {
    let off = args.flash_attn == cli::FlashAttnArg::Off;
    if off && args.settings.flash_attention {
        return Err(CliError::Usage(
            "--flash-attention and --flash-attn off contradict each other: drop one".into(),
        )
        .into());
    }
    settings.flash_attention = !off;
    if settings.kv_dtype.block_elems > 1 && off {
        return Err(CliError::Usage(format!(
            "llama.cpp quantizes the V cache only with flash attention: --kv-dtype {} needs \
             --flash-attn on or auto",
            settings.kv_dtype.name
        ))
        .into());
    }
    Ok(())
}

/// `OLLAMA_KV_CACHE_TYPE` as the KV-cache type where `--kv-dtype` is not given (Ollama passes
/// it to llama-server as `--cache-type-k/v`).
pub fn ollama_kv_type(args: &cli::WorkloadSettings, settings: &mut Settings) -> Result<()> {
    let Some(v) = std::env::var("OLLAMA_KV_CACHE_TYPE")
        .ok()
        .filter(|v| !v.trim().is_empty() && args.kv_dtype.is_none())
    else {
        return Ok(());
    };
    settings.kv_dtype = kv_precision(v.trim()).ok_or_else(|| {
        CliError::Usage(format!(
            "OLLAMA_KV_CACHE_TYPE={v:?} is not a cache type; expected one of {}",
            names(KV_PRECISIONS)
        ))
    })?;
    settings.kv_dtype_auto = false;
    Ok(())
}

/// Ollama's settings: `--context` (else `OLLAMA_CONTEXT_LENGTH`), `--parallel` (else
/// `OLLAMA_NUM_PARALLEL`), `OLLAMA_FLASH_ATTENTION`, `--gpu-overhead` (else
/// `OLLAMA_GPU_OVERHEAD`), as Ollama reads its environment; a malformed one is a usage error.
pub(super) fn ollama_run(args: &cli::WorkloadSettings) -> Result<engines::ollama::OllamaRun> {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let number = |name: &str| -> Result<Option<u64>> {
        env(name)
            .map(|v| {
                v.trim().parse::<u64>().map_err(|_| {
                    CliError::Usage(format!("{name}={v:?} is not a whole number")).into()
                })
            })
            .transpose()
    };
    let flash_attention = match env("OLLAMA_FLASH_ATTENTION").as_deref().map(str::trim) {
        None => None,
        Some("1" | "true" | "TRUE" | "True" | "t" | "T") => Some(true),
        Some("0" | "false" | "FALSE" | "False" | "f" | "F") => Some(false),
        Some(v) => {
            return Err(CliError::Usage(format!(
                "OLLAMA_FLASH_ATTENTION={v:?} is not a boolean (1, true, 0, false)"
            ))
            .into())
        }
    };
    Ok(engines::ollama::OllamaRun {
        num_ctx: match args.context {
            Some(c) => Some(u64::from(c)),
            None => number("OLLAMA_CONTEXT_LENGTH")?.filter(|&n| n > 0),
        },
        num_parallel: match args.ollama.parallel {
            Some(n) => Some(n),
            None => number("OLLAMA_NUM_PARALLEL")?.filter(|&n| n > 0),
        },
        flash_attention,
        gpu_overhead: match args.ollama.gpu_overhead {
            Some(b) => b,
            None => number("OLLAMA_GPU_OVERHEAD")?.unwrap_or(0),
        },
    })
}
