//! The engines' own settings: how `llama-server` and `vllm serve` are started (`select`; vLLM's
//! also `estimate --engine vllm`).

use clap::Args;

use super::values::{parse_fraction, parse_gib};

/// How `llama-server` is started, for plans made by llama.cpp's fit.
#[derive(Debug, Clone, Args)]
pub struct LlamaCppArgs {
    /// llama.cpp: no -c, so its fit chooses the context (the trained one, shortened to fit).
    #[arg(
        long,
        help_heading = "llama.cpp (--engine llama.cpp)",
        hide_short_help = true
    )]
    pub fit_context: bool,
    /// llama.cpp: the shortest context --fit-context may choose (llama.cpp's --fit-ctx).
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u64).range(1..=1 << 32), value_name = "N", requires = "fit_context", help_heading = "llama.cpp (--engine llama.cpp)", hide_short_help = true)]
    pub fit_ctx_min: u64,
    /// llama.cpp: the ggml backend the GPUs run, for how their compute buffers are laid out
    /// [default: cuda for CUDA, ROCm and simulated GPUs, metal for Apple GPUs, vulkan for
    /// Vulkan GPUs, else cpu-rules].
    #[arg(
        long,
        value_enum,
        value_name = "BACKEND",
        help_heading = "llama.cpp (--engine llama.cpp)",
        hide_short_help = true
    )]
    pub llamacpp_device: Option<LlamaDeviceArg>,
    /// llama.cpp: flash attention (-fa); auto turns it on where the backend has it, as every
    /// backend gpumem models does.
    #[arg(long, value_enum, default_value_t = FlashAttnArg::Auto, value_name = "WHEN", help_heading = "llama.cpp (--engine llama.cpp)", hide_short_help = true)]
    pub flash_attn: FlashAttnArg,
    /// llama.cpp: the GPUs take no operator from host-resident weights (--no-op-offload).
    #[arg(
        long,
        help_heading = "llama.cpp (--engine llama.cpp)",
        hide_short_help = true
    )]
    pub no_op_offload: bool,
    /// llama.cpp: how a host's GPUs share the model (-sm).
    #[arg(long, value_enum, default_value_t = SplitModeArg::Layer, value_name = "MODE", help_heading = "llama.cpp (--engine llama.cpp)", hide_short_help = true)]
    pub split_mode: SplitModeArg,
    /// llama.cpp: a draft model for speculative decoding (-md), a GGUF file or a Hub GGUF
    /// (ORG/NAME:QUANT): its weights, KV cache and compute buffers are fitted beside the
    /// model's, as llama-server's fit counts them.
    #[arg(
        long,
        visible_alias = "spec-draft-model",
        value_name = "GGUF",
        help_heading = "llama.cpp (--engine llama.cpp)",
        hide_short_help = true
    )]
    pub model_draft: Option<String>,
    /// llama.cpp: the most tokens the draft proposes a step (--spec-draft-n-max); the model keeps
    /// logits for that many more tokens a sequence.
    #[arg(long, alias = "draft-max", default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=1024), value_name = "N", requires = "model_draft", help_heading = "llama.cpp (--engine llama.cpp)", hide_short_help = true)]
    pub spec_draft_n_max: u64,
    /// llama.cpp: the draft's layers on the GPUs, the output layer counted as one (-ngld)
    /// [default: all].
    #[arg(long, visible_alias = "n-gpu-layers-draft", value_parser = clap::value_parser!(u64).range(0..=1 << 20), value_name = "N", requires = "model_draft", help_heading = "llama.cpp (--engine llama.cpp)", hide_short_help = true)]
    pub gpu_layers_draft: Option<u64>,
    /// llama.cpp: a LoRA adapter GGUF applied to the model (--lora; repeatable): each factor
    /// is loaded beside the matrix it adapts, on that matrix's device, and counted in the fit
    /// (llama.cpp's own fit does not count it).
    #[arg(
        long,
        value_name = "GGUF",
        help_heading = "llama.cpp (--engine llama.cpp)",
        hide_short_help = true
    )]
    pub lora: Vec<std::path::PathBuf>,
    /// llama.cpp: the memory its fit keeps free on each GPU, in MiB (-fitt, --fit-target;
    /// else LLAMA_ARG_FIT_TARGET, as llama-server and Ollama's runner read it) [default: 1024].
    #[arg(long, visible_alias = "fitt", value_parser = clap::value_parser!(u64).range(0..=1 << 24), value_name = "MiB", help_heading = "llama.cpp (--engine llama.cpp)", hide_short_help = true)]
    pub fit_target: Option<u64>,
}

