//! Launch commands for the engines users serve with, built from a plan as data (program,
//! arguments, environment, host); the output layer renders them as shell lines.
//!
//! llama.cpp: `llama-server` with `-ngl` (layers on GPUs), `--tensor-split` (each device's
//! share, in llama.cpp's device order: RPC servers first, then local GPUs), `--rpc` for GPUs on
//! other hosts (each served by an `rpc-server`), `-c` as the whole KV cache shared by `-np`
//! slots. vLLM: `vllm serve` with tensor parallelism inside a host and pipeline parallelism
//! across hosts (or over unequal GPUs), `--cpu-offload-gb` for offload, `--max-model-len` and
//! `--gpu-memory-utilization` from the policy.

use std::path::PathBuf;

use serde::Serialize;

use super::engines::vllm::{VllmConfig, VllmDtype};
use super::{Placement, Plan, PlanKind};
use crate::backend::BackendKind;
use crate::plan::engines::pytorch::training::Recipe;

/// A serving engine gpumem writes launch commands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Engine {
    /// llama.cpp's `llama-server` (GGUF files).
    #[serde(rename = "llama.cpp")]
    LlamaCpp,
    /// vLLM's `vllm serve` (Hugging Face checkpoints).
    #[serde(rename = "vllm")]
    Vllm,
    /// PyTorch's `torchrun`: one training process a GPU (FSDP2).
    #[serde(rename = "torchrun")]
    Torchrun,
}

/// What the engines are told to load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelRef {
    /// A GGUF file (llama.cpp).
    Gguf(PathBuf),
    /// A Hugging Face repository id or a local checkpoint directory (vLLM).
    Checkpoint(String),
}

impl ModelRef {
    /// What an engine loads for a model source: the GGUF file itself, the catalog model's
    /// Hugging Face repository, or the directory holding a config.json or safetensors.
    pub fn for_source(spec: &crate::model::SourceSpec) -> Self {
        use crate::model::SourceSpec;
        let dir_of = |p: &std::path::Path| {
            if p.is_dir() {
                p.display().to_string()
            } else {
                match p.parent().map(|d| d.display().to_string()) {
                    Some(d) if !d.is_empty() => d,
                    _ => ".".to_string(),
                }
            }
        };
        match spec {
            SourceSpec::Gguf(path) => ModelRef::Gguf(path.clone()),
            SourceSpec::Catalog(name) => match crate::model::find_model(name) {
                Some(m) => ModelRef::Checkpoint(m.hf_repo.to_string()),
                // A store model: Ollama's blob is a GGUF; a Hugging Face cache entry is served
                // by its repository id, which vLLM finds in the same cache.
                None => match crate::model::stores::locate(name) {
                    Ok(Some((SourceSpec::Gguf(blob), _))) => ModelRef::Gguf(blob),
                    _ => ModelRef::Checkpoint(name.clone()),
                },
            },
            SourceSpec::Config(path) | SourceSpec::Safetensors(path) => {
                ModelRef::Checkpoint(dir_of(path))
            }
        }
    }

    /// The engines that can load it.
    pub fn engines(&self) -> Vec<Engine> {
        match self {
            ModelRef::Gguf(_) => vec![Engine::LlamaCpp],
            ModelRef::Checkpoint(_) => vec![Engine::Vllm],
        }
    }
}

/// What a command is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The server that answers requests.
    Server,
    /// llama.cpp's `rpc-server`, lending one GPU of another host.
    RpcWorker,
    /// Ray's head node (vLLM across hosts).
    RayHead,
    /// A Ray worker node joining the head.
    RayWorker,
    /// `torchrun`, starting one training process a GPU.
    Trainer,
}

/// One command to run on one host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LaunchCommand {
    /// The host to run it on.
    pub host: String,
    /// What it is for; workers start before the server.
    pub role: Role,
    /// Environment to set, e.g. `CUDA_VISIBLE_DEVICES`.
    pub env: Vec<(String, String)>,
    /// The program and its arguments.
    pub argv: Vec<String>,
}

