//! The one place where command-line values become library options and presets.
//!
//! Every subcommand's flags pass through here once (ripgrep's "flags converted once"): the
//! command modules then orchestrate library calls with the typed options and never look at a
//! clap type again. A malformed combination of flags is a [`CliError::Usage`] from here.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;

mod bench;
mod estimate;
mod vllm;
mod vllm_mm;
pub use bench::*;
pub use estimate::*;
pub use vllm::*;
pub use vllm_mm::*;

use crate::alloc::MemoryConfig;
use crate::backend::{BackendKind, DeviceSpec, DiscoverOptions, Isolation};
use crate::cli::{self, DiscoverArgs, SelectArgs, StressArgs};
use crate::error::CliError;
use crate::model::{
    self, kv_precision, weight_precision, SourceSpec, WeightFormat, KV_F16, KV_PRECISIONS,
    WEIGHT_PRECISIONS,
};
use crate::plan::engines::llamacpp::LlamaCppRun;
use crate::plan::engines::pytorch::training::{
    AttnImplementation, Ddp, DeepSpeed, Fsdp, Lora, LoraTargets, Recipe, ZeroStage,
};
use crate::plan::engines::pytorch::PytorchRun;
use crate::plan::engines::LlamaCppConfig;
use crate::plan::engines::{self, Settings};
use crate::plan::launch::{Engine, ModelRef};
use crate::plan::{Candidate, Policy};
use crate::workload::stress::{StressOptions, StressPhase};

/// How long device discovery may take when a command other than `discover` needs it.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// `discover`'s backends and timeout.
pub fn discover_options(args: &DiscoverArgs) -> DiscoverOptions {
    DiscoverOptions {
        only: args.backends.clone(),
        timeout: args.timeout,
        isolation: Isolation::current_exe(),
        cancel: None,
    }
}

/// Every backend, under `timeout`, each driver probed in a child process.
pub fn probe_all(timeout: Duration) -> DiscoverOptions {
    DiscoverOptions {
        only: Vec::new(),
        timeout,
        isolation: Isolation::current_exe(),
        cancel: None,
    }
}

