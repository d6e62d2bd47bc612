//! vLLM's fit of one rank: the terms of its budget and what it then serves.

use serde::Serialize;

use super::config::{VllmConfig, VllmGpu, VllmModel};
use super::defaults::GpuClass;
use super::terms::{ceil_fraction, concurrency_centi, kv_tokens, KvPages, Run, Stage};
use crate::model::{Attention, ModelArch, SsmKind};
use crate::plan::engines::{Basis, Term, TermKind};

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
    /// A recurrent mixer's heads (Mamba-2's, Gated DeltaNet's value heads) or inner width do
    /// not divide over the ranks (`MambaStateShapeCalculator`'s `divide`).
    RecurrentNotDivisible {
        /// The mixer's heads.
        heads: u64,
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
    if let Some(ssm) = arch.ssm.filter(|_| arch.recurrent_layer_count() > 0) {
        // Mamba-2 and Gated DeltaNet shard their heads, every kind its inner width.
        let heads = match ssm.kind {
            SsmKind::Mamba2 | SsmKind::GatedDeltaNet | SsmKind::Kda => ssm.dt_rank,
            _ => 0,
        };
        if (heads > 0 && heads % tp != 0) || ssm.inner % tp != 0 {
            return Err(LayoutRejection::RecurrentNotDivisible { heads });
        }
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

/// `--speculative-config`'s draft, as the plan took it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct VllmDraft {
    /// Its kind, weights (whole, modelled from the model's shape) and KV layers.
    #[serde(flatten)]
    pub draft: crate::plan::engines::speculative::Draft,
    /// `num_speculative_tokens`.
    pub tokens: u64,
}

/// One rank's accounting and what it serves.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VllmFit {
    /// Tensor-parallel size.
    pub tensor_parallel: u64,
    /// Pipeline stages.
    pub pipeline_parallel: u64,
    /// Layers of each stage, as vLLM partitions them.
    pub stage_layers: Vec<u64>,
    /// The stage whose rank has the fewest KV blocks: the terms below are its rank's.
    pub binding_stage: u64,
    /// `max_num_batched_tokens` the profile ran with.
    pub max_num_batched_tokens: u64,
    /// `max_num_seqs` the sampler was profiled over.
    pub max_num_seqs: u64,
    /// Every term on one rank, in vLLM's order.
    pub terms: Vec<Term>,
    /// Tokens a block holds: `--block-size`, raised for a hybrid model until an attention
    /// page holds a layer's recurrent state.
    pub block_size: u64,
    /// Bytes of one KV block over every attention layer of the rank.
    pub block_bytes: u64,
    /// KV-cache blocks.
    pub num_blocks: u64,
    /// Blocks one request of `max_model_len` takes.
    pub blocks_per_request: u64,
    /// KV-cache groups sharing the blocks (1 for a model of full attention alone): vLLM up to
    /// 0.20 printed its cache size as the blocks a group gets, `num_blocks / groups ×
    /// block_size`, where later versions print the concurrency times `max_model_len`.
    pub kv_groups: u64,
    /// What vLLM prints as "GPU KV cache size: N tokens".
    pub kv_tokens: u64,
    /// "Maximum concurrency for L tokens per request", in hundredths (vLLM prints two decimals).
    pub max_concurrency_centi: u64,
    /// Whether it starts.
    pub outcome: VllmOutcome,
    /// Where this layout was preferred to one on fewer GPUs (tensor parallel over a whole
    /// host, as people serve), that layout: it serves too.
    pub fewest_gpus: Option<FewestGpus>,
    /// The speculative draft loaded beside the model (in the weights term, and its KV layers
    /// in the blocks).
    pub draft: Option<VllmDraft>,
    /// The LoRA slots (in the weights term): the settings and their bytes on the binding rank.
    pub lora: Option<(super::config::VllmLora, u64)>,
    /// The vision tower's profile run (its weights in the weights term, its peak in the
    /// profile's), where the model has one.
    pub encoder: Option<super::encoder::EncoderProfile>,
}

