//! The flags `estimate` and `select` share: what the model runs as (precision, batch, context,
//! runtime) and, under `--mode train`, how PyTorch trains it.

use std::path::PathBuf;

use clap::Args;

use super::hints::{kv_precisions, weight_precisions, Offered};
use super::training::{AttnImplementationArg, LoraTargets, Mode, Optimizer, Recipe};
use super::values::{self, parse_percent};
use crate::units::parse_bytes;

/// What the model runs as: precision, batch, context and runtime settings.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Workload")]
pub struct WorkloadSettings {
    /// Weight precision: f32, f16, bf16, fp8, int8, int4, int4_g128 (GPTQ/AWQ: a 16-bit scale
    /// a group of 128), or a GGUF quantization such as q8_0, q4_k_m. Default: the file's own
    /// types for GGUF/safetensors, bf16 otherwise.
    #[arg(long, value_name = "DTYPE", value_parser = Offered(weight_precisions), hide_possible_values = true)]
    pub dtype: Option<String>,

    /// KV-cache precision: f32, f16, bf16, fp8, q8_0 or q4_0. Default: f16 (llama.cpp's), or
    /// for vLLM the model's dtype (its `--kv-cache-dtype auto`).
    #[arg(long, value_name = "DTYPE", value_parser = Offered(kv_precisions), hide_possible_values = true)]
    pub kv_dtype: Option<String>,

    /// Sequences processed at once.
    #[arg(short, long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    pub batch: u32,

    /// Tokens of context per sequence (prompt plus generated): 4096, or with k for 1,024 tokens
    /// (32k is 32,768; 128k is 131,072). Default: 4096. Past the model's trained length it is
    /// refused unless --allow-longer-context.
    #[arg(short, long, visible_alias = "context-length", value_parser = values::parse_context, allow_negative_numbers = true)]
    pub context: Option<u32>,

    /// Prefill chunk (micro-batch) in tokens; sizes the activation scratch.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    pub ubatch: u32,

    /// Estimate a config.json whose model_type gpumem has no rules for with the generic decoder
    /// formula (gated MLP, RMSNorm, no biases) instead of refusing it.
    #[arg(long)]
    pub allow_generic: bool,

    /// Take a --context past the model's trained length (max_position_embeddings), which is
    /// refused otherwise: the engines then run it as they would (vLLM refuses it too, unless
    /// VLLM_ALLOW_LONG_MAX_MODEL_LEN=1; llama.cpp warns).
    #[arg(long)]
    pub allow_longer_context: bool,

    /// Never ask the Hub: answer a Hub id from gpumem's cache or the Hugging Face cache, or
    /// refuse it (as HF_HUB_OFFLINE=1 does).
    #[arg(long, help_heading = "Model")]
    pub offline: bool,

    /// A multimodal projector GGUF (llama.cpp's mmproj) loaded beside the model: its weights are
    /// counted. An Ollama model's own projector is found in its manifest without this.
    #[arg(long, value_name = "FILE")]
    pub mmproj: Option<PathBuf>,

    /// llama.cpp: the most tokens an image may take (llama-server's --image-max-tokens): a
    /// Qwen-VL or Gemma 4 projector's largest image, whose compute buffer is kept free
    /// [default: the projector's own limit, 4096 for Qwen-VL, 1120 for Gemma 4].
    #[arg(long, value_name = "N", requires = "mmproj", value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub image_max_tokens: Option<u64>,

    /// Sliding-window layers cache the whole context, as llama.cpp's --swa-full (and the
    /// llama-cpp-python default) does. Default: the window plus one micro-batch (llama-server).
    #[arg(long)]
    pub swa_full: bool,

    /// Assume flash attention (no full attention-score matrix in memory).
    #[arg(long)]
    pub flash_attention: bool,

    /// A reserve per device added to the figure (CUDA context, kernels, workspaces). Default:
    /// 500MiB (the CUDA context and PyTorch's two cuBLAS workspaces beside a training step, and
    /// the generic rule's reserve); none for `estimate`'s inference, whose figures are the
    /// engine's own account.
    #[arg(long, value_parser = parse_bytes, value_name = "SIZE", hide_short_help = true)]
    pub overhead: Option<u64>,

    /// A percentage added for allocator fragmentation. Default: 10 (PyTorch's caching
    /// allocator reserved up to 1.09x its peak on an H200's training steps); none for
    /// `estimate`'s inference.
    #[arg(long, value_parser = parse_percent, value_name = "PERCENT", hide_short_help = true)]
    pub fragmentation_reserve: Option<f64>,

    /// Inference (weights, KV cache, activations) or training (plus gradients and optimizer).
    #[arg(long, value_enum, default_value_t = Mode::Infer)]
    pub mode: Mode,

    /// Optimizer for --mode train.
    #[arg(long, value_enum, default_value_t = Optimizer::Adamw, help_heading = "Training (--mode train)", hide_short_help = true)]
    pub optimizer: Optimizer,

