//! Command-line definitions (clap derive). Completions and man pages are generated from these
//! types, so every flag's documentation lives here and nowhere else.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::backend::{BackendKind, DeviceSpec};
use crate::units::{parse_bytes, parse_duration};
use crate::workload::baseline::RegressionGate;

mod engines;
mod help;
mod hints;
mod training;
mod values;
mod workload;
pub use engines::{FlashAttnArg, LlamaCppArgs, LlamaDeviceArg, SplitModeArg, VllmArgs};
use help::after_help;
pub use help::{ENVIRONMENT, EXAMPLES};
use hints::{catalog_names, DeviceSpecs, Offered};
pub use training::{AttnImplementationArg, LoraTargets, Mode, Optimizer, Recipe};
use values::{parse_block_bytes, parse_factor, parse_fraction, parse_nonzero_bytes};
pub use workload::{SpecAlgorithmArg, WorkloadSettings};

/// Know your GPU memory before you deploy.
///
/// gpumem lists the devices and memory you have (discover), computes what a model needs
/// (estimate), chooses where it fits (select), and measures how a caching pool allocator behaves
/// on a real device (bench-alloc, stress).
#[derive(Debug, Parser)]
#[command(name = "gpumem", version, propagate_version = true, after_long_help = after_help(None))]
#[command(max_term_width = 100)]
pub struct Cli {
    /// Options every subcommand accepts.
    #[command(flatten)]
    pub global: GlobalArgs,

    /// The subcommand to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Options every subcommand accepts.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Global options")]
pub struct GlobalArgs {
    /// Print one JSON document on stdout instead of tables.
    ///
    /// Every document carries "schema_version": 1 at the top level; the schemas are described in
    /// docs/json-schema.md. Errors still go to stderr as one line, and a JSON document
    /// {"schema_version":1,"error":{...}} is printed on stdout so pipelines always get JSON.
    #[arg(long, global = true)]
    pub json: bool,

    /// Print only the result: no progress bars, no notes.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,

    /// Log what gpumem does to stderr (-v: info, -vv: debug, -vvv: trace); with --version, list
    /// the engine releases each estimate follows.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// Print tables with every column and nothing wrapped, however wide. Without it tables fit
    /// the terminal, or $COLUMNS, or 80 columns when neither is known.
    #[arg(long, global = true)]
    pub wide: bool,

    /// When to use colour. `auto` colours a terminal unless NO_COLOR is set.
    #[arg(long, global = true, value_enum, default_value_t = ColorWhen::Auto, value_name = "WHEN")]
    pub color: ColorWhen,
}

/// What `bench-alloc --compare` sets the pool beside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompareWith {
    /// The device's own allocator: one allocation per request through the backend's raw API.
    Native,
}

/// When to colour output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorWhen {
    /// Colour when stdout is a terminal and NO_COLOR is not set.
    Auto,
    /// Colour even when stdout is a pipe or NO_COLOR is set.
    Always,
    /// Plain text, whatever the terminal.
    Never,
}

/// The subcommands; each has its own page in the man pages and completions.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List every backend and device with total and free memory; unavailable backends say why.
    Discover(DiscoverArgs),
    /// Compute the memory a model needs: weights, KV cache, activations and runtime overhead.
    Estimate(Box<EstimateArgs>),
    /// Choose the device, split or CPU offload where a model fits, and say why others do not.
    Select(Box<SelectArgs>),
    /// Run the pool allocator against a real device and report hit rate, fragmentation, latency.
    #[command(name = "bench-alloc")]
    BenchAlloc(Box<BenchAllocArgs>),
    /// Drive a device to memory pressure and prove recovery, fallback, integrity and no leaks.
    Stress(StressArgs),
}

/// Output formats of `discover`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DiscoverFormat {
    /// Human-readable tables (comfy-table), one per backend.
    Table,
    /// The JSON document (same as --json).
    Json,
    /// Prometheus text exposition, for node_exporter's textfile collector.
    Prometheus,
}

/// Arguments of `gpumem discover`.
#[derive(Debug, Clone, Args)]
#[command(after_long_help = after_help(Some("discover")))]
pub struct DiscoverArgs {
    /// Probe only this backend (repeatable). Default: all of them.
    #[arg(long = "backend", value_enum, value_name = "NAME")]
    pub backends: Vec<BackendKind>,

