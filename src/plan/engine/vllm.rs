//! vLLM 0.33's memory accounting for one tensor-parallel rank, as `gpu_worker.py`
//! (`determine_available_memory`), `utils/mem_utils.py` (`memory_profiling`) and
//! `v1/core/kv_cache_planning.py` compute it:
//!
//! ```text
//! budget   = ceil(total × --gpu-memory-utilization)          (request_memory)
//! KV cache = budget − weights − profile peak − non-torch − CUDA-graph estimate
//! blocks   = KV cache ÷ (block_size tokens × every attention layer's page)
//! tokens   = blocks ÷ blocks one request of max_model_len takes × max_model_len
//! ```
//!
//! The CUDA context, the communicators and cuBLAS's handles are allocated before vLLM's
//! start-up snapshot, so they are outside the budget: they must fit in the rest of the device.
//! The profile peak and the CUDA-graph pool are measured by vLLM at run time; here they are
//! modelled from the architecture ([`Basis::Modelled`]).

use serde::Serialize;

use super::vllm_defaults::{self as defaults, GpuClass};
use super::{Basis, Term, TermKind};
use crate::model::{Attention, Mlp, ModelArch};

/// How vLLM is started (`vllm serve` flags).
#[derive(Debug, Clone, PartialEq)]
pub struct VllmConfig {
    /// `--gpu-memory-utilization`, in (0, 1].
    pub gpu_memory_utilization: f64,
    /// `--max-model-len`.
    pub max_model_len: u64,
    /// `--max-num-batched-tokens` (`None`: vLLM's default for the GPU).
    pub max_num_batched_tokens: Option<u64>,
    /// `--max-num-seqs` (`None`: vLLM's default for the GPU).
    pub max_num_seqs: Option<u64>,
    /// `--block-size`.
    pub block_size: u64,
    /// Bytes per KV-cache element (`--kv-cache-dtype`: 2 for auto on a 16-bit model, 1 for fp8).
    pub kv_element_bytes: u64,
    /// `--enforce-eager`: no CUDA graphs, no graph pool.
    pub enforce_eager: bool,
}

impl VllmConfig {
    /// vLLM's defaults for a model served at `max_model_len`.
    pub fn defaults(max_model_len: u64) -> Self {
        VllmConfig {
            gpu_memory_utilization: defaults::GPU_MEMORY_UTILIZATION,
            max_model_len,
            max_num_batched_tokens: None,
            max_num_seqs: None,
            block_size: defaults::BLOCK_SIZE,
            kv_element_bytes: 2,
            enforce_eager: false,
        }
    }
}

impl VllmConfig {
    /// vLLM's defaults for a model estimated under `settings`: its context as `max_model_len`
    /// and its KV-cache precision as the element size (vLLM's fp8 cache is one byte).
    pub fn for_settings(settings: &crate::model::Settings) -> Self {
        let kv = settings.kv_dtype;
        VllmConfig {
            kv_element_bytes: (kv.block_bytes / kv.block_elems.max(1)).max(1),
            ..VllmConfig::defaults(settings.context)
        }
    }
}

/// The GPU one rank runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VllmGpu {
    /// Total memory, as `cudaMemGetInfo` reports it.
    pub total_bytes: u64,
    /// Whether it is an A100 (vLLM keeps the small batch defaults there).
    pub is_a100: bool,
}

/// The model as vLLM loads it.
#[derive(Debug, Clone, Copy)]
pub struct VllmModel<'a> {
    /// Its shape.
    pub arch: &'a ModelArch,
    /// Bytes of all weights (the checkpoint's, or parameters × dtype).
    pub weights_bytes: u64,
    /// Bytes per activation element (the model dtype: 2 for bf16/fp16).
    pub activation_bytes: u64,
}

/// Why vLLM would not accept a tensor-parallel size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum LayoutRejection {
    /// The attention heads do not divide evenly over the ranks.
    HeadsNotDivisible {
        /// Attention heads.
        heads: u64,
    },
    /// The KV heads neither divide over the ranks nor replicate evenly.
    KvHeadsIncompatible {
        /// KV heads.
        kv_heads: u64,
    },
}

/// Whether vLLM accepts tensor parallel size `tp` for `arch` (`ModelConfig.verify_with_parallel_config`
/// and `QKVParallelLinear`).
pub fn accepts_tp(arch: &ModelArch, tp: u64) -> Result<(), LayoutRejection> {
    if tp == 0 || arch.num_heads % tp != 0 {
        return Err(LayoutRejection::HeadsNotDivisible {
            heads: arch.num_heads,
        });
    }
    let kv = arch.num_kv_heads;
    let standard = matches!(arch.attention, Attention::Standard { .. });
    if standard && kv > 0 && !(kv % tp == 0 || tp % kv == 0) {
        return Err(LayoutRejection::KvHeadsIncompatible { kv_heads: kv });
    }
    Ok(())
}