/// [`probe_all`] for a command that handles SIGINT and SIGTERM itself: the probes and the
/// device's open stop waiting as soon as `interrupt` is set.
pub fn probe_all_until(
    timeout: Duration,
    interrupt: &std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> DiscoverOptions {
    DiscoverOptions {
        cancel: Some(interrupt.clone()),
        ..probe_all(timeout)
    }
}

/// What `select` places: `--bytes`, or the model its source flags name.
pub enum SelectWhat {
    /// `--bytes SIZE`.
    Bytes(u64),
    /// A model and how to estimate it.
    Model(SourceSpec, Box<Settings>),
}

/// `select`'s demand (`--bytes` or a model; one is required).
pub fn select_what(args: &SelectArgs) -> Result<SelectWhat> {
    match (args.bytes, model_source(&args.source)) {
        (Some(bytes), _) => Ok(SelectWhat::Bytes(bytes)),
        (None, Some(spec)) => Ok(SelectWhat::Model(
            spec,
            Box::new(estimate_settings(&args.settings)?),
        )),
        (None, None) => Err(CliError::Usage(
            "give --bytes SIZE or a model (--model, --config, --gguf, --safetensors)".into(),
        )
        .into()),
    }
}

/// `select --device sim:SIZE …`: the simulated GPUs to plan over (real devices are discovered).
pub fn select_sim_devices(args: &SelectArgs) -> Result<Vec<Candidate>> {
    let mut sims = sim_devices(&args.device)?;
    sims.extend(args.ram.map(Candidate::sim_ram));
    Ok(sims)
}

/// `--device sim:SIZE` or `sim:GPU`, each a simulated GPU; any other device is refused (real
/// devices are discovered).
pub fn sim_devices(devices: &[DeviceSpec]) -> Result<Vec<Candidate>> {
    devices
        .iter()
        .enumerate()
        .map(|(i, d)| match d {
            DeviceSpec::Sim { capacity, gpu } => {
                Ok(gpu.and_then(crate::backend::known_gpu).map_or_else(
                    || Candidate::sim(i, *capacity),
                    |g| Candidate::sim_gpu(i, g),
                ))
            }
            other => Err(CliError::Usage(format!(
                "--device takes sim:SIZE or sim:GPU here (got {other}); real devices are \
                 discovered"
            ))
            .into()),
        })
        .collect::<Result<Vec<_>>>()
}

/// Tokens of context a sequence when `--context` is not given.
const DEFAULT_CONTEXT: u32 = 4096;

/// `--suggest-dtype` re-quantizes a checkpoint; a GGUF (by path, Hub id or Ollama name) is
/// loaded in its own types whatever `--dtype` says, so there is nothing to choose.
pub fn check_suggest_dtype(args: &SelectArgs, source: &crate::model::ModelSource) -> Result<()> {
    if args.suggest_dtype && source.kind == crate::model::SourceKind::Gguf {
        return Err(CliError::Usage(format!(
            "--suggest-dtype chooses a precision to quantize a checkpoint to; {} is a GGUF, \
             loaded in its own types: pick another of its quantizations instead",
            source.name
        ))
        .into());
    }
    Ok(())
}

/// A context past the model's trained length is a different question from memory: named so,
/// with the longest it takes, unless `--allow-longer-context`.
pub fn check_context(
    name: &str,
    arch: &crate::model::ModelArch,
    settings: &Settings,
    args: &cli::WorkloadSettings,
) -> Result<()> {
    // The default (4,096) is llama-server's own, which runs past a shorter trained length with
    // a warning; only a context asked for is held to it.
    match arch.max_position_embeddings {
        Some(trained)
            if args.context.is_some()
                && settings.context > trained
                && !args.allow_longer_context =>
        {
            Err(CliError::Usage(format!(
                "--context {} is past {name}'s trained context of {} tokens \
                 (max_position_embeddings): give --context {trained} or less, or \
                 --allow-longer-context",
                crate::output::thousands(settings.context),
                crate::output::thousands(trained),
            ))
            .into())
        }
        _ => Ok(()),
    }
}

/// `estimate`'s model source (one is required unless `--list-models`).
pub fn estimate_source(args: &cli::EstimateArgs) -> Result<SourceSpec> {
    Ok(model_source(&args.source).ok_or_else(|| {
        CliError::Usage(
            "one of --model, --config, --gguf or --safetensors is required (or --list-models)"
                .into(),
        )
    })?)
}

/// `stress` checks data integrity, which a simulated device does not hold.
pub fn check_stress_device(spec: &DeviceSpec) -> Result<()> {
    if matches!(spec, DeviceSpec::Sim { .. }) {
        return Err(CliError::Usage(
            "stress checks data integrity, and sim:SIZE holds no data; use host:SIZE or a real \
             device"
                .into(),
        )
        .into());
    }
    Ok(())
}

/// How model sources are read (`--allow-generic`, `--mmproj`, `--image-max-tokens`).
pub fn load_options(args: &cli::WorkloadSettings) -> model::LoadOptions {
    model::LoadOptions {
        allow_generic: args.allow_generic,
        projector: args.mmproj.clone(),
        offline: args.offline,
        image_max_tokens: args.image_max_tokens,
    }
}

/// The model source the flags name, if any.
pub fn model_source(args: &cli::ModelSourceArgs) -> Option<SourceSpec> {
    if let Some(name) = &args.model {
        Some(SourceSpec::Catalog(name.clone()))
    } else if let Some(p) = &args.config {
        Some(SourceSpec::Config(p.clone()))
    } else if let Some(p) = &args.gguf {
        Some(SourceSpec::Gguf(p.clone()))
    } else {
        args.safetensors
            .as_ref()
            .map(|p| SourceSpec::Safetensors(p.clone()))
    }
}

fn names(table: &[model::Precision]) -> String {
    table.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
}

/// `--overhead`'s default: the CUDA context and PyTorch's cuBLAS workspaces beside a training
/// step, and the generic rule's reserve.
const DEFAULT_OVERHEAD: u64 = 500 << 20;

/// `--fragmentation-reserve`'s default, in percent: PyTorch's caching allocator reserved up to
/// 1.09× its peak over the training steps recorded on an H200 (tests/fixtures/pytorch-gpu/).
const DEFAULT_FRAGMENTATION: f64 = 10.0;

/// The precision and workload flags of `estimate` and `select`; an unknown dtype is a usage
/// error.
pub fn estimate_settings(args: &cli::WorkloadSettings) -> Result<Settings> {
    let deepspeed = training_flags(args)?;
    let dtype = match &args.dtype {
        None => None,
        Some(name) => Some(weight_precision(name).ok_or_else(|| {
            CliError::Usage(format!(
                "unknown --dtype '{name}'; expected one of {}",
                names(WEIGHT_PRECISIONS)
            ))
        })?),
    };
    // A GGUF type is llama.cpp's: a training step loads a checkpoint (a recipe picks its
    // precision), so it would silently become another recipe.
    if let Some(p) = dtype.filter(|p| p.weight_format() == WeightFormat::GgufOnly) {
        if args.mode == cli::Mode::Train {
            return Err(CliError::Usage(format!(
                "--dtype {} is a GGUF type, which llama.cpp runs; a training step loads a \
                 checkpoint: give --dtype bf16, f16 or f32, or --recipe qlora for 4-bit layers",
                p.name
            ))
            .into());
        }
    }
    let kv_name = args.kv_dtype.as_deref().unwrap_or(KV_F16.name);
    let kv_dtype = kv_precision(kv_name).ok_or_else(|| {
        CliError::Usage(format!(
            "unknown --kv-dtype '{kv_name}'; expected one of {}",
            names(KV_PRECISIONS)
        ))
    })?;
    Ok(Settings {
        dtype,
        kv_dtype,
        kv_dtype_auto: args.kv_dtype.is_none(),
        batch: u64::from(args.batch),
        context: u64::from(args.context.unwrap_or(DEFAULT_CONTEXT)),
        ubatch: u64::from(args.ubatch),
        flash_attention: args.flash_attention,
        overhead: args.overhead.unwrap_or(DEFAULT_OVERHEAD),
        fragmentation_reserve: args.fragmentation_reserve.unwrap_or(DEFAULT_FRAGMENTATION),
        mode: match args.mode {
            cli::Mode::Infer => engines::Mode::Infer,
            cli::Mode::Train => engines::Mode::Train,
        },
        llamacpp: LlamaCppRun {
            swa_full: args.swa_full,
            ..LlamaCppRun::default()
        },
        pytorch: pytorch_run(args, deepspeed),
        generate_assistant: None,
        ollama: ollama_run(args)?,
        sglang: sglang_run(args),
    })
}

/// The training-only flags, refused outside `--mode train` or without what they need; the
/// DeepSpeed stage and ranks asked for.
fn training_flags(args: &cli::WorkloadSettings) -> Result<Option<(ZeroStage, u64)>> {
    if args.fsdp.is_some() && args.mode != cli::Mode::Train {
        return Err(
            CliError::Usage("--fsdp shards a training step: add --mode train".into()).into(),
        );
    }
    if args.attn_implementation.is_some() && args.mode != cli::Mode::Train {
        return Err(CliError::Usage(
            "--attn-implementation is transformers' under training: add --mode train".into(),
        )
        .into());
    }
    if args.ddp && args.mode != cli::Mode::Train {
        return Err(CliError::Usage(
            "--ddp is a training step's data parallelism: add --mode train".into(),
        )
        .into());
    }
    let deepspeed = match (
        args.deepspeed_zero1,
        args.deepspeed_zero2,
        args.deepspeed_zero3,
    ) {
        (Some(n), _, _) => Some((ZeroStage::One, u64::from(n))),
        (None, Some(n), _) => Some((ZeroStage::Two, u64::from(n))),
        (None, None, Some(n)) => Some((ZeroStage::Three, u64::from(n))),
        (None, None, None) => None,
    };
    if let Some((stage, _)) = deepspeed.filter(|_| args.mode != cli::Mode::Train) {
        return Err(CliError::Usage(format!(
            "--deepspeed-zero{} is a training step's data parallelism: add --mode train",
            stage.number()
        ))
        .into());
    }
    if args.offload_optimizer && deepspeed.is_none() {
        return Err(CliError::Usage(
            "--offload-optimizer is DeepSpeed's ZeRO-Offload: add --deepspeed-zero1, 2 or 3 N"
                .into(),
        )
        .into());
    }
    if args.no_reshard_after_forward && args.fsdp.is_none() {
        return Err(CliError::Usage(
            "--no-reshard-after-forward is an FSDP2 setting: add --fsdp N".into(),
        )
        .into());
    }
    Ok(deepspeed)
}

/// SGLang's run settings from its flags.
fn sglang_run(args: &cli::WorkloadSettings) -> engines::sglang::SglangRun {
    engines::sglang::SglangRun {
        mem_fraction_static: args.sglang.mem_fraction_static,
        tp_size: args.sglang.tp_size,
        max_running_requests: args.sglang.max_running_requests,
        chunked_prefill_size: args.sglang.chunked_prefill_size,
        max_total_tokens: args.sglang.max_total_tokens,
        disable_cuda_graph: args.sglang.disable_cuda_graph,
        speculative: args.sglang.speculative_algorithm.map(|a| match a {
            cli::SpecAlgorithmArg::Eagle => engines::sglang::SpecAlgorithm::Eagle,
            cli::SpecAlgorithmArg::Eagle3 => engines::sglang::SpecAlgorithm::Eagle3,
            cli::SpecAlgorithmArg::Mtp => engines::sglang::SpecAlgorithm::Mtp,
            cli::SpecAlgorithmArg::Ngram => engines::sglang::SpecAlgorithm::Ngram,
        }),
        draft_model: args.sglang.speculative_draft_model_path.clone(),
    }
}
/// PyTorch's settings from the training flags (checked for their mode by the caller).
fn pytorch_run(args: &cli::WorkloadSettings, deepspeed: Option<(ZeroStage, u64)>) -> PytorchRun {
    let lora = Lora {
        rank: args.lora_rank,
        targets: match args.lora_targets {
            cli::LoraTargets::AllLinear => LoraTargets::ALL_LINEAR,
            cli::LoraTargets::Attention => LoraTargets::ATTENTION,
        },
    };
    PytorchRun {
        optimizer: match args.optimizer {
            cli::Optimizer::Adam => engines::pytorch::training::Optimizer::Adam,
            cli::Optimizer::Adamw => engines::pytorch::training::Optimizer::Adamw,
            cli::Optimizer::Sgd => engines::pytorch::training::Optimizer::Sgd,
            cli::Optimizer::Adamw8bit => engines::pytorch::training::Optimizer::Adamw8bit,
            cli::Optimizer::Adafactor => engines::pytorch::training::Optimizer::Adafactor,
        },
        // PEFT's prepare_model_for_kbit_training (use_gradient_checkpointing=True) under
        // QLoRA; HF Trainer's gradient_checkpointing=False otherwise.
        checkpointing: args.checkpointing
            || (args.recipe == Some(cli::Recipe::Qlora) && !args.no_checkpointing),
        grad_accum: u64::from(args.grad_accum),
        attention: match args.attn_implementation {
            None => AttnImplementation::Auto,
            Some(cli::AttnImplementationArg::Sdpa) => AttnImplementation::Sdpa,
            Some(cli::AttnImplementationArg::Eager) => AttnImplementation::Eager,
        },
        // An f32 master copy on one GPU is FSDP2 over that GPU (`TrainingRun::as_walked`):
        // planned and launched so.
        fsdp: args
            .fsdp
            .map(u64::from)
            .or(
                (args.recipe == Some(cli::Recipe::Mixed) && !args.ddp && deepspeed.is_none())
                    .then_some(1),
            )
            .map(|world| Fsdp {
                world,
                reshard_after_forward: !args.no_reshard_after_forward,
            }),
        ddp: args.ddp.then_some(Ddp {
            bucket_view: args.ddp_bucket_view,
            zero1: args.zero1.map(u64::from),
        }),
        deepspeed: deepspeed.map(|(stage, world)| DeepSpeed {
            world,
            stage,
            offload_optimizer: args.offload_optimizer,
        }),
        generate_new_tokens: None,
        generate_lora: None,
        recipe: args.recipe.map(|r| match r {
            cli::Recipe::Bf16 => Recipe::Bf16,
            cli::Recipe::Fp32Autocast => Recipe::Fp32Autocast,
            cli::Recipe::Mixed => Recipe::MixedFp32Master,
            cli::Recipe::Lora => Recipe::Lora(lora),
            cli::Recipe::Qlora => Recipe::Qlora(lora),
        }),
    }
}

/// The engines `select` prints launch commands for: those named, else every one that can load
/// `model`.
pub fn select_engines(args: &SelectArgs, model: &ModelRef) -> Vec<Engine> {
    if args.engines.is_empty() {
        return model.engines();
    }
    args.engines
        .iter()
        .map(|e| match e {
            cli::EngineArg::LlamaCpp => Engine::LlamaCpp,
            cli::EngineArg::Vllm => Engine::Vllm,
            cli::EngineArg::Sglang => Engine::Sglang,
            cli::EngineArg::Ollama => Engine::Ollama,
        })
        .collect()
}

/// `select`'s llama.cpp settings; `--fit-context` asks for llama.cpp's own fit of the context,
/// which only llama.cpp's plan makes.
pub fn select_llamacpp_config(args: &SelectArgs, engine: Option<Engine>) -> Result<LlamaCppConfig> {
    let l = &args.llamacpp;
    if l.fit_context && engine != Some(Engine::LlamaCpp) {
        return Err(CliError::Usage(
            "--fit-context is llama.cpp's fit of the context: it needs a GGUF model or --engine \
             llama.cpp"
                .into(),
        )
        .into());
    }
    let set = [
        (l.flash_attn != cli::FlashAttnArg::Auto, "--flash-attn"),
        (l.no_op_offload, "--no-op-offload"),
        (l.split_mode != cli::SplitModeArg::Layer, "--split-mode"),
    ];
    if let Some((_, flag)) = set
        .iter()
        .find(|(given, _)| *given && engine != Some(Engine::LlamaCpp))
    {
        return Err(CliError::Usage(format!(
            "{flag} is llama.cpp's: it needs a GGUF model or --engine llama.cpp"
        ))
        .into());
    }
    check_llamacpp_types(args, engine)?;
    if l.split_mode == cli::SplitModeArg::Row {
        // Only SYCL and Hexagon devices export ggml_backend_split_buffer_type at llama.cpp's
        // vendored commit; measured on ggml-rpc-server devices, read from ggml-cuda's source.
        return Err(CliError::Usage(
            "llama.cpp has no row split on CUDA, ROCm, Vulkan, Metal or RPC devices (it stops \
             with \"device CUDA0 does not support split buffers\"): give --split-mode layer or \
             none"
                .into(),
        )
        .into());
    }
    if args.settings.flash_attention && l.flash_attn == cli::FlashAttnArg::Off {
        return Err(CliError::Usage(
            "--flash-attention and --flash-attn off contradict each other".into(),
        )
        .into());
    }
    Ok(LlamaCppConfig {
        fit_ctx_min: l.fit_context.then_some(l.fit_ctx_min),
        device: l.llamacpp_device.map(|d| match d {
            cli::LlamaDeviceArg::Cuda => crate::plan::engines::llamacpp::LlamaDevice::Cuda,
            cli::LlamaDeviceArg::CpuRules => crate::plan::engines::llamacpp::LlamaDevice::CpuRules,
            cli::LlamaDeviceArg::Vulkan => crate::plan::engines::llamacpp::LlamaDevice::Vulkan(
                crate::device::VulkanLimits::UNSEEN,
            ),
            cli::LlamaDeviceArg::Metal => crate::plan::engines::llamacpp::LlamaDevice::Metal,
        }),
        flash_attention_off: l.flash_attn == cli::FlashAttnArg::Off,
        no_op_offload: l.no_op_offload,
        one_gpu: l.split_mode == cli::SplitModeArg::None,
        // Read by the command (`select_draft`), which loads it.
        draft: None,
        // The model's own, which the command loads with it.
        projector: None,
        // Read by the command (`select_lora`), which loads them.
        lora: Vec::new(),
        fit_margin: fit_target(l.fit_target, std::env::var("LLAMA_ARG_FIT_TARGET").ok())?
            .map(|mib| mib << 20),
    })
}

/// `--fit-target MiB`, else `LLAMA_ARG_FIT_TARGET` as llama.cpp parses it (MiB, one value for
/// every device, or one a device split by `,` or `/`): one margin, the same on every GPU.
fn fit_target(flag: Option<u64>, env: Option<String>) -> Result<Option<u64>> {
    if flag.is_some() {
        return Ok(flag);
    }
    let Some(text) = env.filter(|t| !t.trim().is_empty()) else {
        return Ok(None);
    };
    let bad = |why: &str| -> anyhow::Error {
        CliError::Usage(format!("LLAMA_ARG_FIT_TARGET={}: {why}", text.trim())).into()
    };
    let values = text
        .split([',', '/'])
        .filter(|v| !v.is_empty())
        .map(|v| v.trim().parse::<u64>().ok().filter(|&m| m <= 1 << 24))
        .collect::<Option<Vec<u64>>>()
        .ok_or_else(|| bad("give the margin in MiB, e.g. 1024"))?;
    match values.split_first() {
        Some((first, rest)) if rest.iter().all(|v| v == first) => Ok(Some(*first)),
        Some(_) => Err(bad(
            "gpumem plans one margin for every GPU; give --fit-target MiB",
        )),
        None => Err(bad("give the margin in MiB, e.g. 1024")),
    }
}

/// `select --lora`: llama.cpp's only (vLLM serves adapters through --enable-lora).
pub fn select_lora(args: &SelectArgs, engine: Option<Engine>) -> Result<Vec<std::path::PathBuf>> {
    let files = &args.llamacpp.lora;
    if !files.is_empty() && engine != Some(Engine::LlamaCpp) {
        return Err(CliError::Usage(
            "--lora is llama.cpp's: it needs a GGUF model or --engine llama.cpp; vLLM takes \
             --enable-lora --max-loras --max-lora-rank"
                .into(),
        )
        .into());
    }
    Ok(files.clone())
}

/// `--model-draft` and its settings, read by `select` before it loads the draft.
#[derive(Debug, Clone)]
pub struct DraftRequest {
    /// The draft: a GGUF file, or a name the Hub resolves (`ORG/NAME:QUANT`).
    pub spec: SourceSpec,
    /// `--spec-draft-n-max`.
    pub n_max: u64,
    /// `-ngld` (`None`: all).
    pub n_gpu_layers: Option<u64>,
}

/// `select --model-draft`: llama.cpp's only (vLLM and SGLang take theirs in their own flags).
pub fn select_draft(args: &SelectArgs, engine: Option<Engine>) -> Result<Option<DraftRequest>> {
    let l = &args.llamacpp;
    let Some(draft) = &l.model_draft else {
        return Ok(None);
    };
    if engine != Some(Engine::LlamaCpp) {
        return Err(CliError::Usage(
            "--model-draft is llama.cpp's (-md): it needs a GGUF model or --engine llama.cpp; \
             vLLM takes --speculative-config, SGLang --speculative-algorithm"
                .into(),
        )
        .into());
    }
    let path = std::path::Path::new(draft);
    let is_file = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
        || path.is_file();
    Ok(Some(DraftRequest {
        spec: if is_file {
            SourceSpec::Gguf(path.to_path_buf())
        } else {
            SourceSpec::Catalog(draft.clone())
        },
        n_max: l.spec_draft_n_max,
        n_gpu_layers: l.gpu_layers_draft,
    }))
}

/// llama.cpp's types: no fp8 weights (GGUF has none) or cache, and V quantized only under
/// flash attention (`llama_init_from_model` refuses a quantized V cache with `-fa off`).
fn check_llamacpp_types(args: &SelectArgs, engine: Option<Engine>) -> Result<()> {
    let weights = args.settings.dtype.as_deref().and_then(weight_precision);
    // The weight types of other engines' checkpoints, which no GGUF holds.
    let foreign = weights.filter(|w| w.weight_format() == WeightFormat::CheckpointOnly);
    if let Some(w) = foreign.filter(|_| engine == Some(Engine::LlamaCpp)) {
        return Err(CliError::Usage(format!(
            "llama.cpp has no {} weights (not a GGUF type): give --dtype q8_0, q4_k_m or another \
             GGUF type",
            w.name
        ))
        .into());
    }
    let kv = args.settings.kv_dtype.as_deref().and_then(kv_precision);
    let Some(kv) = kv.filter(|_| engine == Some(Engine::LlamaCpp)) else {
        return Ok(());
    };
    if kv.name == "fp8" {
        return Err(CliError::Usage(
            "llama.cpp has no fp8 KV cache: give --kv-dtype f16, bf16, f32, q8_0 or q4_0".into(),
        )
        .into());
    }
    if kv.block_elems > 1 && args.llamacpp.flash_attn == cli::FlashAttnArg::Off {
        return Err(CliError::Usage(format!(
            "llama.cpp quantizes the V cache only with flash attention: --kv-dtype {} needs \
             --flash-attn on or auto",
            kv.name
        ))
        .into());
    }
    Ok(())
}

/// `GIB` GiB in bytes, rounded down (vLLM takes `int(cpu_offload_gb * 1024**3)`).
#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "parse_gib keeps the value finite, non-negative and below 2^34 GiB"
)]
fn gib_bytes(gib: f64) -> u64 {
    (gib * f64::from(1u32 << 30)) as u64
}