/// `--split-mode`, as llama.cpp's `-sm` takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SplitModeArg {
    /// Whole layers (and their KV cache) spread over the GPUs, as llama.cpp's fit splits them.
    Layer,
    /// The first GPU only (-mg 0); the rest of the model in system RAM.
    None,
    /// Each weight's rows over the GPUs: refused, as llama.cpp refuses it on CUDA, ROCm,
    /// Vulkan, Metal and RPC devices ("does not support split buffers").
    Row,
}

/// `--flash-attn`, as llama.cpp's `-fa` takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FlashAttnArg {
    /// On where the backend supports it.
    Auto,
    /// On.
    On,
    /// Off: the full attention scores are computed.
    Off,
}

/// `--llamacpp-device`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LlamaDeviceArg {
    /// ggml-cuda (CUDA, ROCm; measured on an H200): 128-byte alignment, operator offload, its
    /// fused MoE kernels' tensors kept alive, flash attention where it has a kernel for the
    /// head size (with f16 copies of a quantized KV cache).
    Cuda,
    /// The CPU backend's layout: an rpc-server on a CPU (as the RPC references were measured).
    CpuRules,
    /// ggml-vulkan: the Vulkan device's limits (a discovered one's, else the widest a driver
    /// reports), operator offload, ops on larger tensors on the CPU.
    Vulkan,
    /// ggml-metal (Apple silicon; read from its source): scratch beside flash attention,
    /// expert products and argsorts, operator offload of matrix products, each split
    /// reordered for concurrency.
    Metal,
}

/// `vllm serve`'s memory settings (vLLM 0.33's defaults when not given), as `select` and
/// `estimate --engine vllm` take them.
#[derive(Debug, Clone, Args)]
pub struct VllmArgs {
    /// vLLM: fraction of each GPU's total memory vLLM may use [default: 0.92].
    #[arg(long, value_parser = parse_fraction, value_name = "FRACTION", help_heading = "vLLM (--engine vllm)", hide_short_help = true)]
    pub gpu_memory_utilization: Option<f64>,

    /// vLLM: tokens per scheduler step, which its profile run uses [default: by GPU memory].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1 << 32), value_name = "N", help_heading = "vLLM (--engine vllm)", hide_short_help = true)]
    pub max_num_batched_tokens: Option<u64>,

    /// vLLM: sequences per step, which its sampler is profiled over [default: by GPU memory].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1 << 20), value_name = "N", help_heading = "vLLM (--engine vllm)", hide_short_help = true)]
    pub max_num_seqs: Option<u64>,

    /// vLLM: tokens per KV-cache block.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=1 << 16), value_name = "N", help_heading = "vLLM (--engine vllm)", hide_short_help = true)]
    pub block_size: u64,

    /// vLLM: no CUDA graphs (and no graph pool taken from the KV cache).
    #[arg(long, help_heading = "vLLM (--engine vllm)", hide_short_help = true)]
    pub enforce_eager: bool,

    /// vLLM: GiB of each GPU's layer weights kept in host memory (--cpu-offload-gb).
    #[arg(long, value_name = "GIB", value_parser = parse_gib, help_heading = "vLLM (--engine vllm)", hide_short_help = true)]
    pub cpu_offload_gb: Option<f64>,

