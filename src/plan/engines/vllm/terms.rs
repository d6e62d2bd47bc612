//! The terms of vLLM's accounting on one rank of one pipeline stage: its weights, the profile
//! run's peak, the CUDA-graph pool, and the KV pages its layers take.

use std::ops::Range;

use super::config::{VllmConfig, VllmModel};
use super::defaults;
use super::state::pages as state_pages;
use crate::model::{Attention, Mlp};
use crate::plan::engines::speculative::draft;

/// What every stage of one layout shares.
pub(super) struct Run {
    /// `max_num_batched_tokens` of the profile run.
    pub tokens: u64,
    /// `max_num_seqs` the sampler is profiled over.
    pub seqs: u64,
    /// `ceil(total × utilization)`.
    pub budget: u64,
    /// Tensor-parallel ranks a stage.
    pub tp: u64,
    /// Stages.
    pub pp: u64,
    /// Whether the ranks all-reduce over NVLink SHARP (`GpuClass::nvls`).
    pub nvls: bool,
    /// The multimodal encoder's profile run, which the first stage does.
    pub encoder: Option<super::encoder::EncoderProfile>,
}

/// One rank of one stage.
pub(super) struct Stage {
    pub weights: u64,
    /// Of the layers' weights, what stays in host memory (`--cpu-offload-gb`).
    pub offloaded: u64,
    pub profile: u64,
    /// Memory taken outside torch's allocator after the start-up snapshot.
    pub non_torch: u64,
    pub graphs: u64,
    /// The budget left for KV blocks.
    pub kv: u64,
    pub pages: KvPages,
    pub num_blocks: u64,
}

impl Stage {
    /// Stage `index` holding `layers`: the first also holds the token embeddings, the last the
    /// output head, the final norm and the sampler. `None` where vLLM runs no such layers
    /// (RWKV's).
    pub fn of(
        model: &VllmModel<'_>,
        cfg: &VllmConfig,
        run: &Run,
        layers: Range<u64>,
        index: u64,
    ) -> Option<Self> {
        let arch = model.arch;
        let last = index + 1 == run.pp;
        // vLLM's UVA offloader moves whole parameters of the decoder layers, in order, until
        // the budget is reached (so up to one parameter past it); counted at the budget.
        let layer_weights = stage_weights(model, run, layers.clone(), false, false);
        let offloaded = cfg.cpu_offload_bytes.min(layer_weights);
        // The draft is loaded beside the last stage, its layer split over the ranks.
        let draft = match (&cfg.speculative, last) {
            (Some(s), true) => draft(model.arch, model.weights_bytes, s.method)
                .weights_bytes
                .div_ceil(run.tp.max(1)),
            _ => 0,
        };
        // LoRA slots, allocated with the model (inside "Model loading took"): the stage's
        // layers', and the vocabulary's at the ends that hold it.
        let lora = cfg.lora.map_or(0, |l| {
            let ends = u64::from(index == 0) + u64::from(last);
            l.slot_bytes(
                model.arch,
                run.tp,
                layers.end - layers.start,
                model.activation_bytes,
            ) + ends * l.vocab_slot_bytes(model.arch, model.activation_bytes)
        });
        // The vision tower and projector sit with the embeddings on the first stage, their
        // linear layers split over the ranks.
        let vision = match (&model.vision, index) {
            (Some(v), 0) => v.weights_bytes.div_ceil(run.tp.max(1)),
            _ => 0,
        };
        let weights = stage_weights(model, run, layers.clone(), index == 0, last) - offloaded
            + draft
            + lora
            + vision
            + rope_cache(model);
        let per_token = forward_bytes_per_token(model, run.tp);
        let forward = run.tokens.saturating_mul(per_token);
        let profile = if last {
            // The dummy sampler run keeps the profile's hidden states and the logits in the
            // model's dtype, and beside them the f32 copy it samples from, the probabilities
            // and the exponential noise (`forward_native`).
            let sampler = run
                .tokens
                .saturating_mul(arch.hidden_size * model.activation_bytes)
                + run
                    .seqs
                    .saturating_mul(arch.vocab_size.saturating_mul(model.activation_bytes + 12));
            // The fused experts' workspaces outlive the forward pass (vLLM's workspace
            // manager keeps them), so the sampler runs beside them.
            forward.max(sampler + moe_workspace(model, run))
        } else {
            forward
        };
        // The first stage encodes the dummy images first, then runs its dummy batch beside
        // their outputs (kept in the encoder cache) and the dummy inputs.
        let profile = match (&run.encoder, index) {
            (Some(e), 0) => e.peak_bytes.max(profile.saturating_add(e.retained_bytes)),
            _ => profile,
        };
        let graphs = if cfg.enforce_eager {
            0
        } else {
            cuda_graph_estimate(model, run, per_token, layers.end - layers.start)
        };
        let non_torch = non_torch_bytes(run);
        let spent =
            u128::from(weights) + u128::from(profile) + u128::from(non_torch) + u128::from(graphs);
        let kv = u64::try_from(u128::from(run.budget).saturating_sub(spent)).unwrap_or(u64::MAX);
        let pages = KvPages::of(model, run.tp, cfg, run.tokens, layers)?;
        Some(Stage {
            weights,
            offloaded,
            profile,
            non_torch,
            graphs,
            kv,
            num_blocks: kv / pages.block_bytes.max(1),
            pages,
        })
    }