/// What vLLM decides on one rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum VllmOutcome {
    /// It starts and serves at least one request of `max_model_len`.
    Serves,
    /// "No available memory for the cache blocks": the budget is spent before the KV cache.
    NoKvMemory {
        /// Bytes the non-KV terms pass the budget by.
        short_bytes: u64,
    },
    /// One request of `max_model_len` needs more KV cache than there is: vLLM refuses and
    /// prints its estimate of the longest `max_model_len` that fits.
    ModelLenTooLong {
        /// KV bytes one request of `max_model_len` needs.
        needed_bytes: u64,
        /// KV bytes there are (one block held back, as vLLM's check does).
        available_bytes: u64,
        /// vLLM's "estimated maximum model length".
        estimated_max_model_len: u64,
    },
    /// `max_model_len` is longer than the model's `max_position_embeddings`: vLLM refuses it
    /// unless `VLLM_ALLOW_LONG_MAX_MODEL_LEN` is set.
    LongerThanTrained {
        /// The model's own context length.
        trained: u64,
    },
    /// The budget is more than the device has free after start-up: vLLM refuses to start
    /// ("Free memory on device … is less than desired GPU memory utilization").
    BudgetAboveFree {
        /// Bytes it is short by.
        short_bytes: u64,
    },
}

/// One rank's accounting and what it serves.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VllmFit {
    /// Tensor-parallel size.
    pub tensor_parallel: u64,
    /// `max_num_batched_tokens` the profile ran with.
    pub max_num_batched_tokens: u64,
    /// `max_num_seqs` the sampler was profiled over.
    pub max_num_seqs: u64,
    /// Every term on one rank, in vLLM's order.
    pub terms: Vec<Term>,
    /// Bytes of one KV block over every attention layer of the rank.
    pub block_bytes: u64,
    /// KV-cache blocks.
    pub num_blocks: u64,
    /// Blocks one request of `max_model_len` takes.
    pub blocks_per_request: u64,
    /// What vLLM prints as "GPU KV cache size: N tokens".
    pub kv_tokens: u64,
    /// "Maximum concurrency for L tokens per request", in hundredths (vLLM prints two decimals).
    pub max_concurrency_centi: u64,
    /// Whether it starts.
    pub outcome: VllmOutcome,
}

impl VllmFit {
    /// The bytes of one term.
    pub fn term(&self, kind: TermKind) -> u64 {
        self.terms
            .iter()
            .find(|t| t.term == kind)
            .map_or(0, |t| t.bytes)
    }
}

/// What gpumem cannot yet model of vLLM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unmodelled {
    /// Mamba/linear-attention state pages (vLLM's `MambaSpec`).
    #[error("vLLM's state pages for recurrent layers are not modelled")]
    RecurrentLayers,
}

// The CUDA context, NCCL/custom all-reduce buffers and cuBLAS handles taken before the
// snapshot; vLLM 0.6-0.8 logs report this stage as 0.25-0.35 GiB ("non_torch_memory").
const STARTUP_BYTES: u64 = 384 << 20;