    /// vLLM: each pipeline stage's layers, as VLLM_PP_LAYER_PARTITION gives them (e.g. 16,32);
    /// only layouts with that many stages are planned.
    #[arg(long, value_name = "LAYERS,...", value_delimiter = ',', value_parser = clap::value_parser!(u64).range(1..), help_heading = "vLLM (--engine vllm)", hide_short_help = true)]
    pub pp_layer_partition: Vec<u64>,

    /// vLLM: exactly N tensor-parallel ranks a stage (--tensor-parallel-size) [default: the
    /// fewest GPUs that serve].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1024), help_heading = "vLLM (--engine vllm)", hide_short_help = true)]
    pub tensor_parallel_size: Option<u64>,

    /// vLLM: speculative decoding, as vLLM takes it (JSON: `method` eagle, eagle3, mtp or
    /// ngram, `num_speculative_tokens`): the draft's weights (modelled from the model's shape)
    /// and KV layer join the plan; a draft model of its own is refused.
    #[arg(
        long,
        value_name = "JSON",
        help_heading = "vLLM (--engine vllm)",
        hide_short_help = true
    )]
    pub speculative_config: Option<String>,

    /// vLLM: LoRA adapters served; the slots vLLM preallocates on each GPU join the weights.
    #[arg(long, help_heading = "vLLM (--engine vllm)", hide_short_help = true)]
    pub enable_lora: bool,

    /// vLLM: adapters a batch may use at once (GPU slots) [default: 1].
    #[arg(long, value_name = "N", requires = "enable_lora", value_parser = clap::value_parser!(u64).range(1..=1024), help_heading = "vLLM (--engine vllm)", hide_short_help = true)]
    pub max_loras: Option<u64>,

    /// vLLM: the largest adapter rank: 1, 8, 16, 32, 64, 128, 256, 320 or 512 [default: 16].
    #[arg(long, value_name = "R", requires = "enable_lora", value_parser = parse_lora_rank, help_heading = "vLLM (--engine vllm)", hide_short_help = true)]
    pub max_lora_rank: Option<u64>,

    /// vLLM: adapters cached in host memory, at least --max-loras [default: --max-loras].
    #[arg(long, value_name = "N", requires = "enable_lora", value_parser = clap::value_parser!(u64).range(1..=1 << 16), help_heading = "vLLM (--engine vllm)", hide_short_help = true)]
    pub max_cpu_loras: Option<u64>,

    /// vLLM: items of each modality a prompt may carry, as vLLM takes it (JSON:
    /// {"image": 2, "video": 0} or {"image": {"count": 2}}); the vision encoder is profiled
    /// with the largest input they allow [default: 999 of each].
    #[arg(
        long,
        value_name = "JSON",
        help_heading = "vLLM (--engine vllm)",
        hide_short_help = true
    )]
    pub limit_mm_per_prompt: Option<String>,

    /// vLLM: the multimodal processor's settings, as vLLM takes them (JSON:
    /// {"max_pixels": N, "min_pixels": N}); max_pixels sizes the largest image (Qwen2-VL,
    /// Qwen2.5-VL) [default: the processor's, 12845056].
    #[arg(
        long,
        value_name = "JSON",
        help_heading = "vLLM (--engine vllm)",
        hide_short_help = true
    )]
    pub mm_processor_kwargs: Option<String>,
}

/// `--max-lora-rank`: one of the ranks vLLM 0.33 allocates for (`MaxLoRARanks`).
fn parse_lora_rank(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(r) if [1, 8, 16, 32, 64, 128, 256, 320, 512].contains(&r) => Ok(r),
        _ => Err(format!(
            "'{s}' is not a rank vLLM takes (1, 8, 16, 32, 64, 128, 256, 320 or 512)"
        )),
    }
}