    /// Everything but the KV cache.
    pub fn spent(&self) -> u128 {
        u128::from(self.weights)
            + u128::from(self.profile)
            + u128::from(self.non_torch)
            + u128::from(self.graphs)
    }
}

/// `ceil(total × fraction)`, as `request_memory` computes it.
#[expect(
    clippy::cast_possible_truncation,
    reason = "a float cast saturates; the fraction is at most 1"
)]
pub(super) fn ceil_fraction(total: u64, fraction: f64) -> u64 {
    (total as f64 * fraction).ceil() as u64
}

/// Weights on one rank of a stage: the stage's layers, the token embeddings on the first
/// stage, the output head and final norm on the last (a tied head is loaded again there when
/// the stages differ). Everything is split `tp` ways (vocabulary, heads, MLP and experts)
/// except the norms, which every rank holds whole, and K/V projections, which are replicated
/// when there are more ranks than KV heads.
fn stage_weights(
    model: &VllmModel<'_>,
    run: &Run,
    layers: Range<u64>,
    first: bool,
    last: bool,
) -> u64 {
    let arch = model.arch;
    let count = arch.params();
    let params = u128::from(count.total.max(1));
    let bytes = u128::from(model.weights_bytes);
    let per_param = |p: u128| p * bytes / params;
    let h = u128::from(arch.hidden_size);
    let vocab = u128::from(arch.vocab_size) * h;
    let final_norm = u128::from(arch.norm_params());
    let in_layers = params.saturating_sub(u128::from(count.embedding) + final_norm);
    let n = u128::from(layers.end - layers.start);
    let mut stage = in_layers * n / u128::from(arch.num_layers.max(1));
    let head = if arch.tie_word_embeddings && run.pp == 1 {
        0
    } else {
        vocab
    };
    stage += if first { vocab } else { 0 } + if last { head + final_norm } else { 0 };
    stage += k_eq_v_values(arch, layers.clone());
    let norms =
        (n * u128::from(arch.norms_per_layer) + u128::from(last)) * u128::from(arch.norm_params());
    // The MoE routers are whole on every rank (`ReplicatedLinear`, Gemma 4's `GateLinear`):
    // each rank routes every token to the experts it holds.
    let routers = arch.moe.as_ref().map_or(0, |m| {
        let moe_layers = layers.clone().filter(|&i| arch.is_moe_layer(i)).count() as u128;
        moe_layers * h * u128::from(m.experts)
    });
    let stage_bytes = per_param(stage);
    let replicated = per_param(norms + routers).min(stage_bytes);
    let tp = u128::from(run.tp);
    let mut per_rank = (stage_bytes - replicated).div_ceil(tp) + replicated;
    let kv = u128::from(arch.num_kv_heads);
    if matches!(arch.attention, Attention::Standard { .. }) && kv > 0 && tp > kv {
        // Each rank holds one whole KV head where an even split would give it kv/tp of one.
        let kv_layers = layers.filter(|&i| arch.has_attention(i)).count() as u128;
        let one_head = 2 * h * u128::from(arch.head_dim) * kv_layers;
        per_rank += per_param(one_head) - per_param(one_head * kv / tp);
    }
    u64::try_from(per_rank).unwrap_or(u64::MAX)
}