    /// Give up on a backend that has not answered after this long (e.g. 5s, 500ms).
    ///
    /// Backends are probed concurrently; one that times out is listed as unavailable with the
    /// reason, so a hung driver never hangs the tool.
    #[arg(long, default_value = "5s", value_parser = parse_duration, value_name = "DURATION")]
    pub timeout: Duration,

    /// Output format. --json is the same as --format json.
    #[arg(long, value_enum, default_value_t = DiscoverFormat::Table)]
    pub format: DiscoverFormat,
}

/// Where the model comes from. Exactly one source is required unless --list-models is given.
#[derive(Debug, Clone, Args)]
#[group(id = "source", multiple = false)]
#[command(next_help_heading = "Model")]
pub struct ModelSourceArgs {
    /// A model by its Hugging Face id, `ORG/NAME[@REVISION]` (e.g. Qwen/Qwen3-32B), or a GGUF
    /// repository with llama.cpp's tag, ORG/NAME:QUANT (e.g. unsloth/Qwen3-8B-GGUF:Q4_K_M); a
    /// catalog name or alias (e.g. llama-3.1-8b); or `ollama:NAME[:TAG]` from Ollama's store.
    ///
    /// An id is read from the Hugging Face cache when there, else from the Hub (HF_ENDPOINT,
    /// HF_TOKEN): config.json and the weight files' headers only, never their data, kept in
    /// gpumem's cache. `gpumem estimate --list-models` lists the catalog.
    #[arg(short, long, value_name = "NAME", value_parser = Offered(catalog_names), hide_possible_values = true)]
    pub model: Option<String>,

    /// A Hugging Face config.json (Llama 2-4, Mistral, Mixtral, Qwen 2-3, Qwen3-Next, Gemma 1-3,
    /// Phi-3, Falcon, GPT-NeoX, DeepSeek-V2/V3, Kimi-K2, GLM-4.5, gpt-oss, Mamba, Mamba-2,
    /// Jamba, Granite-4.0-H, Nemotron-H, Falcon-H1; others with --allow-generic).
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,

    /// A GGUF file; only its header is read, never the tensor data.
    #[arg(long, value_name = "FILE")]
    pub gguf: Option<PathBuf>,

    /// A .safetensors file, a directory of shards, or a model.safetensors.index.json.
    #[arg(long, value_name = "PATH")]
    pub safetensors: Option<PathBuf>,
}

/// Arguments of `gpumem estimate`.
#[derive(Debug, Clone, Args)]
#[command(after_long_help = after_help(Some("estimate")))]
pub struct EstimateArgs {
    /// Which model: a catalog name, a config.json, a GGUF file or safetensors.
    #[command(flatten)]
    pub source: ModelSourceArgs,

    /// Precision, batch, context and runtime.
    #[command(flatten)]
    pub settings: WorkloadSettings,

    /// List the built-in catalog and exit.
    #[arg(long, conflicts_with = "source")]
    pub list_models: bool,

    /// Compare the total with every discovered device; exit 3 when none fits.
    #[arg(long)]
    pub fits: bool,

    /// Inference by whose memory: llama.cpp's buffers (as `select --engine llama.cpp` plans
    /// them), vLLM's need on each GPU (as `select --engine vllm` plans it on --device, else
    /// this machine's GPUs), or transformers' `generate` (the context is then the prompt).
    /// Default: llama.cpp, the engine a GGUF implies; for a Hugging Face checkpoint the report
    /// says so and names `--engine vllm`.
    #[arg(long, value_enum, value_name = "ENGINE")]
    pub engine: Option<InferenceEngine>,

    /// llama.cpp's -fa: flash attention `on`, `off` (the full attention scores are computed),
    /// or `auto`, on where the backend supports it, as llama-server's default (every backend
    /// gpumem models supports it).
    #[arg(long, value_enum, default_value_t = FlashAttnArg::Auto, value_name = "WHEN")]
    pub flash_attn: FlashAttnArg,

