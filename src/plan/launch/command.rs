//! What a launch is, as data: the engine, the commands (program, arguments, environment, host)
//! and notes, or why there is none; and what each engine's launch needs beyond the plan.

use std::path::PathBuf;

use serde::Serialize;

use crate::backend::BackendKind;
use crate::plan::engines::pytorch::training::Recipe;
use crate::plan::engines::vllm::{VllmConfig, VllmDtype};
use crate::plan::{Placement, Plan};

/// A serving engine gpumem writes launch commands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Engine {
    /// llama.cpp's `llama-server` (GGUF files).
    #[serde(rename = "llama.cpp")]
    LlamaCpp,
    /// vLLM's `vllm serve` (Hugging Face checkpoints).
    #[serde(rename = "vllm")]
    Vllm,
    /// SGLang's `python -m sglang.launch_server` (Hugging Face checkpoints).
    #[serde(rename = "sglang")]
    Sglang,
    /// Ollama's `ollama serve` and `ollama run` (GGUF models from its registry or the Hub).
    #[serde(rename = "ollama")]
    Ollama,
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
    /// A GGUF repository on the Hub with llama.cpp's tag, `ORG/NAME[:QUANT]` (`-hf`).
    HubGguf(String),
    /// A model read from Ollama's registry (`ollama:NAME:TAG`), not pulled yet: llama.cpp
    /// cannot fetch it.
    Registry(String),
    /// A model in Ollama's store (`ollama:NAME:TAG`): its GGUF blob, and its name.
    OllamaStore {
        /// The blob, a GGUF file llama.cpp loads.
        blob: PathBuf,
        /// The name `ollama run` takes.
        name: String,
    },
}

impl ModelRef {
    /// What an engine loads for a model source: the GGUF file itself, the catalog model's
    /// Hugging Face repository, or the directory holding a config.json or safetensors.
    pub fn for_source(spec: &crate::model::SourceSpec, source: &crate::model::ModelSource) -> Self {
        use crate::model::{SourceKind, SourceSpec};
        // Read from the Hub: the engines fetch it by the same id.
        if let Some(hub) = &source.hub {
            if hub.ollama {
                return ModelRef::Registry(hub.repo.clone());
            }
            return match source.kind {
                SourceKind::Gguf => ModelRef::HubGguf(match &hub.tag {
                    Some(tag) => format!("{}:{tag}", hub.repo),
                    None => hub.repo.clone(),
                }),
                _ => ModelRef::Checkpoint(hub.repo.clone()),
            };
        }
        // A folder as a path the engine cannot take for a Hub id: `vllm serve m` would look
        // for a repository `m` where no folder `m` is beside it; `./m` is a folder.
        let dir_of = |p: &std::path::Path| {
            let dir = if p.is_dir() {
                p.display().to_string()
            } else {
                match p.parent().map(|d| d.display().to_string()) {
                    Some(d) if !d.is_empty() => d,
                    _ => return ".".to_string(),
                }
            };
            if dir.starts_with('/') || dir.starts_with("./") || dir.starts_with("../") || dir == "."
            {
                dir
            } else {
                format!("./{dir}")
            }
        };
        match spec {
            SourceSpec::Gguf(path) => ModelRef::Gguf(path.clone()),
            SourceSpec::Catalog(name) => match crate::model::find_model(name) {
                Some(m) => ModelRef::Checkpoint(m.hf_repo.to_string()),
                // A store model: Ollama's blob is a GGUF; a Hugging Face cache entry is served
                // by its repository id, which vLLM finds in the same cache.
                None => match crate::model::stores::locate(name) {
                    Ok(Some((SourceSpec::Gguf(blob), _))) => ModelRef::OllamaStore {
                        blob,
                        name: name.strip_prefix("ollama:").unwrap_or(name).to_string(),
                    },
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
            ModelRef::Gguf(_)
            | ModelRef::HubGguf(_)
            | ModelRef::Registry(_)
            | ModelRef::OllamaStore { .. } => {
                vec![Engine::LlamaCpp]
            }
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
    /// A client whose first request loads the model (`ollama run`).
    Client,
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
    /// An Ollama registry model not pulled yet: llama.cpp loads its blob once `ollama pull`
    /// has fetched it.
    NotPulled,
    /// vLLM loads Hugging Face checkpoints; the model was given as a GGUF file.
    NeedsCheckpoint,
    /// Nothing fits, so there is nothing to launch.
    NoPlan,
    /// A Hugging Face checkpoint: Ollama runs GGUF models by name.
    NotAnOllamaModel,
    /// A GGUF file Ollama has no name for: `ollama create NAME -f Modelfile` (`FROM` the file)
    /// makes one.
    NotInOllama,
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
#[derive(Debug, Clone, PartialEq)]
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
#[derive(Debug, Clone, PartialEq, Eq, Default)]
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
    /// `--speculative-config`, as given.
    pub speculative_config: Option<String>,
    /// `--enable-lora` and its slots.
    pub lora: Option<crate::plan::engines::vllm::VllmLora>,
    /// `--limit-mm-per-prompt`, as given.
    pub limit_mm_per_prompt: Option<String>,
    /// `--mm-processor-kwargs`, as given.
    pub mm_processor_kwargs: Option<String>,
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
            speculative_config: cfg.speculative.as_ref().map(|s| s.json.clone()),
            lora: cfg.lora,
            limit_mm_per_prompt: cfg.multimodal.limit_json.clone(),
            mm_processor_kwargs: cfg.multimodal.processor_json.clone(),
        }
    }
}

/// The variable that restricts a backend's runtime to some devices, where there is one.
pub(crate) fn visible_devices(backend: BackendKind) -> Option<&'static str> {
    match backend {
        BackendKind::Cuda | BackendKind::Nvml => Some("CUDA_VISIBLE_DEVICES"),
        BackendKind::Rocm => Some("HIP_VISIBLE_DEVICES"),
        _ => None,
    }
}

/// The variable and device list that keep a runtime to `placements`' devices.
pub(crate) fn visible(placements: &[&Placement]) -> Vec<(String, String)> {
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

/// The plan's placements on GPUs (every placement but the CPU's).
pub(crate) fn gpus(plan: &Plan) -> Vec<&Placement> {
    plan.placements
        .iter()
        .filter(|p| p.backend != BackendKind::Cpu)
        .collect()
}
