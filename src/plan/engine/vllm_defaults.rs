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