/// The V projections vLLM allocates where the checkpoint has none: Gemma 4's full layers under
/// `attention_k_eq_v` ship K alone, but vLLM's `QKVParallelLinear` holds a V slot too and loads
/// K into both (`_gemma4_layer_weights_mapper`); the KV-sharing layers have neither.
fn k_eq_v_values(arch: &crate::model::ModelArch, layers: Range<u64>) -> u128 {
    let Some(full) = arch.full_attention.filter(|f| f.k_eq_v) else {
        return 0;
    };
    let own_full = layers
        .filter(|&i| arch.has_own_kv(i) && !arch.is_sliding_layer(i))
        .count() as u128;
    own_full * u128::from(arch.hidden_size) * u128::from(full.kv_heads * full.head_dim)
}

/// The fused-MoE kernel's workspaces for a batch of `max_num_batched_tokens` on one rank
/// (`TritonExperts.workspace_shapes`, one chunk): the gate-up products or the output, and the
/// activated halves or the down products, each `top_k` a token; 0 without routed experts.
fn moe_workspace(model: &VllmModel<'_>, run: &Run) -> u64 {
    let arch = model.arch;
    let Some(m) = arch.moe.as_ref().filter(|_| arch.moe_layers() > 0) else {
        return 0;
    };
    let per_rank = m.expert_intermediate.div_ceil(run.tp.max(1));
    let (n, activated) = match arch.mlp {
        Mlp::Gated => (2 * per_rank, per_rank),
        Mlp::Plain => (per_rank, per_rank),
    };
    let h = arch.hidden_size;
    let routed = run.tokens.saturating_mul(m.experts_per_token);
    let first = routed
        .saturating_mul(activated.max(h))
        .max(run.tokens.saturating_mul(h));
    let second = routed.saturating_mul(n.max(h));
    first
        .saturating_add(second)
        .saturating_mul(model.activation_bytes)
}

/// Activation bytes per token at the forward pass's peak on one rank: the residual, the
/// block's normed input and the previous block's output beside the widest block's
/// intermediates (the MLP's gate-up and activated halves, the fused-MoE caches of the routed
/// experts, the attention's q/k/v and output, or a recurrent mixer's projections).
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
    // A recurrent mixer: its in-projection (z, the convolved channels, one Δ a head), the
    // convolution's output and the scan's.
    let recurrent = match (&arch.ssm, arch.recurrent_layer_count()) {
        (Some(m), 1..) => {
            let inner = m.inner.div_ceil(tp);
            let conv = u64::try_from(m.conv_channels())
                .unwrap_or(u64::MAX)
                .div_ceil(tp);
            3 * h + inner + conv + m.dt_rank.div_ceil(tp) + conv + inner
        }
        _ => 0,
    };
    attention.max(dense).max(moe).max(recurrent) * model.activation_bytes
}