    /// The devices to plan for (repeatable), as `select --device`: sim:h100, sim:80GiB. With
    /// --engine vllm its need on each GPU (vLLM's defaults and budget depend on the GPU); with
    /// llama.cpp its fit on them, buffer by device.
    #[arg(long, value_name = "SPEC", value_parser = DeviceSpecs, hide_possible_values = true)]
    pub device: Vec<DeviceSpec>,

    /// With --engine transformers: tokens generated per sequence (max_new_tokens).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..), value_name = "N")]
    pub new_tokens: u32,

    /// With --engine transformers: assisted generation (`generate(assistant_model=...)`), by
    /// this draft model: a catalog name, a config.json, or ORG/NAME on the Hub, read like
    /// --model. One sequence (transformers refuses more).
    #[arg(
        long,
        value_name = "MODEL",
        help_heading = "transformers (--engine transformers)"
    )]
    pub assistant_model: Option<String>,

    /// With --assistant-model: candidates the assistant proposes a round
    /// (num_assistant_tokens; transformers' default 20).
    #[arg(long, default_value_t = 20, requires = "assistant_model", value_parser = clap::value_parser!(u32).range(1..), value_name = "N", help_heading = "transformers (--engine transformers)")]
    pub num_assistant_tokens: u32,

    /// With --engine transformers: a PEFT LoRA adapter of rank R on the model (f32, PEFT's
    /// default), on the projections --adapter-targets names.
    #[arg(long, value_name = "R", value_parser = clap::value_parser!(u32).range(1..=65536), conflicts_with = "adapter_config", help_heading = "transformers (--engine transformers)")]
    pub adapter_rank: Option<u32>,

    /// With --adapter-rank: which projections carry the adapter (`q-v`: PEFT's default for
    /// Llama, Mistral and Qwen).
    #[arg(long, value_enum, default_value_t = AdapterTargets::QV, requires = "adapter_rank", value_name = "TARGETS", help_heading = "transformers (--engine transformers)")]
    pub adapter_targets: AdapterTargets,

    /// With --engine transformers: a PEFT adapter's adapter_config.json (its `r` and
    /// `target_modules`).
    #[arg(
        long,
        value_name = "FILE",
        help_heading = "transformers (--engine transformers)"
    )]
    pub adapter_config: Option<PathBuf>,

    /// vLLM's own settings (with --engine vllm), as `select` takes them.
    #[command(flatten)]
    pub vllm: VllmArgs,
}

/// The projections a generation-time LoRA adapter sits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AdapterTargets {
    /// q_proj and v_proj (PEFT's default for Llama, Mistral and Qwen).
    #[value(name = "q-v")]
    QV,
    /// q, k, v and o.
    Attention,
    /// Every projection of the layers (PEFT's `all-linear`).
    AllLinear,
}

/// Whose inference memory `estimate` counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum InferenceEngine {
    /// llama.cpp: its model, KV-cache and compute buffers.
    #[value(name = "llama.cpp")]
    LlamaCpp,
    /// transformers' generate: weights, the dynamic cache and the prefill's activations.
    Transformers,
    /// vLLM: one rank's budget, weights, profile peak, CUDA graphs and KV blocks on a GPU.
    Vllm,
    /// SGLang: one rank's static fraction, weights and KV pool (max_total_num_tokens) on a GPU.
    Sglang,
    /// Ollama: its default context and parallel requests, then llama-server's fit.
    Ollama,
    /// Every engine that takes the model, side by side on the same devices.
    All,
}

/// Which backend `select` should favour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Preference {
    /// GPU backends with the most usable memory first, CPU last.
    Auto,
    /// NVIDIA GPUs through the CUDA driver.
    Cuda,
    /// AMD GPUs through HIP.
    Rocm,
    /// Apple GPUs (macOS only).
    Metal,
    /// Any OpenCL device, including CPU implementations such as PoCL.
    Opencl,
    /// Any Vulkan device, including software ones such as lavapipe.
    Vulkan,
    /// System RAM: the fallback that always exists.
    Cpu,
}