/// vLLM's accounting for `model` on one rank of `tp` identical `gpu`s under `cfg`.
pub fn fit(
    model: &VllmModel<'_>,
    gpu: VllmGpu,
    tp: u64,
    cfg: &VllmConfig,
) -> Result<VllmFit, Unmodelled> {
    let arch = model.arch;
    if arch.recurrent_layer_count() > 0 {
        return Err(Unmodelled::RecurrentLayers);
    }
    let tp = tp.max(1);
    let class = GpuClass::of(gpu.total_bytes, gpu.is_a100);
    let tokens = cfg
        .max_num_batched_tokens
        .unwrap_or_else(|| class.max_num_batched_tokens());
    let seqs = cfg.max_num_seqs.unwrap_or_else(|| class.max_num_seqs());
    let budget = ceil_fraction(gpu.total_bytes, cfg.gpu_memory_utilization);
    let weights = weights_per_rank(model, tp);
    let per_token = forward_bytes_per_token(model, tp);
    let sampler = tokens.saturating_mul(arch.hidden_size * model.activation_bytes)
        + seqs.saturating_mul(arch.vocab_size.saturating_mul(model.activation_bytes + 8));
    let profile = tokens.saturating_mul(per_token).max(sampler);
    let graphs = if cfg.enforce_eager {
        0
    } else {
        cuda_graph_estimate(per_token, tokens, seqs)
    };
    let non_torch = 0;
    let spent = u128::from(weights) + u128::from(profile) + u128::from(graphs);
    let kv = u128::from(budget).saturating_sub(spent);
    let kv = u64::try_from(kv).unwrap_or(u64::MAX);
    let pages = KvPages::of(arch, tp, cfg, tokens);
    let num_blocks = kv / pages.block_bytes.max(1);
    let per_request = pages.blocks_per_request(cfg.max_model_len);
    let outcome = match arch.max_position_embeddings {
        Some(trained) if cfg.max_model_len > trained => VllmOutcome::LongerThanTrained { trained },
        _ => outcome(&pages, cfg, budget, spent, kv, gpu.total_bytes),
    };
    let computed = |term, bytes| Term {
        term,
        bytes,
        basis: Basis::Computed,
    };
    let modelled = |term, bytes| Term {
        term,
        bytes,
        basis: Basis::Modelled,
    };
    Ok(VllmFit {
        tensor_parallel: tp,
        max_num_batched_tokens: tokens,
        max_num_seqs: seqs,
        terms: vec![
            computed(TermKind::Budget, budget),
            computed(TermKind::Weights, weights),
            modelled(TermKind::ProfilePeak, profile),
            modelled(TermKind::NonTorch, non_torch),
            modelled(TermKind::CudaGraphs, graphs),
            computed(TermKind::KvCache, kv),
            modelled(TermKind::Startup, STARTUP_BYTES),
        ],
        block_bytes: pages.block_bytes,
        num_blocks,
        blocks_per_request: per_request,
        kv_tokens: kv_tokens(num_blocks, per_request, cfg.max_model_len),
        max_concurrency_centi: concurrency_centi(num_blocks, per_request),
        outcome,
    })
}

fn outcome(
    pages: &KvPages,
    cfg: &VllmConfig,
    budget: u64,
    spent: u128,
    kv: u64,
    total: u64,
) -> VllmOutcome {
    let free_after_startup = total.saturating_sub(STARTUP_BYTES);
    if budget > free_after_startup {
        return VllmOutcome::BudgetAboveFree {
            short_bytes: budget - free_after_startup,
        };
    }
    if kv == 0 {
        return VllmOutcome::NoKvMemory {
            short_bytes: u64::try_from(spent - u128::from(budget)).unwrap_or(u64::MAX),
        };
    }
    // vLLM plans against usable blocks: the null block is held back.
    let available = kv.saturating_sub(pages.block_bytes);
    let needed = pages
        .blocks_per_request(cfg.max_model_len)
        .saturating_mul(pages.block_bytes);
    if needed <= available {
        return VllmOutcome::Serves;
    }
    let (mut lo, mut hi) = (0u64, cfg.max_model_len);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if pages
            .blocks_per_request(mid)
            .saturating_mul(pages.block_bytes)
            <= available
        {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    VllmOutcome::ModelLenTooLong {
        needed_bytes: needed,
        available_bytes: available,
        estimated_max_model_len: lo,
    }
}

/// `ceil(total × fraction)`, as `request_memory` computes it.
#[expect(
    clippy::cast_possible_truncation,
    reason = "a float cast saturates; the fraction is at most 1"
)]
fn ceil_fraction(total: u64, fraction: f64) -> u64 {
    (total as f64 * fraction).ceil() as u64
}

/// Weights on one rank: everything is split `tp` ways (vocabulary, heads, MLP and experts)
/// except the norms, which every rank holds whole, and K/V projections, which are replicated
/// when there are more ranks than KV heads.
fn weights_per_rank(model: &VllmModel<'_>, tp: u64) -> u64 {
    let arch = model.arch;
    let params = u128::from(arch.params().total.max(1));
    let bytes = u128::from(model.weights_bytes);
    let per_param = |p: u128| p * bytes / params;
    let h = u128::from(arch.hidden_size);
    let norms =
        u128::from(arch.num_layers * arch.norms_per_layer + 1) * u128::from(arch.norm_params());
    let replicated = per_param(norms).min(bytes);
    let mut per_rank = (bytes - replicated).div_ceil(u128::from(tp)) + replicated;
    let kv = u128::from(arch.num_kv_heads);
    let tp = u128::from(tp);
    if matches!(arch.attention, Attention::Standard { .. }) && kv > 0 && tp > kv {
        // Each rank holds one whole KV head where an even split would give it kv/tp of one.
        let kv_layers = u128::from(arch.attention_layer_count());
        let one_head = 2 * h * u128::from(arch.head_dim) * kv_layers;
        per_rank += per_param(one_head) - per_param(one_head * kv / tp);
    }
    u64::try_from(per_rank).unwrap_or(u64::MAX)
}