/// What a rank's forward pass takes outside torch after the snapshot (`NON_TORCH_FORWARD`), and
/// NCCL's NVLink SHARP buffers where tensor-parallel ranks all-reduce over them.
fn non_torch_bytes(run: &Run) -> u64 {
    let collectives = if run.tp > 1 && run.nvls {
        defaults::NVLS_BASE + run.tp * defaults::NVLS_PER_RANK
    } else {
        0
    };
    defaults::NON_TORCH_FORWARD + collectives
}

/// vLLM's CUDA-graph estimate (`profile_cudagraph_memory`): the larger of the two first
/// captures, which the piecewise and full graphs share one pool for, and what each later graph
/// of either kind adds. The first piecewise capture holds the largest batch's activations; the
/// first full decode capture, FlashAttention's split-KV accumulators for that many sequences.
fn cuda_graph_estimate(model: &VllmModel<'_>, run: &Run, per_token: u64, layers: u64) -> u64 {
    let largest = (2 * run.seqs)
        .min(defaults::MAX_CAPTURE_SIZE)
        .min(run.tokens);
    let largest_full = largest.min(run.seqs);
    let piecewise = defaults::capture_sizes(largest).count() as u64;
    let full = defaults::capture_sizes(largest_full).count() as u64;
    let first = (largest * per_token).max(split_accumulators(model, run.tp, largest_full));
    let per_graph = (layers * defaults::GRAPH_BYTES_PER_LAYER).max(defaults::PER_GRAPH_FLOOR);
    let others = piecewise.saturating_sub(1) + full.saturating_sub(1);
    first + others * per_graph
}

/// The f32 partial outputs and log-sum-exps of every split of a decode of `seqs` sequences on
/// one rank: a head's value width each (MLA attends in its latent).
fn split_accumulators(model: &VllmModel<'_>, tp: u64, seqs: u64) -> u64 {
    let arch = model.arch;
    if !(0..arch.num_layers).any(|i| arch.has_attention(i)) {
        return 0;
    }
    let heads = (arch.num_heads / tp.max(1)).max(1);
    let width = match arch.attention {
        Attention::Standard { .. } => arch.head_dim,
        Attention::Mla { kv_lora_rank, .. } => kv_lora_rank,
    };
    defaults::MAX_SPLITS_IN_GRAPH * seqs * heads * (width + 1) * 4
}

/// The KV cache's pages on one rank: one block's bytes and how requests take blocks.
pub(super) struct KvPages {
    pub block_bytes: u64,
    block_size: u64,
    /// Tokens a sliding layer's block holds: `block_size`, unless its page was the smaller
    /// and vLLM scaled its block to the widest page (Gemma 4's sliding layers beside full
    /// ones of another width).
    sliding_block_size: u64,
    /// Groups of full-attention layers (each takes a request's whole length).
    full_groups: u64,
    /// Groups of sliding-window layers (each takes the window and a batch).
    sliding_groups: u64,
    /// Tokens a sliding group keeps: window − 1 + max_num_batched_tokens.
    sliding_tokens: u64,
    /// Groups of recurrent layers, and the state pages a request holds in each.
    state_groups: u64,
    state_pages: u64,
}