/// A serving engine `select` writes launch commands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    /// llama.cpp's llama-server (GGUF files; --rpc for other hosts).
    #[value(name = "llama.cpp")]
    LlamaCpp,
    /// vLLM's vllm serve (Hugging Face checkpoints; Ray across hosts).
    Vllm,
    /// SGLang's launch_server (Hugging Face checkpoints; tensor parallel in one host).
    Sglang,
    /// Ollama (GGUF models by name: its store, its registry, or hf.co/ORG/NAME:QUANT).
    Ollama,
}

/// Arguments of `gpumem select`.
#[derive(Debug, Clone, Args)]
#[command(
    after_long_help = after_help(Some("select")),
    after_help = "The training, vLLM, SGLang, Ollama, llama.cpp and generic-rule flags: see --help."
)]
pub struct SelectArgs {
    /// The model (or use --bytes).
    #[command(flatten)]
    pub source: ModelSourceArgs,

    /// Precision, batch, context and runtime.
    #[command(flatten)]
    pub settings: WorkloadSettings,

    /// Plan the longest context that fits (a sequence's, at --batch), found by the serving
    /// engine's own rules, in place of --context.
    #[arg(long, conflicts_with_all = ["context", "bytes"], help_heading = "Workload")]
    pub max_context: bool,

    /// Plan the most sequences of --context that fit at once (llama.cpp's -np, by planning;
    /// vLLM's "Maximum concurrency"), in place of --batch.
    #[arg(long, conflicts_with_all = ["batch", "bytes", "max_context"], help_heading = "Workload")]
    pub max_concurrency: bool,

    /// Plan the weight precision of least loss that fits, from the engine's own (llama.cpp: f16,
    /// q8_0 … q2_k; vLLM: bf16, fp8), in place of --dtype.
    #[arg(long, conflicts_with_all = ["dtype", "bytes", "gguf"], help_heading = "Workload")]
    pub suggest_dtype: bool,

    /// Place a plain byte count instead of a model (e.g. 28GiB).
    #[arg(long, value_parser = parse_bytes, value_name = "SIZE", conflicts_with = "source", help_heading = "Where")]
    pub bytes: Option<u64>,

    /// Plan over inventory files instead of this machine: `gpumem discover --json` documents
    /// (only backend, device name and total required), `nvidia-smi --query-gpu=... --format=csv`
    /// output (one host per file; add `mig.mode.current` to leave out GPUs in MIG mode) or
    /// `kubectl get nodes -o json` (GPU Feature Discovery labels). Formats may be mixed.
    #[arg(long, value_name = "FILE", num_args = 1.., help_heading = "Where")]
    pub inventory: Vec<PathBuf>,

