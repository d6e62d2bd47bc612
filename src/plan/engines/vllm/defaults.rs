//! vLLM 0.33's defaults, as data: `vllm/engine/arg_utils.py` (`get_batch_defaults`, the
//! OpenAI server's column), `vllm/config/cache.py` and `vllm/config/vllm.py`
//! (`_set_cudagraph_sizes`).

const GIB: u64 = 1 << 30;

/// `--gpu-memory-utilization`'s default (`CacheConfig.gpu_memory_utilization`).
pub const GPU_MEMORY_UTILIZATION: f64 = 0.92;

/// `--block-size`'s default on CUDA (`CacheConfig.DEFAULT_BLOCK_SIZE`).
pub const BLOCK_SIZE: u64 = 16;

/// The floor vLLM's CUDA-graph profiler puts on each graph after the first
/// (`profile_cudagraph_memory`: "at least 1 MiB per graph for driver overhead").
pub const PER_GRAPH_FLOOR: u64 = 1 << 20;

/// What vLLM's CUDA-graph profiler measures for each graph after the first, a decoder layer of the
/// rank: the driver's memory for the captured kernels, which grows with the layers a graph runs
/// (vLLM 0.19's H100 logs print 4-10 MiB a graph for 27-48 layers and 10-20 MiB for 80).
pub const GRAPH_BYTES_PER_LAYER: u64 = 180 << 10;

/// The split-KV partitions a captured FlashAttention decode may use
/// (`_DEFAULT_MAX_NUM_SPLITS_FOR_CUDA_GRAPH`): each holds an f32 partial output and
/// log-sum-exp a head and sequence.
pub const MAX_SPLITS_IN_GRAPH: u64 = 32;

/// What the forward pass adds outside torch's allocator after vLLM's start-up snapshot on every
/// rank (cuBLAS and attention-backend workspaces): 0.24-0.27 GiB in vLLM 0.19's H100 logs for
/// 19 models at TP 1, 0.25-0.35 GiB in 0.6-0.8's.
pub const NON_TORCH_FORWARD: u64 = 256 << 20;

/// NCCL's NVLink SHARP buffers, set up at the first all-reduce (after the snapshot) where the
/// ranks sit on an NVSwitch of Hopper or later: vLLM 0.19's H100 logs print 2.06-2.11 GiB of
/// non-torch memory at TP 2 and 2.13-2.21 GiB at TP 4 against 0.25 at TP 1: this much, and
/// `NVLS_PER_RANK` more a rank.
pub const NVLS_BASE: u64 = 1_802 << 20;
/// What each tensor-parallel rank adds to NCCL's NVLink SHARP buffers.
pub const NVLS_PER_RANK: u64 = 31 << 20;

/// The largest CUDA-graph capture size before `2 × max_num_seqs` caps it (512; 1024 on
/// Blackwell, which gpumem does not tell apart).
pub const MAX_CAPTURE_SIZE: u64 = 512;

/// The GPU classes vLLM's batch defaults tell apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuClass {
    /// 160 GiB or more (B200, B300).
    Huge,
    /// 70 GiB or more and not an A100 (H100, H200).
    Large,
    /// Everything else, A100s included.
    Other,
}

impl GpuClass {
    /// The class of a device of `total` bytes; `is_a100` comes from its name, parsed once by
    /// the caller (vLLM checks the name for "a100").
    pub fn of(total: u64, is_a100: bool) -> Self {
        if total >= 160 * GIB {
            GpuClass::Huge
        } else if total >= 70 * GIB && !is_a100 {
            GpuClass::Large
        } else {
            GpuClass::Other
        }
    }

    /// Whether tensor-parallel ranks of this class all-reduce over NVLink SHARP: the Hopper and
    /// Blackwell data-centre parts, taken to sit on an NVSwitch as they do in the servers vLLM
    /// publishes for (an A100 has no SHARP; a PCIe H100 is not told apart).
    pub fn nvls(self) -> bool {
        matches!(self, GpuClass::Huge | GpuClass::Large)
    }

    /// `max_num_batched_tokens` for `vllm serve`.
    pub fn max_num_batched_tokens(self) -> u64 {
        match self {
            GpuClass::Huge => 16_384,
            GpuClass::Large => 8_192,
            GpuClass::Other => 2_048,
        }
    }

    /// `max_num_seqs` for `vllm serve`.
    pub fn max_num_seqs(self) -> u64 {
        match self {
            GpuClass::Huge | GpuClass::Large => 1_024,
            GpuClass::Other => 256,
        }
    }
}

/// vLLM's CUDA-graph capture sizes up to `max` tokens: 1, 2, 4, then every 8 below 256, then
/// every 16.
pub fn capture_sizes(max: u64) -> impl Iterator<Item = u64> {
    [1u64, 2, 4]
        .into_iter()
        .chain((8..256).step_by(8))
        .chain((256..=max.max(256)).step_by(16))
        .filter(move |&s| s <= max)
}

/// Batches a sliding layer's blocks stay held for besides its window
/// (`VllmConfig.max_in_flight_tokens`, one `max_num_batched_tokens` each): asynchronous
/// scheduling, on by default, overlaps two steps on one stage.
pub const IN_FLIGHT_BATCHES: u64 = 2;