impl KvPages {
    /// `None` for a recurrent mixer vLLM does not run.
    pub(super) fn of(
        model: &VllmModel<'_>,
        tp: u64,
        cfg: &VllmConfig,
        tokens: u64,
        layers: Range<u64>,
    ) -> Option<Self> {
        let arch = model.arch;
        // A layer's bytes a token: its K and V heads on the rank (Gemma 4's full layers their
        // own head size and count).
        let token_bytes = |i: u64| match arch.attention {
            Attention::Standard { .. } => {
                let (head, kv) = arch.layer_heads(i);
                2 * (kv / tp).max(1) * head * cfg.kv_element_bytes
            }
            // MLA's latent is the same on every rank.
            Attention::Mla { .. } => sparse_mla_page(arch, cfg.kv_element_bytes)
                .unwrap_or(arch.kv_elements_per_token_layer() * cfg.kv_element_bytes),
        };
        // A draft's layers attend in full beside the last stage's (their own pages, in the
        // one pool).
        let draft = cfg
            .speculative
            .as_ref()
            .filter(|_| layers.end >= arch.num_layers)
            .map_or(0, |s| s.layers());
        let spec = cfg.speculative.as_ref().map_or(0, |s| s.tokens);
        // Layers that read an earlier layer's cache (Gemma 4 E2B/E4B's last ones, vLLM's
        // `kv_sharing_target_layer_name`) get no KV spec, so no pages.
        let attention: Vec<u64> = layers.clone().filter(|&i| arch.has_own_kv(i)).collect();
        let recurrent = layers.filter(|&i| arch.is_recurrent_layer(i)).count() as u64;
        let widths = LayerWidths::of(&attention, |i| arch.is_sliding_layer(i), token_bytes);
        let sliding = attention
            .iter()
            .filter(|&&i| arch.is_sliding_layer(i))
            .count() as u64;
        let full = attention.len() as u64 - sliding + draft;
        // A draft's full layers are the model's shape (the first layer's width).
        let per_token_layer = widths.widest.max(token_bytes(0));
        let (page, block_size, state_pages) = match (&arch.ssm, recurrent) {
            (Some(ssm), 1..) => state_pages(
                ssm,
                arch,
                (tp, model.activation_bytes, spec),
                !attention.is_empty(),
                (cfg.block_size, per_token_layer),
            )?,
            _ => {
                let block = sparse_block_size(arch, cfg.block_size);
                (block * per_token_layer, block, 0)
            }
        };
        let (full_block, sliding_block) = widths.blocks(block_size, per_token_layer);
        // vLLM's hybrid manager groups layers of one kind into groups of equal size (the
        // fewest layers of a kind, or the most where that is under 1.5 times the fewest); the
        // groups share one pool, whose block spans one layer of each group slot.
        let kinds: Vec<u64> = [full, sliding, recurrent]
            .into_iter()
            .filter(|&n| n > 0)
            .collect();
        let fewest = kinds.iter().copied().min().unwrap_or(1);
        let most = kinds.iter().copied().max().unwrap_or(1);
        let group = if 2 * most < 3 * fewest { most } else { fewest }.max(1);
        Some(KvPages {
            block_bytes: page * group,
            block_size: full_block,
            sliding_block_size: sliding_block,
            full_groups: full.div_ceil(group),
            sliding_groups: sliding.div_ceil(group),
            sliding_tokens: arch.sliding_window.as_ref().map_or(0, |w| {
                w.window.saturating_sub(1) + cfg.in_flight_batches * tokens
            }),
            state_groups: recurrent.div_ceil(group),
            state_pages,
        })
    }

    /// The KV cache groups whose blocks share the pool.
    pub fn groups(&self) -> u64 {
        self.full_groups + self.sliding_groups + self.state_groups
    }

    /// Blocks one request of `len` tokens takes.
    pub fn blocks_per_request(&self, len: u64) -> u64 {
        let full = len.div_ceil(self.block_size);
        let sliding = len
            .min(self.sliding_tokens)
            .div_ceil(self.sliding_block_size)
            + 1;
        self.full_groups * full
            + self.sliding_groups * sliding
            + self.state_groups * self.state_pages
    }

    /// Tokens a KV block holds (the attention block size, raised for a hybrid model).
    pub fn block_size(&self) -> u64 {
        self.block_size
    }

    /// The fewest tokens a block holds in any group (a sliding group's where its layers are
    /// narrower than the full ones and so take more tokens a page).
    pub fn smallest_block_size(&self) -> u64 {
        let sliding = (self.sliding_groups > 0).then_some(self.sliding_block_size);
        let others = (self.full_groups + self.state_groups > 0).then_some(self.block_size);
        sliding
            .into_iter()
            .chain(others)
            .min()
            .unwrap_or(self.block_size)
    }
}