/// SGLang's `--tp-size` (`--tp`, or `--tensor-parallel-size` under `--engine sglang`): the
/// ranks asked for, checked as SGLang checks them; `None` when not asked.
pub fn sglang_tp(
    args: &SelectArgs,
    arch: &model::ModelArch,
    candidates: &[Candidate],
    engine: Option<Engine>,
) -> Result<Option<u64>> {
    let asked = args.settings.sglang.tp_size;
    let sglang = engine == Some(Engine::Sglang);
    if asked.is_some() && !sglang {
        return Err(
            CliError::Usage("--tp-size is SGLang's: it needs --engine sglang".into()).into(),
        );
    }
    let Some(tp) = asked.or(args.vllm.tensor_parallel_size.filter(|_| sglang)) else {
        return Ok(None);
    };
    let largest = largest_gpu_group(candidates);
    if tp > largest {
        return Err(CliError::Usage(format!(
            "--tp-size {tp} needs {tp} identical GPUs on one host; the most here is {largest}"
        ))
        .into());
    }
    let kv = arch.num_kv_heads;
    if arch.num_heads % tp != 0 {
        return Err(CliError::Usage(format!(
            "--tp-size {tp}: SGLang requires it to divide the model's {} attention heads",
            arch.num_heads
        ))
        .into());
    }
    if kv > 0 && kv % tp != 0 && tp % kv != 0 {
        return Err(CliError::Usage(format!(
            "--tp-size {tp}: SGLang requires it to divide the model's {kv} KV heads (or be a \
             multiple of them)"
        ))
        .into());
    }
    Ok(Some(tp))
}