/// Something the user should know about a launch, as data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "note", rename_all = "snake_case")]
pub enum LaunchNote {
    /// The other hosts must reach `host:port` of every worker.
    Network,
    /// The training script shards the model as planned: `fully_shard` on every decoder layer,
    /// then on the model, with this `reshard_after_forward` (HF Trainer: `fsdp=True`,
    /// `fsdp_config` `reshard_after_forward`).
    Fsdp2 {
        /// FSDP2's `reshard_after_forward`.
        reshard_after_forward: bool,
        /// How the script holds and computes the weights: the recipe the step was planned
        /// with (`None` where the step was not walked).
        precision: Option<Fsdp2Precision>,
    },
    /// The training script wraps the model in DistributedDataParallel with this
    /// `gradient_as_bucket_view` (HF Trainer: `ddp_...` defaults, DDP's own otherwise).
    Ddp {
        /// DDP's `gradient_as_bucket_view`.
        bucket_view: bool,
        /// `ZeroRedundancyOptimizer` over the ranks (ZeRO-1).
        zero1: bool,
    },
    /// The training script runs DeepSpeed's ZeRO at this stage in bf16 with its default
    /// buckets (`deepspeed.initialize`, or HF Trainer's `deepspeed=`), this micro-batch a rank.
    #[serde(rename = "deepspeed")]
    DeepSpeed {
        /// `zero_optimization.stage`.
        stage: u8,
        /// `train_micro_batch_size_per_gpu`.
        micro_batch: u64,
        /// `zero_optimization.offload_optimizer`: `{"device": "cpu", "pin_memory": true}`.
        offload_optimizer: bool,
    },
    /// The plan holds the weights at a precision vLLM cannot quantize to on load (`--dtype`
    /// int4, int8 or a GGUF type): the model served must be a checkpoint already stored so.
    StoredQuantized,
}

/// How an FSDP2 training script holds and computes the weights, by the planned recipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Fsdp2Precision {
    /// The model loaded in bf16 and trained so (`dtype=torch.bfloat16`).
    Bf16,
    /// f32 shards gathered in bf16, gradients reduced in f32 (`MixedPrecisionPolicy`).
    Mixed,
    /// The f32 model under bf16 autocast (HF Trainer's `bf16=True` on an f32-loaded model).
    Fp32Autocast,
    /// PEFT's LoRA adapters on the bf16 model, sharded with it.
    Lora,
    /// QLoRA: the NF4 layers stored as bf16 (`bnb_4bit_quant_storage`) so FSDP2 shards them.
    Qlora,
}

impl Fsdp2Precision {
    /// The script's precision for `recipe`.
    pub fn of(recipe: Recipe) -> Self {
        match recipe {
            Recipe::Bf16 => Fsdp2Precision::Bf16,
            Recipe::MixedFp32Master => Fsdp2Precision::Mixed,
            Recipe::Fp32Autocast => Fsdp2Precision::Fp32Autocast,
            Recipe::Lora(_) => Fsdp2Precision::Lora,
            Recipe::Qlora(_) => Fsdp2Precision::Qlora,
        }
    }
}

/// The commands that start one engine on the plan's devices.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Launch {
    /// The engine.
    pub engine: Engine,
    /// In the order to run them: workers, then the server.
    pub commands: Vec<LaunchCommand>,
    /// What the user should know.
    pub notes: Vec<LaunchNote>,
}

/// Why an engine gets no launch command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NoLaunch {
    /// The plan runs on the CPU; vLLM is launched here for GPUs only.
    NoGpu,
    /// llama.cpp loads GGUF files; the model was given another way.
    NeedsGguf,
    /// vLLM loads Hugging Face checkpoints; the model was given as a GGUF file.
    NeedsCheckpoint,
    /// Nothing fits, so there is nothing to launch.
    NoPlan,
    /// The plan places a byte count, not a model's layers (`--bytes`).
    NotAModel,
    /// vLLM gives every pipeline stage the same number of layers (split evenly over its
    /// tensor-parallel GPUs); some GPU would hold more than the plan gives it by memory.
    UnevenStages {
        /// Layers per stage under vLLM.
        layers_per_stage: u64,
    },
}