    /// Engines to print launch commands for (repeatable). Default: every engine that can load
    /// the model as given (llama.cpp for a GGUF file, vLLM for a checkpoint or catalog model).
    #[arg(
        long = "engine",
        value_enum,
        value_name = "ENGINE",
        help_heading = "Where"
    )]
    pub engines: Vec<EngineArg>,

    /// Plan for a device you do not have (repeatable): sim:SIZE with a unit (GiB binary, GB
    /// decimal: sim:80GB is 74.5 GiB), or a GPU by name with the total its driver reports
    /// (sim:h100 is 81,559 MiB; h200, a100-80gb, a100-40gb, l40s, l4, a10, t4, rtx5090,
    /// rtx4090, rtx3090, mi300x).
    #[arg(long, value_name = "SPEC", value_parser = DeviceSpecs, hide_possible_values = true, help_heading = "Where")]
    pub device: Vec<DeviceSpec>,

    /// System RAM beside the --device sim GPUs, for CPU-offload plans (e.g. 64GiB).
    #[arg(long, value_parser = parse_bytes, value_name = "SIZE", requires = "device", help_heading = "Where")]
    pub ram: Option<u64>,

    /// vLLM's own settings, for plans made by vLLM's accounting.
    #[command(flatten)]
    pub vllm: VllmArgs,

    /// llama.cpp's own settings, for plans made by its fit.
    #[command(flatten)]
    pub llamacpp: LlamaCppArgs,

    /// Backend to try first; others are still listed with their verdicts.
    #[arg(long, value_enum, default_value_t = Preference::Auto, help_heading = "Generic rule (plans no engine models)", hide_short_help = true)]
    pub prefer: Preference,

    /// Fraction of a device's free memory gpumem may plan to use.
    #[arg(long, default_value_t = 0.9, value_parser = parse_fraction, value_name = "FRACTION", help_heading = "Generic rule (plans no engine models)", hide_short_help = true)]
    pub memory_fraction: f64,

    /// Memory always left free on every device.
    #[arg(long, default_value = "512MiB", value_parser = parse_bytes, value_name = "SIZE", help_heading = "Generic rule (plans no engine models)", hide_short_help = true)]
    pub min_free: u64,

    /// Driver reserve in the usable-memory rule (driver + context + fraction of total, capped).
    #[arg(long, default_value = "500MB", value_parser = parse_bytes, value_name = "SIZE", help_heading = "Generic rule (plans no engine models)", hide_short_help = true)]
    pub driver_reserve: u64,

    /// Context reserve in the usable-memory rule.
    #[arg(long, default_value = "100MB", value_parser = parse_bytes, value_name = "SIZE", help_heading = "Generic rule (plans no engine models)", hide_short_help = true)]
    pub context_reserve: u64,

    /// Fraction of total memory kept as an emergency reserve in the usable-memory rule.
    #[arg(long, default_value_t = 0.10, value_parser = parse_fraction, value_name = "FRACTION", help_heading = "Generic rule (plans no engine models)", hide_short_help = true)]
    pub reserve_fraction: f64,

    /// Cap on the whole reserve.
    #[arg(long, default_value = "2GB", value_parser = parse_bytes, value_name = "SIZE", help_heading = "Generic rule (plans no engine models)", hide_short_help = true)]
    pub reserve_cap: u64,

    /// Per-backend probe timeout when discovering this machine's devices.
    #[arg(long, default_value = "5s", value_parser = parse_duration, value_name = "DURATION", help_heading = "Generic rule (plans no engine models)", hide_short_help = true)]
    pub timeout: Duration,
}

/// Allocation workloads for `bench-alloc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WorkloadKind {
    /// RMM's random_allocations: allocate with probability 0.73, else free a random live block.
    Random,
    /// Every request the same size (--size).
    SameSize,
    /// A mix of small (<1 MiB) and large requests.
    Mixed,
    /// A layer-by-layer inference step of --model over several decode steps.
    Transformer,
    /// Move --transfer-size bytes host↔device in --chunk pieces, blocking versus
    /// double-buffered, a host consumer on every chunk, every byte verified.
    Transfer,
}

/// Size distributions for the random workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SizeDist {
    /// Uniform in [1 B, --max-size].
    Uniform,
    /// Normal around half of --max-size.
    Normal,
    /// Log-normal: many small, few large.
    Lognormal,
    /// Geometric: powers of two, smaller ones more likely.
    Geometric,
}

/// Pass/fail thresholds for CI.
#[derive(Debug, Clone, Args)]
pub struct Gates {
    /// Fail (exit 1) when the pool's hit rate is below this (0–1).
    #[arg(long, value_parser = parse_fraction, value_name = "RATE")]
    pub min_hit_rate: Option<f64>,

    /// Fail when fragmentation when reserved memory peaked is above this (0–1): the free bytes
    /// in cached segments not usable as one block, over all cached bytes, at the moment the
    /// pool held the most. (At the end of a run an emptied cache reads as fragmented.)
    #[arg(long, value_parser = parse_fraction, value_name = "RATIO")]
    pub max_fragmentation: Option<f64>,

    /// Fail when the pool is less than this many times faster than raw device allocation.
    #[arg(long, value_parser = parse_factor, value_name = "FACTOR")]
    pub min_speedup: Option<f64>,

    /// Fail when the pool's p99 allocation latency is above this many nanoseconds.
    #[arg(long, value_name = "NS")]
    pub max_p99_ns: Option<u64>,

    /// Fail when the pool reserved more than this at its peak (e.g. 40GiB): an absolute memory
    /// gate, for a recorded trace whose job's memory must not grow.
    #[arg(long, value_parser = parse_bytes, value_name = "SIZE")]
    pub max_peak_reserved: Option<u64>,
}