/// The bytes a token takes in one layer of each kind (0 where there is none), as vLLM's
/// `unify_kv_cache_spec_page_size` evens them out: every page is the widest layer's at the
/// block size, and a narrower layer's block holds proportionally more tokens where its page
/// divides the widest (else it keeps the block and its page is padded).
struct LayerWidths {
    full: u64,
    sliding: u64,
    widest: u64,
}

impl LayerWidths {
    fn of(layers: &[u64], sliding: impl Fn(u64) -> bool, bytes: impl Fn(u64) -> u64) -> Self {
        let widest_of = |want: bool| {
            layers
                .iter()
                .filter(|&&i| sliding(i) == want)
                .map(|&i| bytes(i))
                .max()
                .unwrap_or(0)
        };
        let (full, sliding) = (widest_of(false), widest_of(true));
        LayerWidths {
            full,
            sliding,
            widest: full.max(sliding),
        }
    }

    /// Tokens a full and a sliding layer's block hold, for pages of `widest` bytes a token at
    /// `block` tokens.
    fn blocks(&self, block: u64, widest: u64) -> (u64, u64) {
        let scaled = |t: u64| match t {
            0 => block,
            t if widest % t == 0 => block * (widest / t),
            _ => block,
        };
        (scaled(self.full), scaled(self.sliding))
    }
}

/// "GPU KV cache size": the concurrency times `max_model_len`, as vLLM 0.33 prints it.
pub(super) fn kv_tokens(blocks: u64, per_request: u64, len: u64) -> u64 {
    let t = u128::from(blocks) * u128::from(len) / u128::from(per_request.max(1));
    u64::try_from(t).unwrap_or(u64::MAX)
}

/// "Maximum concurrency" in hundredths, as vLLM prints it: its `num_blocks /
/// num_blocks_per_request` is a Python float logged with `%.2f`, which rounds the double to the
/// nearest hundredth (an exact tie to the even one), as Rust's `{:.2}` does; cut to hundredths,
/// 1.455 printed 1.45 where vLLM prints 1.46.
pub(super) fn concurrency_centi(blocks: u64, per_request: u64) -> u64 {
    let c = blocks as f64 / per_request.max(1) as f64;
    format!("{c:.2}")
        .replace('.', "")
        .parse()
        .unwrap_or(u64::MAX)
}

/// A token's bytes in one layer under DeepSeek-V3.2's sparse MLA (vLLM 0.33's
/// `MLAAttentionSpec` for the latent and `DeepseekV32IndexerCache` for the indexer's keys): the
/// latent at the cache's element size, or 656 bytes in fp8 (`fp8_ds_mla`: 512 fp8 values, their
/// 16 bytes of scales and the 64 RoPE values in bf16); and the indexer's key in fp8 with an f32
/// scale per 128 values, whatever the cache's type. `None` without an indexer.
fn sparse_mla_page(arch: &crate::model::ModelArch, element_bytes: u64) -> Option<u64> {
    let indexer = arch.indexer?;
    let latent = if element_bytes == 1 {
        656
    } else {
        arch.dense_kv_elements_per_token_layer() * element_bytes
    };
    Some(latent + indexer.head_dim + indexer.head_dim / 128 * 4)
}

/// The block size vLLM runs: the sparse MLA backend's 64 tokens (FlashMLA-sparse supports only
/// multiples of 64, and vLLM takes the backend's size when none is asked for), else the one
/// configured.
fn sparse_block_size(arch: &crate::model::ModelArch, configured: u64) -> u64 {
    if arch.indexer.is_some() && configured == super::defaults::BLOCK_SIZE {
        64
    } else {
        configured
    }
}