/// Activation bytes per token at the forward pass's peak on one rank: the residual, the block's
/// normed input and the previous block's output beside the widest block's intermediates (the MLP's gate-up and activated halves,
/// the fused-MoE caches of the routed experts, or the attention's q/k/v and output).
fn forward_bytes_per_token(model: &VllmModel<'_>, tp: u64) -> u64 {
    let arch = model.arch;
    let h = arch.hidden_size;
    let q = arch.num_heads / tp.max(1) * arch.head_dim;
    let kv = (arch.num_kv_heads / tp).max(1) * arch.head_dim;
    let attention = 3 * h + q + 2 * kv + q;
    let mlp = |inter: u64| match arch.mlp {
        Mlp::Gated => 3 * inter.div_ceil(tp),
        Mlp::Plain => 2 * inter.div_ceil(tp),
    };
    let dense = if arch.ffn_layer_count() > arch.moe_layers() {
        3 * h + mlp(arch.intermediate_size)
    } else {
        0
    };
    let moe = arch.moe.as_ref().map_or(0, |m| {
        3 * h + m.experts_per_token * (mlp(m.expert_intermediate) + h) + mlp(m.shared_intermediate)
    });
    attention.max(dense).max(moe) * model.activation_bytes
}

/// vLLM's CUDA-graph estimate: the first (largest) capture's pool, which holds that batch's
/// activations, and the per-graph floor for every other piecewise and full-decode graph.
fn cuda_graph_estimate(per_token: u64, tokens: u64, seqs: u64) -> u64 {
    let largest = (2 * seqs).min(defaults::MAX_CAPTURE_SIZE).min(tokens);
    let piecewise = defaults::capture_sizes(largest).count() as u64;
    let full = defaults::capture_sizes(largest.min(seqs)).count() as u64;
    let others = piecewise.saturating_sub(1) + full.saturating_sub(1);
    largest * per_token + others * defaults::PER_GRAPH_FLOOR
}

/// The KV cache's pages on one rank: one block's bytes and how requests take blocks.
struct KvPages {
    block_bytes: u64,
    block_size: u64,
    /// Groups of full-attention layers (each takes a request's whole length).
    full_groups: u64,
    /// Groups of sliding-window layers (each takes the window and a batch).
    sliding_groups: u64,
    /// Tokens a sliding group keeps: window − 1 + max_num_batched_tokens.
    sliding_tokens: u64,
}

impl KvPages {
    fn of(arch: &ModelArch, tp: u64, cfg: &VllmConfig, tokens: u64) -> Self {
        let per_token_layer = match arch.attention {
            Attention::Standard { .. } => {
                2 * (arch.num_kv_heads / tp).max(1) * arch.head_dim * cfg.kv_element_bytes
            }
            // MLA's latent is the same on every rank.
            Attention::Mla { .. } => arch.kv_elements_per_token_layer() * cfg.kv_element_bytes,
        };
        let page = cfg.block_size * per_token_layer;
        let attention: Vec<u64> = (0..arch.num_layers)
            .filter(|&i| arch.has_attention(i))
            .collect();
        let sliding = attention
            .iter()
            .filter(|&&i| arch.is_sliding_layer(i))
            .count() as u64;
        let full = attention.len() as u64 - sliding;
        // vLLM's hybrid manager groups layers of one kind into groups of equal size; the
        // groups share one pool, whose block spans one layer of each group slot.
        let group = match (full, sliding) {
            (0, s) => s,
            (f, 0) => f,
            (f, s) => f.min(s),
        }
        .max(1);
        KvPages {
            block_bytes: page * group,
            block_size: cfg.block_size,
            full_groups: full.div_ceil(group),
            sliding_groups: sliding.div_ceil(group),
            sliding_tokens: arch
                .sliding_window
                .as_ref()
                .map_or(0, |w| w.window.saturating_sub(1) + tokens),
        }
    }

    fn blocks_per_request(&self, len: u64) -> u64 {
        let full = len.div_ceil(self.block_size);
        let sliding = len.min(self.sliding_tokens).div_ceil(self.block_size) + 1;
        self.full_groups * full + self.sliding_groups * sliding
    }
}

/// "GPU KV cache size": the concurrency times `max_model_len`, as vLLM 0.33 prints it.
fn kv_tokens(blocks: u64, per_request: u64, len: u64) -> u64 {
    let t = u128::from(blocks) * u128::from(len) / u128::from(per_request.max(1));
    u64::try_from(t).unwrap_or(u64::MAX)
}

fn concurrency_centi(blocks: u64, per_request: u64) -> u64 {
    let c = u128::from(blocks) * 100 / u128::from(per_request.max(1));
    u64::try_from(c).unwrap_or(u64::MAX)
}