/// The layout on the fewest GPUs that serves, shown beside the one preferred.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FewestGpus {
    /// Tensor-parallel size.
    pub tensor_parallel: u64,
    /// Pipeline stages.
    pub pipeline_parallel: u64,
    /// GPUs it takes.
    pub gpus: u64,
    /// What vLLM would print as its KV cache size, in tokens.
    pub kv_tokens: u64,
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
    /// A recurrent mixer vLLM does not run (RWKV).
    #[error("vLLM runs no RWKV layers")]
    RecurrentLayers,
    /// LoRA adapters on a mixture of experts (vLLM wraps the experts too; not modelled).
    #[error("vLLM's LoRA slots on routed experts are not modelled")]
    LoraOnExperts,
    /// DeepSeek-V4's window, compressed caches (4:1 with the indexer's keys, 128:1) and
    /// compressor states, each a page layout of its own in vLLM.
    #[error(
        "vLLM's KV pages for DeepSeek-V4's compressed attention (its window, 4:1 and 128:1 caches and compressor states) are not modelled"
    )]
    CompressedAttention,
    /// MiniMax-M3's sparse attention (MSA): its indexer's key cache beside the KV pages and
    /// its block selection in the profile run.
    #[error("vLLM's MiniMax-M3 sparse attention (MSA) and its indexer cache are not modelled")]
    SparseAttention,
    /// GLM-5-next's pooled indexer (its key, gate and pooled rows cached beside the latent)
    /// and its four residual streams.
    #[error(
        "vLLM's GLM-5-next (its pooled indexer cache beside the latent, its mHC residual streams) is not modelled"
    )]
    PooledIndexer,
}

// The CUDA context, NCCL/custom all-reduce buffers and cuBLAS handles taken before the
// snapshot; vLLM 0.6-0.8 logs report this stage as 0.25-0.35 GiB ("non_torch_memory").
pub(super) const STARTUP_BYTES: u64 = 384 << 20;

/// A parallel layout: `tensor_parallel` ranks in each of `pipeline_parallel` stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Layout {
    /// GPUs a stage's layers are split over.
    pub tensor_parallel: u64,
    /// Stages the layers are partitioned into (vLLM's `get_pp_indices`).
    pub pipeline_parallel: u64,
}

impl Layout {
    /// Tensor parallel only.
    pub fn tp(tensor_parallel: u64) -> Self {
        Layout {
            tensor_parallel,
            pipeline_parallel: 1,
        }
    }

    /// GPUs in all.
    pub fn gpus(self) -> u64 {
        self.tensor_parallel * self.pipeline_parallel
    }
}

/// vLLM's layer partition over `pp` stages: even, the remainder going one layer each to the
/// stages before the last, from the last backwards (`get_pp_indices`).
pub fn stage_layers(layers: u64, pp: u64) -> Vec<u64> {
    let pp = pp.max(1);
    let mut parts = vec![layers / pp; usize::try_from(pp).unwrap_or(1)];
    let remaining = layers % pp;
    let n = parts.len();
    for i in 2..remaining + 2 {
        if let Some(p) = usize::try_from(i).ok().and_then(|i| n.checked_sub(i)) {
            parts[p] += 1;
        }
    }
    parts
}

/// `model` with its vision tower not built: no tower bytes, whether added or in the
/// checkpoint's weights. The tower's kind stays, as the language model's RoPE (Qwen's
/// M-RoPE) does not depend on it being built.
fn without_tower<'a>(model: &VllmModel<'a>, v: super::encoder::VllmVision) -> VllmModel<'a> {
    VllmModel {
        weights_bytes: model.weights_bytes.saturating_sub(v.counted_bytes),
        vision: Some(super::encoder::VllmVision {
            weights_bytes: 0,
            counted_bytes: 0,
            ..v
        }),
        ..*model
    }
}

