//! How SGLang is started (`python -m sglang.launch_server` flags) and the defaults it picks from
//! the GPU's memory when they are not given (`arg_groups/memory_hook.py`,
//! `handle_gpu_memory_settings`): the prefill chunk, the largest decode batch its CUDA graphs
//! capture, and from both the static memory fraction.

const MIB: u64 = 1 << 20;

/// `launch_server` flags gpumem plans with (`None`: SGLang's default).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SglangRun {
    /// `--mem-fraction-static`.
    pub mem_fraction_static: Option<f64>,
    /// `--tp-size` (`--tp`): only layouts of this many ranks.
    pub tp_size: Option<u64>,
    /// `--max-running-requests`.
    pub max_running_requests: Option<u64>,
    /// `--chunked-prefill-size`.
    pub chunked_prefill_size: Option<u64>,
    /// `--max-total-tokens`: a cap on the pool's tokens.
    pub max_total_tokens: Option<u64>,
    /// `--disable-cuda-graph`: no graphs captured, none reserved for.
    pub disable_cuda_graph: bool,
    /// `--speculative-algorithm`.
    pub speculative: Option<super::speculative::SpecAlgorithm>,
    /// `--speculative-draft-model-path`, passed through to the launch.
    pub draft_model: Option<String>,
}

/// What SGLang picks for a GPU of `gpu_mib` (nvidia-smi's `memory.total`) at `tp` ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeDefaults {
    /// `chunked_prefill_size`.
    pub chunked_prefill_size: u64,
    /// The largest decode batch a CUDA graph is captured for (`cuda_graph_max_bs`).
    pub cuda_graph_max_bs: u64,
}

impl ServeDefaults {
    /// `memory_hook.py`'s table by GPU memory (MiB): the chunk and the decode graphs' batch.
    pub fn of(gpu_mib: u64, tp: u64) -> Self {
        let wide = tp >= 4;
        let (chunk, bs) = match gpu_mib {
            m if m < 20 * 1024 => (2048, 8),
            m if m < 35 * 1024 => (4096, if wide { 160 } else { 48 }),
            m if m < 60 * 1024 => (4096, if wide { 160 } else { 32 }),
            m if m < 160 * 1024 => (8192, if wide { 512 } else { 256 }),
            _ => (16384, 512),
        };
        ServeDefaults {
            chunked_prefill_size: chunk,
            cuda_graph_max_bs: bs,
        }
    }
}

/// The prefill CUDA graph's capture sizes up to `max_tokens` (`cuda_graph_hook.py`): 4 to 32 by
/// 4, to 256 by 16, to 512 by 32, to 1024 by 64, to 4096 by 256, then by 512.
fn prefill_graphs(max_tokens: u64) -> u64 {
    let steps: [(u64, u64, u64); 6] = [
        (4, 32, 4),
        (48, 256, 16),
        (288, 512, 32),
        (576, 1024, 64),
        (1280, 4096, 256),
        (4608, u64::MAX, 512),
    ];
    steps
        .iter()
        .map(|&(from, to, step)| {
            let last = to.min(max_tokens);
            if last < from {
                0
            } else {
                (last - from) / step + 1
            }
        })
        .sum()
}

/// SGLang's default `--mem-fraction-static` for a GPU of `gpu_mib` at `tp` ranks, and the MiB it
/// keeps out (`memory_hook.py`): 512 MiB, 1.5 MiB a token of the prefill chunk (at least 2,048
/// tokens), 128 MiB a rank, 2 MiB a decode graph batch and 8 MiB a prefill graph (1,536 MiB in
/// all under MLA), at least 10 GiB on GPUs over 60 GiB; `round((G − reserve) / G, 3)`.
#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_precision_loss,
    reason = "MiB figures far below 2^52; the reserve is non-negative"
)]
pub fn default_fraction(gpu_mib: u64, tp: u64, mla: bool, run: &SglangRun) -> (f64, u64) {
    let d = ServeDefaults::of(gpu_mib, tp);
    let chunk = run.chunked_prefill_size.unwrap_or(d.chunked_prefill_size);
    let graphs = !run.disable_cuda_graph;
    let mut reserve = 512.0 + 1.5 * chunk.max(2048) as f64 + tp as f64 / 8.0 * 1024.0;
    if graphs {
        let decode_bs = run
            .max_running_requests
            .map_or(d.cuda_graph_max_bs, |r| r.min(d.cuda_graph_max_bs));
        reserve += 2.0 * decode_bs as f64;
        reserve += if mla {
            1536.0
        } else {
            8.0 * prefill_graphs(if mla { chunk.min(8192) } else { chunk }) as f64
        };
    }
    if gpu_mib > 60 * 1024 {
        reserve = reserve.max(10.0 * 1024.0);
    }
    let g = gpu_mib as f64;
    let fraction = ((g - reserve) / g * 1000.0).round() / 1000.0;
    (fraction, reserve.round() as u64)
}

/// nvidia-smi's MiB for a GPU of `total_bytes`.
pub(crate) fn gpu_mib(total_bytes: u64) -> u64 {
    total_bytes / MIB
}

#[cfg(test)]
mod tests {
    use super::*;

    // SGLang's own defaults, worked through memory_hook.py for the GPUs its table names.
    #[test]
    fn default_fractions_are_sglangs() {
        let run = SglangRun::default();
        assert_eq!(default_fraction(81_559, 1, false, &run), (0.83, 13_904));
        assert_eq!(default_fraction(143_771, 1, false, &run).0, 0.903);
        assert_eq!(default_fraction(24_564, 1, false, &run).0, 0.704);
        assert_eq!(default_fraction(46_068, 1, false, &run).0, 0.843);
        assert_eq!(default_fraction(81_559, 8, false, &run).0, 0.812);
        assert_eq!(prefill_graphs(8192), 58);
        assert_eq!(prefill_graphs(4096), 50);
        assert_eq!(prefill_graphs(2048), 42);
        assert_eq!(prefill_graphs(16384), 74);
    }
}
