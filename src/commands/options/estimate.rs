//! `estimate`'s engine-resolved settings, and the engines' own settings read from flags and
//! from their environment (Ollama's `OLLAMA_*`).

use anyhow::Result;

use super::{estimate_settings, names};
use crate::cli;
use crate::error::CliError;
use crate::model::{kv_precision, WeightFormat, KV_PRECISIONS};
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
    Ok(())
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