/// The most identical GPUs (one backend, name and size) any host has among `candidates`.
fn largest_gpu_group(candidates: &[Candidate]) -> u64 {
    let gpus: Vec<&Candidate> = candidates
        .iter()
        .filter(|c| c.is_gpu() && c.mig_profile.is_none())
        .collect();
    gpus.iter()
        .map(|a| {
            gpus.iter()
                .filter(|b| {
                    a.host == b.host
                        && a.backend == b.backend
                        && a.name == b.name
                        && a.total_bytes == b.total_bytes
                })
                .count() as u64
        })
        .max()
        .unwrap_or(0)
}

/// `select`'s usable-memory rule and preference.
pub fn select_policy(args: &SelectArgs) -> Policy {
    Policy {
        prefer: match args.prefer {
            cli::Preference::Auto => None,
            cli::Preference::Cuda => Some(BackendKind::Cuda),
            cli::Preference::Rocm => Some(BackendKind::Rocm),
            cli::Preference::Metal => Some(BackendKind::Metal),
            cli::Preference::Opencl => Some(BackendKind::Opencl),
            cli::Preference::Vulkan => Some(BackendKind::Vulkan),
            cli::Preference::Cpu => Some(BackendKind::Cpu),
        },
        memory_fraction: args.memory_fraction,
        min_free: args.min_free,
        driver_reserve: args.driver_reserve,
        context_reserve: args.context_reserve,
        reserve_fraction: args.reserve_fraction,
        reserve_cap: args.reserve_cap,
    }
}