/// What the launch needs beyond the plan.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LaunchSettings {
    /// Tokens per sequence.
    pub context: u64,
    /// Sequences served at once.
    pub batch: u64,
    /// Decoder layers of the model.
    pub layers: u64,
    /// The fraction of each GPU the engine may use (vLLM's `--gpu-memory-utilization`).
    pub memory_fraction: f64,
    /// vLLM's `--cpu-offload-gb` as the user gave it.
    pub cpu_offload_gb: Option<f64>,
    /// An encoder's pooling: llama-server then serves embeddings (`--embedding`), or scores
    /// (`--rerank`) where the model ranks; `None` for a decoder.
    pub pooling: Option<crate::model::Pooling>,
    /// The vLLM settings the plan was made under that `vllm serve` must be given too.
    pub vllm: VllmFlags,
    /// llama.cpp's KV-cache type where the plan took one other than its f16 default
    /// (`-ctk`/`-ctv`: `q8_0`, `q4_0`, `bf16`, `f32`).
    pub llamacpp_cache_type: Option<&'static str>,
}

/// `vllm serve` flags beyond the layout, each as the plan took it (`None`/`false`: vLLM's own
/// default, left out of the command).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VllmFlags {
    /// `--dtype float32|float16|bfloat16` or `--quantization fp8`.
    pub dtype: Option<(&'static str, &'static str)>,
    /// `--kv-cache-dtype fp8`.
    pub fp8_cache: bool,
    /// `--enforce-eager`.
    pub enforce_eager: bool,
    /// `--max-num-batched-tokens`.
    pub max_num_batched_tokens: Option<u64>,
    /// `--max-num-seqs`.
    pub max_num_seqs: Option<u64>,
    /// `--block-size`, where not vLLM's default.
    pub block_size: Option<u64>,
    /// The weights are planned at a precision only a checkpoint stored so gives.
    pub stored_quantized: bool,
}

impl VllmFlags {
    /// The flags that start vLLM as `cfg` plans it.
    pub fn of(cfg: &VllmConfig) -> Self {
        VllmFlags {
            dtype: cfg.dtype.flag(),
            fp8_cache: cfg.fp8_cache(),
            enforce_eager: cfg.enforce_eager,
            max_num_batched_tokens: cfg.max_num_batched_tokens,
            max_num_seqs: cfg.max_num_seqs,
            block_size: cfg.block_size_flag(),
            stored_quantized: cfg.dtype == VllmDtype::Stored,
        }
    }

    fn argv(&self) -> Vec<String> {
        let mut argv: Vec<String> = Vec::new();
        if let Some((flag, value)) = self.dtype {
            argv.extend([flag.into(), value.into()]);
        }
        if self.fp8_cache {
            argv.extend(["--kv-cache-dtype".into(), "fp8".into()]);
        }
        let numbers = [
            ("--max-num-batched-tokens", self.max_num_batched_tokens),
            ("--max-num-seqs", self.max_num_seqs),
            ("--block-size", self.block_size),
        ];
        for (flag, value) in numbers {
            if let Some(n) = value {
                argv.extend([flag.into(), n.to_string()]);
            }
        }
        if self.enforce_eager {
            argv.push("--enforce-eager".into());
        }
        argv
    }
}

const RPC_PORT: u16 = 50052;
const RAY_PORT: u16 = 6379;

