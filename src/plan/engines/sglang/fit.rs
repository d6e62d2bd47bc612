//! SGLang's pool on one tensor-parallel rank: the fraction it keeps, what the weights leave of
//! it, and the tokens that fill it (`kv_cache_configurator.py`, `_profile_available_bytes` and
//! `config_from_budget`; `pool_configurator.py`, `_compute_cell_size`).

use serde::Serialize;

use super::config::{default_fraction, gpu_mib, ServeDefaults, SglangRun};
use crate::model::{Attention, Family, ModelArch};

/// What the CUDA context and torch take before SGLang measures the free memory it budgets from:
/// 79.19 GiB H100s print `avail mem=78.81 GB` before loading weights in SGLang's own start-up
/// logs (`tests/fixtures/sglang/startup-logs.json`).
const STARTUP: u64 = 389 << 20;
/// What tensor-parallel ranks on an NVSwitch (Hopper and later, 70 GiB and more) add before
/// that measurement: NCCL's NVLink SHARP and the custom all-reduce buffers; 8 × H100 print
/// `avail mem=77.43 GB` against 78.81 alone.
const NVLS_EXTRA: u64 = 1_413 << 20;
/// What a tensor-parallel rank holds after loading beyond its share of the weights: SGLang's
/// own logs print `mem usage=15.54 GB` for QwQ-32B over 4 × L4 and 7.08 for Qwen3-14B over 4 ×
/// RTX 4090, 0.28 and 0.20 GiB above a quarter of their weights (0.06 for Llama-3.1-8B alone).
const TP_LOAD_EXTRA: u64 = 240 << 20;
/// `--max-prefill-tokens`' default (`arg_groups/fields/schedule.py`).
const MAX_PREFILL_TOKENS: u64 = 16_384;
/// `swa_full_tokens_ratio`: a hybrid sliding-window pool's window layers hold this share of the
/// full layers' tokens.
const SWA_RATIO: f64 = 0.8;
/// Tokens a page (`--page-size` 1 on CUDA): one padding page is allocated beside the pool.
const PAGE: u64 = 1;

/// The GPU one rank runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SglangGpu {
    /// Total memory, as the driver reports it.
    pub total_bytes: u64,
    /// Whether tensor-parallel ranks set up NVLink SHARP buffers (an H100/H200 class GPU).
    pub nvswitch: bool,
}

/// What SGLang decides on one rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum SglangOutcome {
    /// It starts, and its pool holds one request of the full context.
    Serves,
    /// It starts, but warns that one full-length request cannot fit in the pool.
    PoolShorterThanContext,
    /// It refuses: the weights leave nothing of `P × f` ("Loaded weights leave no GPU memory
    /// for the KV cache under --mem-fraction-static=…"); `short_bytes` past it.
    NoKvMemory {
        /// Bytes the weights take past `P × f`.
        short_bytes: u64,
    },
}

/// SGLang's accounting of one rank.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SglangFit {
    /// `--tp-size`.
    pub tensor_parallel: u64,
    /// The GPU's memory as nvidia-smi gives it, in MiB: what the defaults are chosen by.
    pub gpu_mib: u64,
    /// `--mem-fraction-static` in force.
    pub mem_fraction_static: f64,
    /// MiB the default fraction keeps out (`None`: the fraction was given).
    pub default_reserve_mib: Option<u64>,
    /// `chunked_prefill_size` in force.
    pub chunked_prefill_size: u64,
    /// The largest decode batch CUDA graphs are captured for (0: none).
    pub cuda_graph_max_bs: u64,
    /// What the CUDA context and communicators take before SGLang measures (modelled).
    pub startup_bytes: u64,
    /// `P`: the free memory SGLang budgets from.
    pub free_bytes: u64,
    /// One rank's weights.
    pub weights_bytes: u64,
    /// `P × (1 − f)`: left for CUDA graphs, activations and the request table.
    pub kept_out_bytes: u64,
    /// What the pool may take: `P × f − weights`.
    pub pool_bytes: u64,
    /// Bytes a token of the pool (every attention layer's K and V, or MLA's latent).
    pub cell_bytes: u64,
    /// Bytes of K a token, of V a token (`None` for MLA's one buffer).
    pub k_v_bytes: Option<(u64, u64)>,
    /// The pool's element type, as torch names it.
    pub kv_dtype: &'static str,
    /// `max_total_num_tokens`.
    pub max_total_num_tokens: u64,
    /// `max_running_requests`.
    pub max_running_requests: u64,
    /// `max_prefill_tokens`.
    pub max_prefill_tokens: u64,
    /// `context_len` (`--context-length`).
    pub context_len: u64,
    /// A hybrid sliding-window pool's window layers' tokens (gpt-oss, Llama 4).
    pub swa_tokens: Option<u64>,
    /// What it decides.
    pub outcome: SglangOutcome,
    /// With several GPUs serving, the layout on the fewest (TP, tokens), when another.
    pub fewest_gpus: Option<(u64, u64)>,
    /// `--max-running-requests` as asked.
    pub max_running_requests_asked: Option<u64>,
    /// `--max-total-tokens` as asked.
    pub max_total_tokens_asked: Option<u64>,
    /// `--chunked-prefill-size` as asked.
    pub chunked_prefill_size_asked: Option<u64>,
    /// Speculative decoding's draft, whose weights and KV layers are in the figures above.
    pub draft: Option<super::speculative::Draft>,
    /// `--speculative-draft-model-path`, for the launch.
    pub draft_model: Option<String>,
}