/// vLLM's accounting for `model` on `layout` over identical `gpu`s under `cfg`: every stage's
/// rank is judged, and the one with the fewest KV blocks binds (vLLM gives every rank the
/// smallest rank's blocks).
pub fn fit(
    model: &VllmModel<'_>,
    gpu: VllmGpu,
    layout: Layout,
    cfg: &VllmConfig,
) -> Result<VllmFit, Unmodelled> {
    let arch = model.arch;
    refuse_unmodelled(arch, cfg)?;
    let unbuilt;
    let model = match model.vision {
        Some(v) if cfg.multimodal.skips(v.kind) => {
            unbuilt = without_tower(model, v);
            &unbuilt
        }
        _ => model,
    };
    let tp = layout.tensor_parallel.max(1);
    let pp = layout.pipeline_parallel.clamp(1, arch.num_layers.max(1));
    let run = run_of(model, gpu, (tp, pp), cfg);
    let parts = match &cfg.pp_layer_partition {
        Some(p) if p.len() as u64 == pp && p.iter().sum::<u64>() == arch.num_layers => p.clone(),
        _ => stage_layers(arch.num_layers, pp),
    };
    let (stage_index, st) = binding_stage(model, cfg, &run, &parts)?;
    let per_request = st.pages.blocks_per_request(cfg.max_model_len);
    let lora_bytes = cfg.lora.map_or(0, |l| {
        let ends = u64::from(stage_index == 0) + u64::from(stage_index + 1 == pp);
        l.slot_bytes(
            arch,
            tp,
            st_layers(&parts, stage_index),
            model.activation_bytes,
        ) + ends * l.vocab_slot_bytes(arch, model.activation_bytes)
    });
    let outcome = match arch.max_position_embeddings {
        Some(trained) if cfg.max_model_len > trained => VllmOutcome::LongerThanTrained { trained },
        _ => outcome(
            &st.pages,
            cfg,
            run.budget,
            st.spent(),
            st.kv,
            gpu.total_bytes,
        ),
    };
    Ok(VllmFit {
        tensor_parallel: tp,
        pipeline_parallel: pp,
        stage_layers: parts,
        binding_stage: stage_index,
        max_num_batched_tokens: run.tokens,
        max_num_seqs: run.seqs,
        terms: stage_terms(&run, &st),
        block_size: st.pages.block_size(),
        block_bytes: st.pages.block_bytes,
        num_blocks: st.num_blocks,
        blocks_per_request: per_request,
        kv_groups: st.pages.groups(),
        kv_tokens: kv_tokens(st.num_blocks, per_request, cfg.max_model_len),
        max_concurrency_centi: concurrency_centi(st.num_blocks, per_request),
        outcome,
        fewest_gpus: None,
        lora: cfg.lora.map(|l| (l, lora_bytes)),
        encoder: run.encoder,
        draft: cfg.speculative.as_ref().map(|s| VllmDraft {
            draft: crate::plan::engines::speculative::draft(arch, model.weights_bytes, s.method),
            tokens: s.tokens,
        }),
    })
}

/// Refuses, before any term is computed, what gpumem does not model of `arch` under `cfg`.
fn refuse_unmodelled(arch: &ModelArch, cfg: &VllmConfig) -> Result<(), Unmodelled> {
    if cfg.lora.is_some() && arch.moe.is_some() {
        return Err(Unmodelled::LoraOnExperts);
    }
    if arch.deepseek_v4.is_some() {
        return Err(Unmodelled::CompressedAttention);
    }
    if arch.msa.is_some() {
        return Err(Unmodelled::SparseAttention);
    }
    if arch.glm5_next.is_some() {
        return Err(Unmodelled::PooledIndexer);
    }
    Ok(())
}

/// The run on `gpu` over `(tp, pp)`: the batch vLLM profiles (its defaults for the GPU's class
/// where `cfg` gives none), the budget, and the vision tower's profile over that batch.
fn run_of(model: &VllmModel<'_>, gpu: VllmGpu, (tp, pp): (u64, u64), cfg: &VllmConfig) -> Run {
    let class = GpuClass::of(gpu.total_bytes, gpu.is_a100);
    let tokens = cfg
        .max_num_batched_tokens
        .unwrap_or_else(|| class.max_num_batched_tokens());
    let seqs = cfg.max_num_seqs.unwrap_or_else(|| class.max_num_seqs());
    let encoder = model.vision.as_ref().and_then(|v| {
        super::encoder::profile(
            v,
            &cfg.multimodal,
            &super::encoder::Batch {
                max_model_len: cfg.max_model_len,
                max_num_batched_tokens: tokens,
                max_num_seqs: seqs,
                tp,
                activation_bytes: model.activation_bytes,
            },
        )
    });
    Run {
        tokens,
        seqs,
        budget: ceil_fraction(gpu.total_bytes, cfg.gpu_memory_utilization),
        tp,
        pp,
        nvls: class.nvls(),
        encoder,
    }
}

/// The binding rank's terms in the order they are shown; offloaded weights only when there
/// are some.
fn stage_terms(run: &Run, st: &Stage) -> Vec<Term> {
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
    [
        computed(TermKind::Budget, run.budget),
        computed(TermKind::Weights, st.weights),
        modelled(TermKind::CpuOffload, st.offloaded),
        modelled(TermKind::ProfilePeak, st.profile),
        modelled(TermKind::NonTorch, st.non_torch),
        modelled(TermKind::CudaGraphs, st.graphs),
        computed(TermKind::KvCache, st.kv),
        modelled(TermKind::Startup, STARTUP_BYTES),
    ]
    .into_iter()
    .filter(|t| t.term != TermKind::CpuOffload || t.bytes > 0)
    .collect()
}