/// The launch of `engine` for `plan`, or why there is none.
pub fn launch(
    engine: Engine,
    model: &ModelRef,
    plan: &Plan,
    s: &LaunchSettings,
) -> Result<Launch, NoLaunch> {
    if plan.kind == PlanKind::None {
        return Err(NoLaunch::NoPlan);
    }
    if plan.gpu_layers.is_none() && plan.kind != PlanKind::Single {
        return Err(NoLaunch::NotAModel);
    }
    match (engine, model) {
        (Engine::LlamaCpp, ModelRef::Gguf(path)) => Ok(llama_cpp(path, plan, s)),
        (Engine::LlamaCpp, _) => Err(NoLaunch::NeedsGguf),
        (Engine::Vllm, ModelRef::Checkpoint(id)) => vllm(id, plan, s),
        (Engine::Vllm, _) => Err(NoLaunch::NeedsCheckpoint),
        (Engine::Torchrun, _) => Err(NoLaunch::NoPlan),
    }
}

/// llama-server's mode: one KV cache for the `-np` sequences where the plan keeps them so
/// (llama-server's default is a stream each); an encoder's embeddings, or a reranker's scores.
fn server_mode(s: &LaunchSettings, unified: bool) -> Vec<String> {
    let mut flags = Vec::new();
    if unified {
        flags.push("--kv-unified".into());
    }
    match s.pooling {
        Some(crate::model::Pooling::Rank) => flags.push("--rerank".into()),
        Some(_) => flags.push("--embedding".into()),
        None => {}
    }
    flags
}

/// `torchrun` on the plan's GPUs, one FSDP2, DDP or DeepSpeed rank a GPU, for the user's
/// training script; `None` for a step on one GPU.
/// `recipe` is the one the step was planned with (the estimate's, which follows the
/// checkpoint's precision where none was asked).
pub fn torchrun(
    plan: &Plan,
    settings: &crate::plan::engines::Settings,
    recipe: Option<Recipe>,
) -> Option<Launch> {
    let note = match (
        settings.pytorch.fsdp,
        settings.pytorch.ddp,
        settings.pytorch.deepspeed,
    ) {
        (Some(f), _, _) => LaunchNote::Fsdp2 {
            reshard_after_forward: f.reshard_after_forward,
            precision: recipe.map(Fsdp2Precision::of),
        },
        (None, Some(d), _) => LaunchNote::Ddp {
            bucket_view: d.bucket_view,
            zero1: d.zero1.is_some(),
        },
        (None, None, Some(d)) => LaunchNote::DeepSpeed {
            stage: d.stage.number(),
            micro_batch: settings.batch,
            offload_optimizer: d.offload_optimizer,
        },
        (None, None, None) => return None,
    };
    let gpu = gpus(plan);
    Some(Launch {
        engine: Engine::Torchrun,
        commands: vec![LaunchCommand {
            host: gpu.first().map_or_else(String::new, |p| p.host.clone()),
            role: Role::Trainer,
            env: visible(&gpu),
            argv: vec![
                "torchrun".into(),
                "--standalone".into(),
                "--nproc-per-node".into(),
                gpu.len().to_string(),
                "train.py".into(),
            ],
        }],
        notes: vec![note],
    })
}

/// The variable that restricts a backend's runtime to some devices, where there is one.
fn visible_devices(backend: BackendKind) -> Option<&'static str> {
    match backend {
        BackendKind::Cuda | BackendKind::Nvml => Some("CUDA_VISIBLE_DEVICES"),
        BackendKind::Rocm => Some("HIP_VISIBLE_DEVICES"),
        _ => None,
    }
}

fn visible(placements: &[&Placement]) -> Vec<(String, String)> {
    let Some(first) = placements.first() else {
        return Vec::new();
    };
    visible_devices(first.backend)
        .map(|var| {
            let list: Vec<String> = placements.iter().map(|p| p.device.to_string()).collect();
            vec![(var.to_string(), list.join(","))]
        })
        .unwrap_or_default()
}

/// The name llama.cpp gives the `d`-th device's buffers of `backend` (what `-ot` names).
/// The port of the `i`-th other host's `rpc-server`.
fn rpc_port(i: usize) -> u16 {
    RPC_PORT.saturating_add(u16::try_from(i).unwrap_or(u16::MAX))
}