/// Bytes a token of SGLang's pool on one of `tp` ranks with `element` bytes a value, and a
/// hybrid sliding-window pool's split (full layers' bytes, window layers' bytes); `None` for a
/// model whose pool SGLang sizes otherwise (recurrent state) or none.
pub fn cell_bytes(arch: &ModelArch, tp: u64, element: u64) -> Option<(u64, Option<(u64, u64)>)> {
    if arch.recurrent_layer_count() > 0 || arch.encoder.is_some() {
        return None;
    }
    let layers = arch.attention_layer_count();
    // DeepSeek-V3.2's indexer keys live in a pool of SGLang's native sparse attention
    // (NSA), whose layout is not modelled here.
    // MiniMax-M3's MSA keeps its indexer keys in a pool of their own too.
    // GLM-5-next's pooled indexer rows are a pool of their own too.
    if arch.indexer.is_some() || arch.msa.is_some() || arch.glm5_next.is_some() {
        return None;
    }
    // Gemma 4's full layers hold heads of their own size and count, and DeepSeek-V4's
    // compressed caches and compressor states are pools of their own: neither is modelled.
    if arch.full_attention.is_some() || arch.deepseek_v4.is_some() {
        return None;
    }
    if let Attention::Mla {
        kv_lora_rank,
        qk_rope_head_dim,
        ..
    } = arch.attention
    {
        // One latent a token, whole on every rank.
        return Some(((kv_lora_rank + qk_rope_head_dim) * layers * element, None));
    }
    let heads = (arch.num_kv_heads / tp.max(1)).max(1);
    let per_layer = heads * 2 * arch.head_dim * element;
    let hybrid = matches!(arch.family_kind(), Family::GptOss | Family::Llama4);
    match arch.sliding_window.as_ref().filter(|_| hybrid) {
        Some(_) => {
            let sliding = (0..arch.num_layers)
                .filter(|&i| arch.has_attention(i) && arch.is_sliding_layer(i))
                .count() as u64;
            let full = layers - sliding;
            Some((
                per_layer * full,
                Some((per_layer * full, per_layer * sliding)),
            ))
        }
        None => Some((per_layer * layers, None)),
    }
}