/// `stress`'s pool: tracking on (the leak check needs it), CPU fallback unless turned off,
/// `--max-pool`, then the `GPUMEM_*` overrides.
pub fn stress_pool_config(args: &StressArgs, spec: &DeviceSpec) -> Result<MemoryConfig> {
    let mut config = bench::whole_budget(
        MemoryConfig::default()
            .with_tracking(true)
            .with_cpu_fallback(!args.no_cpu_fallback),
        spec,
    );
    if let Some(max) = args.max_pool {
        if max == 0 {
            return Err(CliError::Usage("--max-pool must be greater than zero".into()).into());
        }
        config = config.with_max_pool_bytes(max);
    }
    Ok(config.with_env_overrides()?)
}

/// `stress`'s phases (all when none are named; each once, in running order), threads and
/// sizes. `interrupt` is the flag Ctrl-C sets.
pub fn stress_options(args: &StressArgs, interrupt: Arc<AtomicBool>) -> StressOptions {
    let mut phases: Vec<StressPhase> = if args.phases.is_empty() {
        vec![
            StressPhase::Ramp,
            StressPhase::Exhaust,
            StressPhase::Churn,
            StressPhase::Recover,
        ]
    } else {
        args.phases
            .iter()
            .map(|p| match p {
                cli::Phase::Ramp => StressPhase::Ramp,
                cli::Phase::Exhaust => StressPhase::Exhaust,
                cli::Phase::Churn => StressPhase::Churn,
                cli::Phase::Recover => StressPhase::Recover,
            })
            .collect()
    };
    phases.sort();
    phases.dedup();
    let threads = args.threads.map(|t| t as usize).unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
    });
    StressOptions {
        phases,
        threads,
        duration: args.duration,
        ops: args.ops,
        max_size: args.max_size.max(512),
        seed: args.seed,
        plant_corruption: args.plant_corruption,
        interrupt,
    }
}