fn buffer_name(backend: BackendKind, d: usize) -> String {
    match backend {
        BackendKind::Cuda | BackendKind::Nvml => format!("CUDA{d}"),
        BackendKind::Rocm => format!("ROCm{d}"),
        BackendKind::Vulkan => format!("Vulkan{d}"),
        BackendKind::Metal => "Metal".into(),
        BackendKind::Opencl => "OpenCL".into(),
        BackendKind::Cpu => "CPU".into(),
    }
}

fn gpus(plan: &Plan) -> Vec<&Placement> {
    plan.placements
        .iter()
        .filter(|p| p.backend != BackendKind::Cpu)
        .collect()
}

fn llama_cpp(path: &std::path::Path, plan: &Plan, s: &LaunchSettings) -> Launch {
    let gpu = gpus(plan);
    let server_host = plan.placements[0].host.clone();
    let (local, remote): (Vec<&Placement>, Vec<&Placement>) =
        gpu.iter().partition(|p| p.host == server_host);
    let mut commands = Vec::new();
    let mut rpc = Vec::new();
    for (i, p) in remote.iter().enumerate() {
        let port = rpc_port(i);
        commands.push(LaunchCommand {
            host: p.host.clone(),
            role: Role::RpcWorker,
            env: visible(&[p]),
            argv: vec![
                "rpc-server".into(),
                "-H".into(),
                "0.0.0.0".into(),
                "-p".into(),
                port.to_string(),
            ],
        });
        rpc.push(format!("{}:{port}", p.host));
    }
    // -ngl counts the output layer as one more: layers + 1 puts everything on the GPUs.
    let ngl = match plan.kind {
        PlanKind::CpuOffload => plan.gpu_layers.unwrap_or(0),
        // Across hosts llama.cpp's own fit may leave layers in the server's RAM too.
        PlanKind::CrossHost => plan.llamacpp().map_or(s.layers + 1, |f| f.n_gpu_layers),
        _ if gpu.is_empty() => 0,
        _ => s.layers + 1,
    };
    let mut argv: Vec<String> = vec![
        "llama-server".into(),
        "-m".into(),
        path.display().to_string(),
        "-c".into(),
        plan.llamacpp()
            .map_or(s.context * s.batch, |f| f.context)
            .to_string(),
        "-np".into(),
        s.batch.to_string(),
        "-ngl".into(),
        ngl.to_string(),
    ];
    argv.extend(server_mode(
        s,
        plan.llamacpp().is_some_and(|f| f.kv_unified),
    ));
    argv.extend(placement_args(plan, &gpu, (&local, &remote)));
    if let Some(t) = s.llamacpp_cache_type {
        argv.extend(["-ctk".into(), t.into(), "-ctv".into(), t.into()]);
    }
    if !rpc.is_empty() {
        argv.extend(["--rpc".into(), rpc.join(",")]);
    }
    commands.push(LaunchCommand {
        host: server_host,
        role: Role::Server,
        env: visible(&local),
        argv,
    });
    Launch {
        engine: Engine::LlamaCpp,
        notes: if remote.is_empty() {
            Vec::new()
        } else {
            vec![LaunchNote::Network]
        },
        commands,
    }
}