/// SGLang's accounting on one rank of `tp` over `gpu`, for `arch` whose weights are
/// `weights_bytes` in all, a pool of `element`-byte values (`kv_dtype` as torch names it), at
/// `context` tokens; `None` where SGLang sizes the model's pool otherwise.
#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_precision_loss,
    reason = "byte counts below 2^53 are exact in f64; the fraction is in (0, 1]"
)]
pub fn fit(
    arch: &ModelArch,
    (weights_bytes, element, kv_dtype): (u64, u64, &'static str),
    gpu: SglangGpu,
    tp: u64,
    (context, run): (u64, &SglangRun),
) -> Option<SglangFit> {
    let (target_cell, swa) = cell_bytes(arch, tp, element)?;
    let draft = run
        .speculative
        .map(|a| super::speculative::draft(arch, weights_bytes, a));
    // The draft's KV layers share the pool: each token's cell grows by their share.
    let cell = target_cell + draft.map_or(0, |d| target_cell * d.layers / arch.num_layers.max(1));
    let mib = gpu_mib(gpu.total_bytes);
    let mla = matches!(arch.attention, Attention::Mla { .. });
    let defaults = ServeDefaults::of(mib, tp);
    let (fraction, reserve) = fraction_in_force(mib, tp, mla, run);
    let startup = STARTUP
        + if tp > 1 && gpu.nvswitch {
            NVLS_EXTRA
        } else {
            0
        };
    let free = gpu.total_bytes.saturating_sub(startup);
    let budget = (free as f64 * fraction) as u64;
    let weights = (weights_bytes + draft.map_or(0, |d| d.weights_bytes)).div_ceil(tp.max(1))
        + if tp > 1 { TP_LOAD_EXTRA } else { 0 };
    let pool = budget.saturating_sub(weights);
    // A hybrid pool: full layers' tokens t and window layers' 0.8 t share the budget.
    let per_token = match swa {
        Some((full, sliding)) => full as f64 + SWA_RATIO * sliding as f64,
        None => cell as f64,
    };
    let mut tokens = if per_token > 0.0 {
        ((pool as f64 / per_token) as u64) / PAGE * PAGE
    } else {
        context
    };
    if let Some(cap) = run.max_total_tokens {
        tokens = tokens.min(cap);
    }
    let running = running_requests(tokens, context, draft.is_some(), run);
    let outcome = if budget <= weights {
        SglangOutcome::NoKvMemory {
            short_bytes: weights - budget,
        }
    } else if tokens == 0 {
        SglangOutcome::NoKvMemory {
            short_bytes: cell.saturating_sub(pool),
        }
    } else if tokens >= context {
        SglangOutcome::Serves
    } else {
        SglangOutcome::PoolShorterThanContext
    };
    let k_v = (!mla).then(|| {
        let per = (arch.num_kv_heads / tp.max(1)).max(1) * arch.head_dim * element;
        let layers = arch.attention_layer_count();
        (per * layers, per * layers)
    });
    Some(SglangFit {
        tensor_parallel: tp,
        gpu_mib: mib,
        mem_fraction_static: fraction,
        default_reserve_mib: reserve,
        chunked_prefill_size: run
            .chunked_prefill_size
            .unwrap_or(defaults.chunked_prefill_size),
        cuda_graph_max_bs: if run.disable_cuda_graph {
            0
        } else {
            defaults.cuda_graph_max_bs
        },
        startup_bytes: startup,
        free_bytes: free,
        weights_bytes: weights,
        kept_out_bytes: free - budget,
        pool_bytes: pool,
        cell_bytes: cell,
        k_v_bytes: k_v.filter(|_| swa.is_none()),
        kv_dtype,
        max_total_num_tokens: tokens,
        max_running_requests: running,
        max_prefill_tokens: MAX_PREFILL_TOKENS,
        context_len: context,
        swa_tokens: swa.map(|_| (tokens as f64 * SWA_RATIO) as u64),
        outcome,
        fewest_gpus: None,
        max_running_requests_asked: run.max_running_requests,
        max_total_tokens_asked: run.max_total_tokens,
        chunked_prefill_size_asked: run.chunked_prefill_size,
        draft,
        draft_model: run.draft_model.clone(),
    })
}

/// `--mem-fraction-static` as given, else SGLang's default and the MiB it keeps out.
fn fraction_in_force(mib: u64, tp: u64, mla: bool, run: &SglangRun) -> (f64, Option<u64>) {
    match run.mem_fraction_static {
        Some(f) => (f, None),
        None => {
            let (f, r) = default_fraction(mib, tp, mla, run);
            (f, Some(r))
        }
    }
}

/// `max_running_requests` (`resolve_max_num_reqs`): as asked, else 48 under speculative
/// decoding, else 512 for each context's worth of tokens within [2,048, 4,096]; never more
/// than half the pool's tokens.
#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_precision_loss,
    reason = "a count of requests from a token ratio"
)]
fn running_requests(tokens: u64, context: u64, speculative: bool, run: &SglangRun) -> u64 {
    let estimated = ((tokens as f64 / context.max(1) as f64 * 512.0) as u64).clamp(2048, 4096);
    let default = if speculative {
        super::speculative::SPEC_MAX_RUNNING_REQUESTS
    } else {
        estimated
    };
    run.max_running_requests
        .map_or(default, |r| r.max(1))
        .min(tokens / 2)
}

impl SglangFit {
    /// Bytes one rank needs to serve one request of the full context: the start-up, the
    /// weights, what SGLang keeps out, and that request's tokens.
    pub fn needed_bytes(&self) -> u64 {
        self.startup_bytes
            + self.weights_bytes
            + self.kept_out_bytes
            + self.context_len.saturating_mul(self.cell_bytes)
    }

    /// Bytes a rank lacks to serve one full request (0 when it serves).
    pub fn short_bytes(&self, total: u64) -> u64 {
        self.needed_bytes().saturating_sub(total)
    }
}