    /// With --mode train: activation checkpointing (keep one activation per layer). On by
    /// default with --recipe qlora, as PEFT's prepare_model_for_kbit_training turns it on; off
    /// otherwise, as HF Trainer's gradient_checkpointing=False.
    #[arg(
        long,
        conflicts_with = "no_checkpointing",
        help_heading = "Training (--mode train)",
        hide_short_help = true
    )]
    pub checkpointing: bool,

    /// With --mode train: no activation checkpointing, even under --recipe qlora.
    #[arg(long, help_heading = "Training (--mode train)", hide_short_help = true)]
    pub no_checkpointing: bool,

    /// With --mode train: gradient accumulation over N micro-batches a step (HF Trainer's
    /// gradient_accumulation_steps); from the second on, every gradient is held through the
    /// forward and backward.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..), value_name = "N", help_heading = "Training (--mode train)", hide_short_help = true)]
    pub grad_accum: u32,

    /// With --mode train: transformers' attn_implementation [default: transformers' own
    /// choice: sdpa, or eager for Gemma 2 and gpt-oss].
    #[arg(
        long,
        value_enum,
        value_name = "IMPL",
        help_heading = "Training (--mode train)",
        hide_short_help = true
    )]
    pub attn_implementation: Option<AttnImplementationArg>,

    /// With --mode train: precision and copies [default: fp32-autocast for f32 weights, bf16
    /// for 16-bit ones, mixed otherwise].
    #[arg(
        long,
        value_enum,
        value_name = "RECIPE",
        help_heading = "Training (--mode train)",
        hide_short_help = true
    )]
    pub recipe: Option<Recipe>,

    /// With --recipe lora or qlora: the adapters' rank (r).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=65536), value_name = "R", help_heading = "Training (--mode train)", hide_short_help = true)]
    pub lora_rank: u32,

    /// With --recipe lora or qlora: the projections adapted.
    #[arg(long, value_enum, default_value_t = LoraTargets::AllLinear, value_name = "TARGETS", help_heading = "Training (--mode train)", hide_short_help = true)]
    pub lora_targets: LoraTargets,

    /// With --mode train: shard the model with FSDP2 over N ranks (fully_shard on every
    /// decoder layer and the root); the figures are one rank's.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=65536), help_heading = "Training (--mode train)", hide_short_help = true)]
    pub fsdp: Option<u32>,

    /// With --fsdp: keep each layer's parameters gathered from its forward to its backward
    /// (FSDP2's reshard_after_forward=False).
    #[arg(long, help_heading = "Training (--mode train)", hide_short_help = true)]
    pub no_reshard_after_forward: bool,

    /// With --mode train: one rank of DistributedDataParallel (its gradient buckets beside the
    /// gradients); --ddp-bucket-view for gradient_as_bucket_view=True.
    #[arg(
        long,
        conflicts_with = "fsdp",
        help_heading = "Training (--mode train)",
        hide_short_help = true
    )]
    pub ddp: bool,

    /// With --ddp: the gradients are views of DDP's buckets (gradient_as_bucket_view=True).
    #[arg(
        long,
        requires = "ddp",
        help_heading = "Training (--mode train)",
        hide_short_help = true
    )]
    pub ddp_bucket_view: bool,

    /// With --ddp: PyTorch's ZeroRedundancyOptimizer over N ranks (ZeRO-1: each keeps the
    /// optimizer state of its share of the tensors); the figures are the fullest rank's.
    #[arg(long, value_name = "N", requires = "ddp", value_parser = clap::value_parser!(u32).range(1..=65536), help_heading = "Training (--mode train)", hide_short_help = true)]
    pub zero1: Option<u32>,

    /// With --mode train: DeepSpeed's ZeRO stage 1 over N ranks (bf16, its default buckets):
    /// the weights and gradients whole on each rank, master weights and Adam's moments
    /// partitioned; the figures are the fullest rank's.
    #[arg(long, value_name = "N", conflicts_with_all = ["fsdp", "ddp", "deepspeed_zero2", "deepspeed_zero3"], value_parser = clap::value_parser!(u32).range(1..=65536), help_heading = "Training (--mode train)", hide_short_help = true)]
    pub deepspeed_zero1: Option<u32>,

    /// With --mode train: DeepSpeed's ZeRO stage 2 over N ranks (bf16, its default buckets):
    /// the weights whole on each rank, gradients, master weights and Adam's moments
    /// partitioned; the figures are the fullest rank's.
    #[arg(long, value_name = "N", conflicts_with_all = ["fsdp", "ddp", "deepspeed_zero3"], value_parser = clap::value_parser!(u32).range(1..=65536), help_heading = "Training (--mode train)", hide_short_help = true)]
    pub deepspeed_zero2: Option<u32>,

    /// With --mode train: DeepSpeed's ZeRO stage 3 over N ranks (bf16, its defaults): the
    /// weights, gradients, master weights and Adam's moments partitioned, each layer gathered
    /// whole while it runs; the figures are the fullest rank's.
    #[arg(long, value_name = "N", conflicts_with_all = ["fsdp", "ddp"], value_parser = clap::value_parser!(u32).range(1..=65536), help_heading = "Training (--mode train)", hide_short_help = true)]
    pub deepspeed_zero3: Option<u32>,

    /// With --deepspeed-zero1/2/3: ZeRO-Offload (offload_optimizer.device cpu, pinned): master
    /// weights, their gradients and Adam's moments in host memory, the optimizer stepping
    /// there; the host's bytes are reported beside the GPU's.
    #[arg(long, help_heading = "Training (--mode train)", hide_short_help = true)]
    pub offload_optimizer: bool,

    /// SGLang's `launch_server` memory flags.
    #[command(flatten)]
    pub sglang: SglangArgs,

    /// Ollama's settings.
    #[command(flatten)]
    pub ollama: OllamaArgs,
}