/// `llama-server`'s flags for what the plan assumed and where it put the layers: `-fa off` and
/// `--no-op-offload` where they differ from llama-server's defaults, the fit's `-ts` (or the
/// plan's split over several GPUs, RPC devices first) and its `-ot` overrides.
fn placement_args(
    plan: &Plan,
    gpu: &[&Placement],
    (local, remote): (&[&Placement], &[&Placement]),
) -> Vec<String> {
    let mut argv: Vec<String> = Vec::new();
    let fitted = plan.llamacpp();
    // llama-server's defaults are -fa auto (on here) and operator offload on.
    if fitted.is_some_and(|f| !f.flash_attention) {
        argv.extend(["-fa".into(), "off".into()]);
    }
    if fitted.is_some_and(|f| f.device_rules.offloads_ops() && !f.op_offload) {
        argv.push("--no-op-offload".into());
    }
    if fitted.is_some_and(|f| f.one_gpu) {
        argv.extend(["-sm".into(), "none".into()]);
    }
    if let Some(ts) = fitted.and_then(|f| f.tensor_split.as_ref()) {
        // llama.cpp's fit counts the output layer on the last GPU; trailing zeros are dropped.
        let used = ts.len() - ts.iter().rev().take_while(|&&n| n == 0).count();
        if used > 1 {
            let ts: Vec<String> = ts[..used].iter().map(u64::to_string).collect();
            argv.extend(["--tensor-split".into(), ts.join(",")]);
        }
    } else if gpu.len() > 1 {
        // llama.cpp puts RPC devices before local GPUs.
        let shares: Vec<String> = remote
            .iter()
            .chain(local.iter())
            .map(|p| match plan.kind {
                PlanKind::TensorParallel => "1".to_string(),
                _ => p.layers.unwrap_or(1).to_string(),
            })
            .collect();
        argv.extend(["--tensor-split".into(), shares.join(",")]);
    }
    if let Some(f) = fitted.filter(|f| !f.overrides.is_empty()) {
        let ot: Vec<String> = f
            .overrides
            .iter()
            .filter_map(|o| {
                // The fit counts devices in llama.cpp's order: the RPC devices, then the
                // server's own GPUs.
                let to = match o.to {
                    None => "CPU".to_string(),
                    Some(d) => match remote.get(d) {
                        Some(r) => format!("RPC0[{}:{}]", r.host, rpc_port(d)),
                        None => {
                            let d = d - remote.len();
                            buffer_name(local.get(d)?.backend, d)
                        }
                    },
                };
                Some(format!("{}={to}", o.pattern.as_deref()?))
            })
            .collect();
        argv.extend(["-ot".into(), ot.join(",")]);
    }
    argv
}

fn vllm(model: &str, plan: &Plan, s: &LaunchSettings) -> Result<Launch, NoLaunch> {
    let gpu = gpus(plan);
    if gpu.is_empty() {
        return Err(NoLaunch::NoGpu);
    }
    let mut hosts: Vec<&str> = Vec::new();
    for p in &gpu {
        if !hosts.contains(&p.host.as_str()) {
            hosts.push(&p.host);
        }
    }
    let per_host: Vec<usize> = hosts
        .iter()
        .map(|h| gpu.iter().filter(|p| p.host == *h).count())
        .collect();
    let mut notes = Vec::new();
    // Tensor parallel inside a host, pipeline stages across hosts; unequal GPUs (or unequal
    // hosts) become one stage per GPU.
    // vLLM's own plan names its layout; the generic rule's plan kinds map onto one.
    let engine_layout = plan
        .vllm()
        .filter(|_| plan.accounting == crate::plan::Accounting::Vllm)
        .and_then(|f| {
            Some((
                usize::try_from(f.tensor_parallel).ok()?,
                usize::try_from(f.pipeline_parallel).ok()?,
            ))
        });
    let (tp, pp) = engine_layout.unwrap_or(match plan.kind {
        PlanKind::TensorParallel => (gpu.len(), 1),
        PlanKind::LayerSplit => (1, gpu.len()),
        PlanKind::CrossHost if per_host.iter().all(|&n| n == per_host[0]) => {
            (per_host[0], hosts.len())
        }
        PlanKind::CrossHost => (1, gpu.len()),
        _ => (1, 1),
    });
    // Each GPU then holds layers_per_stage / tp layers' worth; the plan's split (by memory)
    // says what each GPU can hold.
    let layers_per_stage = s.layers.div_ceil(pp as u64);
    if pp > 1
        && engine_layout.is_none()
        && gpu
            .iter()
            .any(|p| layers_per_stage > p.layers.unwrap_or(0).saturating_mul(tp as u64))
    {
        return Err(NoLaunch::UnevenStages { layers_per_stage });
    }
    let mut argv: Vec<String> = vec![
        "vllm".into(),
        "serve".into(),
        model.to_string(),
        "--max-model-len".into(),
        s.context.to_string(),
        "--gpu-memory-utilization".into(),
        format!("{}", s.memory_fraction),
    ];
    if tp > 1 {
        argv.extend(["--tensor-parallel-size".into(), tp.to_string()]);
    }
    if pp > 1 {
        argv.extend(["--pipeline-parallel-size".into(), pp.to_string()]);
    }
    if let Some(gb) = cpu_offload_gb(plan, s) {
        argv.extend(["--cpu-offload-gb".into(), gb]);
    }
    argv.extend(s.vllm.argv());
    if s.vllm.stored_quantized {
        notes.push(LaunchNote::StoredQuantized);
    }
    let partition = layer_partition(plan, s);
    let mut commands = Vec::new();
    let head = plan.placements[0].host.clone();
    if hosts.len() > 1 {
        argv.extend(["--distributed-executor-backend".into(), "ray".into()]);
        commands.extend(ray_cluster(&head, &hosts));
        notes.push(LaunchNote::Network);
    }
    let local: Vec<&Placement> = gpu.iter().copied().filter(|p| p.host == head).collect();
    commands.push(LaunchCommand {
        host: head,
        role: Role::Server,
        env: if hosts.len() > 1 {
            partition.into_iter().collect()
        } else {
            visible(&local).into_iter().chain(partition).collect()
        },
        argv,
    });
    Ok(Launch {
        engine: Engine::Vllm,
        commands,
        notes,
    })
}