/// The stage (and its index) with the fewest KV blocks, whose blocks every rank gets.
fn binding_stage(
    model: &VllmModel<'_>,
    cfg: &VllmConfig,
    run: &Run,
    parts: &[u64],
) -> Result<(u64, Stage), Unmodelled> {
    let mut start = 0;
    let mut binding: Option<(u64, Stage)> = None;
    for (s, &n) in parts.iter().enumerate() {
        let stage = Stage::of(model, cfg, run, start..start + n, s as u64)
            .ok_or(Unmodelled::RecurrentLayers)?;
        start += n;
        if binding
            .as_ref()
            .is_none_or(|(_, b)| stage.num_blocks < b.num_blocks)
        {
            binding = Some((s as u64, stage));
        }
    }
    match binding {
        Some(b) => Ok(b),
        None => Ok((
            0,
            Stage::of(model, cfg, run, 0..0, 0).ok_or(Unmodelled::RecurrentLayers)?,
        )),
    }
}

/// The layers stage `index` of `parts` holds.
fn st_layers(parts: &[u64], index: u64) -> u64 {
    usize::try_from(index)
        .ok()
        .and_then(|i| parts.get(i))
        .copied()
        .unwrap_or(0)
}

/// The KV cache vLLM makes of some bytes on each rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvOfAvailable {
    /// KV blocks.
    pub blocks: u64,
    /// Tokens a block holds (a hybrid's attention block, grown to hold a state page).
    pub block_size: u64,
    /// KV cache groups (full, sliding and recurrent layer groups), whose blocks share the pool.
    pub groups: u64,
    /// The fewest tokens a block holds in any group: vLLM 0.19 and before printed the "GPU KV
    /// cache size" as the blocks shared evenly among the groups times this.
    pub smallest_block_size: u64,
    /// "GPU KV cache size" as vLLM 0.33 prints it: the concurrency times `max_model_len`.
    pub tokens: u64,
}

/// The KV cache vLLM makes of `available` bytes on each of `tp` ranks (its log's "Available KV
/// cache memory") for the whole model on one stage. This is the cache's own arithmetic (pages,
/// hybrid groups, state pages, block size), apart from how the budget is reached; `None` for
/// a mixer vLLM does not run.
pub fn kv_of_available(
    model: &VllmModel<'_>,
    tp: u64,
    cfg: &VllmConfig,
    available: u64,
) -> Option<KvOfAvailable> {
    let tokens = cfg.max_num_batched_tokens.unwrap_or(8192);
    let pages = KvPages::of(model, tp.max(1), cfg, tokens, 0..model.arch.num_layers)?;
    let blocks = available / pages.block_bytes.max(1);
    let per_request = pages.blocks_per_request(cfg.max_model_len);
    Some(KvOfAvailable {
        blocks,
        block_size: pages.block_size(),
        groups: pages.groups(),
        smallest_block_size: pages.smallest_block_size(),
        tokens: kv_tokens(blocks, per_request, cfg.max_model_len),
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

#[cfg(test)]
mod tests {
    use super::{accepts_tp, stage_layers, LayoutRejection};

    // A recurrent mixer's heads shard like attention's: where they do not divide, vLLM's
    // `divide` refuses the size.
    #[test]
    fn recurrent_heads_must_divide_over_the_ranks() {
        let mut arch = crate::model::find_model("nemotron-nano-9b-v2")
            .expect("the catalog's Nemotron-Nano-9B-v2")
            .arch;
        assert_eq!(accepts_tp(&arch, 2), Ok(()));
        if let Some(ssm) = arch.ssm.as_mut() {
            ssm.dt_rank = 127;
        }
        assert_eq!(
            accepts_tp(&arch, 2),
            Err(LayoutRejection::RecurrentNotDivisible { heads: 127 })
        );
    }

    #[test]
    fn layers_are_partitioned_as_vllm_partitions_them() {
        // get_pp_indices: the remainder goes to the stages before the last, last first.
        assert_eq!(stage_layers(80, 3), [27, 27, 26]);
        assert_eq!(stage_layers(32, 5), [6, 6, 7, 7, 6]);
        assert_eq!(stage_layers(32, 4), [8, 8, 8, 8]);
        assert_eq!(stage_layers(61, 2), [31, 30]);
        assert_eq!(stage_layers(32, 1), [32]);
    }
}