/// The CI exports `bench-alloc` and `stress` write besides their report.
#[derive(Debug, Clone, Default, Args)]
pub struct Exports {
    /// Write a Markdown summary (verdict, figures, gates or phases) to FILE; without FILE, add
    /// it to $GITHUB_STEP_SUMMARY (the job page of a GitHub Actions step).
    #[arg(long, value_name = "FILE", num_args = 0..=1)]
    pub export_markdown: Option<Option<PathBuf>>,

    /// Write a JUnit XML report (a test case a gate or a phase, one for the run) to FILE.
    #[arg(long, value_name = "FILE")]
    pub export_junit: Option<PathBuf>,

    /// Write Prometheus gauges of the run to FILE (for node_exporter's textfile collector;
    /// replaced atomically).
    #[arg(long, value_name = "FILE")]
    pub export_prometheus: Option<PathBuf>,
}

/// Arguments of `gpumem bench-alloc`.
#[derive(Debug, Clone, Args)]
#[command(after_long_help = after_help(Some("bench-alloc")))]
pub struct BenchAllocArgs {
    /// Device: host, host:2GiB, sim:80GiB, opencl:0, vulkan:0, cuda:0, rocm:0.
    /// Default: the best available real device.
    #[arg(long, value_name = "SPEC", value_parser = DeviceSpecs, hide_possible_values = true)]
    pub device: Option<DeviceSpec>,

    /// Give up on opening the device (and on discovering one, without --device) after this
    /// long. The driver is first tried in a child process, so one that hangs or crashes is
    /// reported instead of taking gpumem with it.
    #[arg(long, default_value = "30s", value_parser = parse_duration, value_name = "DURATION")]
    pub timeout: Duration,

    /// Workload to run (ignored with --trace).
    #[arg(long, value_enum, default_value_t = WorkloadKind::Random)]
    pub workload: WorkloadKind,

    /// Replay a recorded trace: RMM logging CSV or a PyTorch memory snapshot pickle.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,