/// `--cpu-offload-gb`: what the user gave, or for a CPU-offload plan the GiB its RAM holds.
fn cpu_offload_gb(plan: &Plan, s: &LaunchSettings) -> Option<String> {
    if plan.kind != PlanKind::CpuOffload {
        return s.cpu_offload_gb.map(|gb| format!("{gb}"));
    }
    let cpu_bytes: u64 = plan
        .placements
        .iter()
        .filter(|p| p.backend == BackendKind::Cpu)
        .map(|p| p.bytes)
        .sum();
    Some(cpu_bytes.div_ceil(1 << 30).to_string())
}

/// `VLLM_PP_LAYER_PARTITION`, for stages other than vLLM's own even split.
fn layer_partition(plan: &Plan, s: &LaunchSettings) -> Option<(String, String)> {
    plan.vllm()
        .filter(|f| {
            f.pipeline_parallel > 1
                && f.stage_layers
                    != crate::plan::engines::vllm::stage_layers(s.layers, f.pipeline_parallel)
        })
        .map(|f| {
            let parts: Vec<String> = f.stage_layers.iter().map(u64::to_string).collect();
            ("VLLM_PP_LAYER_PARTITION".to_string(), parts.join(","))
        })
}

/// A Ray cluster over `hosts`: the head on `head`, a worker on each other host.
fn ray_cluster(head: &str, hosts: &[&str]) -> Vec<LaunchCommand> {
    let mut commands = vec![LaunchCommand {
        host: head.to_string(),
        role: Role::RayHead,
        env: Vec::new(),
        argv: vec![
            "ray".into(),
            "start".into(),
            "--head".into(),
            "--port".into(),
            RAY_PORT.to_string(),
        ],
    }];
    for h in hosts.iter().filter(|h| **h != head) {
        commands.push(LaunchCommand {
            host: h.to_string(),
            role: Role::RayWorker,
            env: Vec::new(),
            argv: vec![
                "ray".into(),
                "start".into(),
                "--address".into(),
                format!("{head}:{RAY_PORT}"),
            ],
        });
    }
    commands
}

#[cfg(test)]
mod tests;