/// The cos/sin cache of a RoPE that vLLM tabulates for more positions than the model's
/// `max_position_embeddings`, built with the model (inside "Model loading took"), in the
/// model's dtype over the rotary width: a linearly scaled RoPE's (`LinearScalingRotaryEmbedding`,
/// × the factor: 512 MiB for Gemma 3 4B's global layers, 131,072 × 8 × 256 × 2 bytes; vLLM 0.11
/// loaded gemma-3-4b-it in 8.58 GiB against its 8.01 GiB checkpoint), or Qwen2-VL's and
/// Qwen2.5-VL's multimodal RoPE (`MRotaryEmbedding`, × its default `positions_factor` 4, which
/// `qwen2.py` leaves; Qwen3-VL and Qwen3.5 pass 1). An ordinary cache (one row a position, tens
/// of MiB) is left out.
fn rope_cache(model: &VllmModel<'_>) -> u64 {
    use crate::model::TowerKind;
    let arch = model.arch;
    let mrope = matches!(
        model.vision.map(|v| v.kind),
        Some(TowerKind::Qwen2Vl | TowerKind::Qwen25Vl)
    );
    let factor = arch.rope_linear_factor.or(mrope.then_some(4));
    match (factor, arch.max_position_embeddings) {
        (Some(factor), Some(positions)) => positions
            .saturating_mul(factor)
            .saturating_mul(arch.head_dim)
            .saturating_mul(model.activation_bytes),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::{concurrency_centi, k_eq_v_values, sparse_block_size, sparse_mla_page};

    // 31B's 10 full layers (of 60) ship K alone; vLLM holds a V slot of 4 heads of 512 beside
    // it in each: 10 × 5,376 × 2,048 values. E4B's full layers have V projections of their own.
    #[test]
    fn gemma4_full_layers_hold_a_v_slot_of_their_k() {
        let g31 = crate::model::find_model("gemma-4-31b").unwrap().arch;
        assert_eq!(k_eq_v_values(&g31, 0..60), 110_100_480);
        assert_eq!(k_eq_v_values(&g31, 0..6), 11_010_048);
        let e4b = crate::model::find_model("gemma-4-e4b").unwrap().arch;
        assert_eq!(k_eq_v_values(&e4b, 0..42), 0);
    }

    #[test]
    fn sparse_mla_pages_are_vllms_specs() {
        let v32 = crate::model::find_model("deepseek-v3.2").unwrap().arch;
        // bf16: the 576-value latent (1,152 bytes) and the indexer's 128 fp8 keys with one f32
        // scale (132 bytes); fp8: fp8_ds_mla's 656 bytes and the same indexer.
        assert_eq!(sparse_mla_page(&v32, 2), Some(1_284));
        assert_eq!(sparse_mla_page(&v32, 1), Some(788));
        assert_eq!(sparse_block_size(&v32, 16), 64);
        assert_eq!(sparse_block_size(&v32, 128), 128);
        let v3 = crate::model::find_model("deepseek-v3").unwrap().arch;
        assert_eq!(sparse_mla_page(&v3, 2), None);
        assert_eq!(sparse_block_size(&v3, 16), 16);
    }

    #[test]
    fn concurrency_is_rounded_as_vllm_prints_it() {
        // 291 blocks over 200 a request: 1.455, which %.2f prints 1.46 (the double is just
        // above the half).
        assert_eq!(concurrency_centi(291, 200), 146);
        // Exact ties of the double go to the even hundredth: 9/8 = 1.125 prints 1.12,
        // 11/8 = 1.375 prints 1.38.
        assert_eq!(concurrency_centi(9, 8), 112);
        assert_eq!(concurrency_centi(11, 8), 138);
        // Below a half it is cut; whole numbers stay whole.
        assert_eq!(concurrency_centi(1_001, 1_000), 100);
        assert_eq!(concurrency_centi(3_416, 1_708), 200);
        // No request's worth of blocks: 0.00x, as vLLM prints before it refuses.
        assert_eq!(concurrency_centi(0, 7), 0);
    }
}