    /// Number of allocations (1 to 10,000,000; the sequence is built up front, about 120 bytes
    /// per allocation).
    #[arg(
        short = 'n',
        long = "allocations",
        default_value_t = 1000,
        value_parser = clap::value_parser!(u64).range(1..=MAX_ALLOCATIONS),
        value_name = "N"
    )]
    pub allocations: u64,

    /// Largest request of the synthetic workloads (random, same-size, mixed).
    #[arg(long, default_value = "64MiB", value_parser = parse_nonzero_bytes, value_name = "SIZE")]
    pub max_size: u64,

    /// Bytes moved each way by --workload transfer.
    #[arg(long, default_value = "64MiB", value_parser = parse_nonzero_bytes, value_name = "SIZE")]
    pub transfer_size: u64,

    /// Chunk size of --workload transfer (one host buffer's worth).
    #[arg(long, default_value = "4MiB", value_parser = parse_nonzero_bytes, value_name = "SIZE")]
    pub chunk: u64,

    /// Request size for --workload same-size.
    #[arg(long, default_value = "1MiB", value_parser = parse_nonzero_bytes, value_name = "SIZE")]
    pub size: u64,

    /// Size distribution for --workload random.
    #[arg(long, value_enum, default_value_t = SizeDist::Uniform)]
    pub size_dist: SizeDist,

    /// Seed; the same seed gives the same operation sequence.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,

    /// Model for --workload transformer.
    #[arg(long, default_value = "mistral-7b", value_name = "NAME", value_parser = Offered(catalog_names), hide_possible_values = true)]
    pub model: String,

    /// Batch for --workload transformer.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..))]
    pub batch: u32,

    /// Context for --workload transformer.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..))]
    pub context: u32,

    /// Pool configuration preset. `auto` uses `arena` for the synthetic RMM workloads (random,
    /// same-size, mixed: RMM's benchmark runs them on a pool of half the free memory) and
    /// `inference` (PyTorch's caching semantics) for --workload transformer and --trace.
    #[arg(long, value_enum, default_value_t = Preset::Auto)]
    pub preset: Preset,

    /// Decode steps for --workload transformer (after the prompt fills the rest of --context).
    #[arg(long, default_value_t = 32, value_name = "N")]
    pub decode_steps: u32,

    /// Skip the raw replay straight on the device (no speedup is measured).
    #[arg(long = "no-raw", alias = "no-baseline")]
    pub no_raw: bool,

    /// Also report the pool beside the device's own allocator on the same replay (`native`: on
    /// CUDA the driver's stream-ordered pool, cuMemAllocAsync/cuMemFreeAsync on the device's
    /// default pool; elsewhere the raw replay, one device allocation per request, freed on
    /// release): ops/s, allocate p50/p99, peak reserved, peak live and reserved/live, each with
    /// its pool ÷ native ratio.
    #[arg(long, value_enum, value_name = "ALLOCATOR")]
    pub compare: Option<CompareWith>,

    /// Measured runs, each on a fresh pool; the report gives each figure's mean ± σ, median and
    /// range, and gates judge the median.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000), value_name = "N")]
    pub runs: u32,

    /// Instead of --runs, with --max-regression: make N measured runs, then one more at a time
    /// while a gate is undecided at --confidence, until every gate is decided or --max-runs
    /// are made [default: 3, or --max-runs when fewer].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000), requires = "max_runs", conflicts_with = "runs")]
    pub min_runs: Option<u32>,

    /// Instead of --runs, with --max-regression: at most M measured runs (see --min-runs); a
    /// gate still undecided then exits 6. The baseline's runs bound the confidence too: against
    /// m of them, n runs give a p-value of at least 1/C(m+n, m), and when M runs cannot reach
    /// --confidence the command stops at once and says how many could.
    #[arg(long, value_name = "M", value_parser = clap::value_parser!(u32).range(1..=1000), requires = "max_regression", conflicts_with = "runs")]
    pub max_runs: Option<u32>,

    /// Runs before the measured ones, not counted (caches, page faults, clocks).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=100), value_name = "K")]
    pub warmup: u32,

    /// Save the measured runs as a baseline (versioned JSON) for a later --baseline.
    #[arg(long, value_name = "FILE")]
    pub save_baseline: Option<PathBuf>,

    /// Compare this run with a saved baseline of the same workload: a table of old, new,
    /// change and verdict.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,

    /// With --baseline: fail when METRIC's median is worse than the baseline's by more than
    /// PCT percent and a one-sided Mann-Whitney U test of the two sets of runs calls the shift
    /// significant at --confidence (repeatable); when it cannot (too few or too noisy runs),
    /// the gate is undecided and the run exits 6. METRIC: ops-per-sec, speedup, hit-rate,
    /// fragmentation, peak-reserved, alloc-p50-ns, alloc-p99-ns, free-p99-ns.
    #[arg(long, value_name = "METRIC:PCT", requires = "baseline")]
    pub max_regression: Vec<RegressionGate>,

    /// With --baseline: the confidence the comparison decides at, from 0.5 to 0.9999 [default:
    /// 0.95]. Higher asks for more runs: at 0.95, 3 runs on each side can decide; at 0.99, 5.
    #[arg(long, value_name = "LEVEL", requires = "baseline")]
    pub confidence: Option<f64>,

    /// With --baseline: compare with a baseline recorded on another device (the report labels
    /// the comparison as one between different devices). Without it, such a baseline is
    /// refused (exit 2).
    #[arg(long, requires = "baseline")]
    pub allow_other_device: bool,

    /// Write a signature into each buffer on a real device and check it on free (default).
    #[arg(long, overrides_with = "no_verify")]
    pub verify: bool,

    /// Do not write and check bytes in each buffer.
    #[arg(long, overrides_with = "verify")]
    pub no_verify: bool,

    /// Draw allocated and reserved bytes over the run as an SVG.
    #[arg(long, value_name = "FILE.svg")]
    pub timeline: Option<PathBuf>,

    /// CI exports of the run.
    #[command(flatten)]
    pub exports: Exports,

    /// Thresholds that turn the run into a CI check (exit 1 when one fails).
    #[command(flatten)]
    pub gates: Gates,
}