/// Ollama's settings, named for its environment variables (which are read when these are not
/// given; `--context` is `num_ctx`, `--kv-dtype` `OLLAMA_KV_CACHE_TYPE`).
#[derive(Debug, Clone, Args)]
pub struct OllamaArgs {
    /// Ollama: parallel requests, each with `num_ctx` tokens (OLLAMA_NUM_PARALLEL) [default: 1].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=512), help_heading = "Ollama (--engine ollama)", hide_short_help = true)]
    pub parallel: Option<u64>,

    /// Ollama: memory a GPU kept out of the total its default context follows
    /// (OLLAMA_GPU_OVERHEAD) [default: 0].
    #[arg(long, value_parser = parse_bytes, value_name = "SIZE", help_heading = "Ollama (--engine ollama)", hide_short_help = true)]
    pub gpu_overhead: Option<u64>,
}

/// `python -m sglang.launch_server`'s memory settings (SGLang 0.5.23's defaults when not given).
#[derive(Debug, Clone, Args)]
pub struct SglangArgs {
    /// SGLang: the share of the free memory its weights and KV pool take [default: by GPU
    /// memory, 0.83 on an H100].
    #[arg(long, value_parser = super::values::parse_fraction, value_name = "FRACTION", help_heading = "SGLang (--engine sglang)", hide_short_help = true)]
    pub mem_fraction_static: Option<f64>,

    /// SGLang: exactly N tensor-parallel ranks (--tp-size, --tp) [default: one GPU, else every
    /// GPU of the host].
    #[arg(long = "tp-size", visible_alias = "tp", value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1024), help_heading = "SGLang (--engine sglang)", hide_short_help = true)]
    pub tp_size: Option<u64>,

    /// SGLang: the most requests running at once [default: from the pool's tokens].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1 << 20), help_heading = "SGLang (--engine sglang)", hide_short_help = true)]
    pub max_running_requests: Option<u64>,

    /// SGLang: tokens a prefill chunk [default: by GPU memory, 8192 on an H100].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1 << 24), help_heading = "SGLang (--engine sglang)", hide_short_help = true)]
    pub chunked_prefill_size: Option<u64>,

    /// SGLang: a cap on the KV pool's tokens.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1 << 40), help_heading = "SGLang (--engine sglang)", hide_short_help = true)]
    pub max_total_tokens: Option<u64>,

    /// SGLang: no CUDA graphs (none reserved for in the default fraction).
    #[arg(
        long,
        help_heading = "SGLang (--engine sglang)",
        hide_short_help = true
    )]
    pub disable_cuda_graph: bool,

    /// SGLang: speculative decoding; an EAGLE, EAGLE3 or MTP draft's weights and KV layers are
    /// counted (modelled from the target's shape), and 48 running requests by default.
    #[arg(
        long,
        value_enum,
        value_name = "ALGO",
        help_heading = "SGLang (--engine sglang)",
        hide_short_help = true
    )]
    pub speculative_algorithm: Option<SpecAlgorithmArg>,

    /// SGLang: the draft model (a Hub id or folder), passed to the launch command.
    #[arg(
        long,
        value_name = "ID",
        requires = "speculative_algorithm",
        help_heading = "SGLang (--engine sglang)",
        hide_short_help = true
    )]
    pub speculative_draft_model_path: Option<String>,
}

/// `--speculative-algorithm`, as SGLang spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SpecAlgorithmArg {
    /// EAGLE: one decoder layer over the target's features.
    #[value(name = "EAGLE", alias = "eagle")]
    Eagle,
    /// EAGLE-3: one decoder layer over three of the target's layers, its own head.
    #[value(name = "EAGLE3", alias = "eagle3")]
    Eagle3,
    /// Multi-token prediction: the checkpoint's own next-token layer.
    #[value(name = "MTP", alias = "mtp")]
    Mtp,
    /// N-gram lookup: no draft model.
    #[value(name = "NGRAM", alias = "ngram")]
    Ngram,
}