/// Which `MemoryConfig` preset the pool under test uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Preset {
    /// `arena` for random/same-size/mixed, `inference` for transformer and traces,
    /// `expandable` for PyTorch snapshots recorded with expandable segments.
    Auto,
    /// RMM-style: one arena of half the usable limit carved for every size, grown when full.
    Arena,
    /// MemoryConfig::default(): keeps at most 8 idle segments of each size.
    Default,
    /// MemoryConfig::for_inference(): keeps every idle segment.
    Inference,
    /// MemoryConfig::for_training(): conservative limit, keeps every idle segment.
    Training,
    /// MemoryConfig::for_constrained(): few idle segments, big blocks never split.
    Constrained,
    /// PyTorch's caching allocator: fixed size classes (2 MiB, 20 MiB, exact), every idle
    /// segment kept; the other presets grow segments with demand.
    Pytorch,
    /// Expandable segments (PyTorch's expandable_segments:True): one address range per stream
    /// grown by mapping memory (host, sim and CUDA; ordinary segments elsewhere).
    Expandable,
}

/// The phases `stress` can run, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Phase {
    /// Allocate until pressure is Critical, seeing every level in order.
    Ramp,
    /// Allocate past the device limit: retry, then CPU fallback or a typed OOM error.
    Exhaust,
    /// Threads allocate, fill, verify and free near High pressure.
    Churn,
    /// Free everything, empty the cache and check nothing leaked.
    Recover,
}

/// Arguments of `gpumem stress`.
#[derive(Debug, Clone, Args)]
#[command(after_long_help = after_help(Some("stress")))]
pub struct StressArgs {
    /// Device: host:512MiB, opencl:0, vulkan:0, cuda:0, rocm:0. Default: the best real device.
    #[arg(long, value_name = "SPEC", value_parser = DeviceSpecs, hide_possible_values = true)]
    pub device: Option<DeviceSpec>,

    /// Give up on opening the device (and on discovering one, without --device) after this
    /// long. The driver is first tried in a child process, so one that hangs or crashes is
    /// reported instead of taking gpumem with it.
    #[arg(long, default_value = "30s", value_parser = parse_duration, value_name = "DURATION")]
    pub timeout: Duration,

    /// Run only these phases (repeatable). Default: all, in order.
    #[arg(long = "phase", value_enum, value_name = "PHASE")]
    pub phases: Vec<Phase>,

    /// Serve requests the device cannot hold from CPU memory (default).
    #[arg(long, overrides_with = "no_cpu_fallback")]
    pub cpu_fallback: bool,

    /// Fail such requests with the typed out-of-memory error instead.
    #[arg(long, overrides_with = "cpu_fallback")]
    pub no_cpu_fallback: bool,

    /// Churn threads. Default: the number of cores.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), value_name = "N")]
    pub threads: Option<u32>,

    /// How long the churn phase runs.
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    pub duration: Duration,

    /// Run the churn phase for this many operations instead of --duration.
    #[arg(long, value_name = "N")]
    pub ops: Option<u64>,

    /// Make this fraction of raw device allocations fail (0–1) to prove they are survived.
    #[arg(long, value_parser = parse_fraction, value_name = "RATE")]
    pub inject_failures: Option<f64>,

    /// Largest request in the churn phase (at least 512 B: one block).
    #[arg(long, default_value = "16MiB", value_parser = parse_block_bytes, value_name = "SIZE")]
    pub max_size: u64,

    /// Stress within this budget instead of the whole device (the pool's max_pool_bytes).
    #[arg(long, value_parser = parse_bytes, value_name = "SIZE")]
    pub max_pool: Option<u64>,

    /// Seed for sizes and injected failures.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,

    /// CI exports of the run.
    #[command(flatten)]
    pub exports: Exports,

    /// Test hook: damage one churn buffer behind the pool's back, to prove detection works.
    #[arg(long, hide = true)]
    pub plant_corruption: bool,
}

/// The most allocations `bench-alloc -n` builds.
pub const MAX_ALLOCATIONS: u64 = 10_000_000;

#[cfg(test)]
mod tests {
    use super::values::parse_percent;
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn fractions_and_percents() {
        assert_eq!(parse_fraction("0.9"), Ok(0.9));
        assert!(parse_fraction("1.5").is_err());
        assert!(parse_fraction("nan").is_err());
        assert_eq!(parse_percent("10%"), Ok(10.0));
        assert!(parse_percent("-1").is_err());
    }
}
