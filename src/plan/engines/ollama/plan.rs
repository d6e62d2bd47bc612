//! Ollama's planner: its defaults, then llama-server's fit over the devices as gpumem's
//! llama.cpp room plans it.

use serde::Serialize;

use super::processor::{processor, sizes, Processor};
use crate::model::{Family, ModelArch, ModelSource};
use crate::plan::engines::{
    EnginePlanner, EstimateOverflow, LlamaCpp, LlamaCppAccount, LlamaCppConfig, Planned, Settings,
};
use crate::plan::{Accounting, Candidate, EngineAccount};

const GIB: u64 = 1 << 30;

/// Ollama's settings: its environment (`OLLAMA_*`) and a model's parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OllamaRun {
    /// `num_ctx` (`OLLAMA_CONTEXT_LENGTH`, a Modelfile's `PARAMETER num_ctx`); `None`: by VRAM.
    pub num_ctx: Option<u64>,
    /// `OLLAMA_NUM_PARALLEL` (`None`: 1).
    pub num_parallel: Option<u64>,
    /// `OLLAMA_FLASH_ATTENTION` (`None`: llama-server's `--flash-attn auto`).
    pub flash_attention: Option<bool>,
    /// `OLLAMA_GPU_OVERHEAD`, bytes a GPU kept out of the VRAM that sets the default context.
    pub gpu_overhead: u64,
}

/// Where `num_ctx` came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NumCtxFrom {
    /// `--context` (or `OLLAMA_CONTEXT_LENGTH`).
    Asked,
    /// Ollama's default for the GPUs' total memory.
    VramTier,
    /// The model's trained length, below what was asked or defaulted.
    Trained,
}

/// Ollama's account: what it chose, llama-server's placement, and what it reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OllamaAccount {
    /// `num_ctx`: tokens a request.
    pub num_ctx: u64,
    /// Where it came from.
    pub num_ctx_from: NumCtxFrom,
    /// The GPUs' total memory less `OLLAMA_GPU_OVERHEAD`, which the default context follows.
    pub total_vram_bytes: u64,
    /// Parallel requests (`-np`).
    pub num_parallel: u64,
    /// `--flash-attn` as Ollama passes it: `on`, `off` or `auto`.
    pub flash_attn: &'static str,
    /// `--cache-type-k/v`, when not f16.
    pub kv_cache_type: Option<&'static str>,
    /// Layers llama-server offloads (`offloaded N/M layers to GPU`).
    pub layers_offloaded: u64,
    /// Its M: the repeating layers and the output layer.
    pub layers_total: u64,
    /// `ollama ps`'s SIZE, in bytes: every buffer.
    pub size_bytes: u64,
    /// Of it, on the GPUs.
    pub size_vram_bytes: u64,
    /// `ollama ps`'s PROCESSOR.
    pub processor: Processor,
    /// llama-server's own placement.
    pub llamacpp: LlamaCppAccount,
}

/// Ollama's planner over llama.cpp's configuration (`--flash-attn` and the rest as llama-server
/// runs by default).
#[derive(Debug, Clone, Copy)]
pub struct Ollama<'a>(pub &'a LlamaCppConfig);

/// Ollama's default context for GPUs of `total_vram` bytes (`server/routes.go`).
fn vram_tier(total_vram: u64) -> u64 {
    match total_vram {
        v if v >= 47 * GIB => 262_144,
        v if v >= 23 * GIB => 32_768,
        _ => 4_096,
    }
}

/// Architectures Ollama runs one request at a time (`server/sched.go`), and encoders.
fn single_request(arch: &ModelArch) -> bool {
    arch.encoder.is_some()
        || matches!(
            arch.family_kind(),
            Family::Qwen3Next | Family::Qwen35 | Family::NemotronH
        )
}

impl EnginePlanner for Ollama<'_> {
    fn plan(
        &self,
        source: &ModelSource,
        settings: &Settings,
        candidates: &[Candidate],
    ) -> Result<Planned, EstimateOverflow> {
        let run = &settings.ollama;
        let total_vram: u64 = candidates
            .iter()
            .filter(|c| c.is_gpu())
            .map(|c| c.total_bytes.saturating_sub(run.gpu_overhead))
            .sum();
        let (asked, mut from) = match run.num_ctx {
            Some(n) => (n, NumCtxFrom::Asked),
            None => (vram_tier(total_vram), NumCtxFrom::VramTier),
        };
        let num_ctx = match source.arch.max_position_embeddings {
            Some(trained) if trained < asked => {
                from = NumCtxFrom::Trained;
                trained
            }
            _ => asked.max(4),
        };
        let parallel = if single_request(&source.arch) {
            1
        } else {
            run.num_parallel.unwrap_or(1).max(1)
        };
        let flash_attn = match run.flash_attention {
            Some(true) => "on",
            Some(false) => "off",
            None => "auto",
        };
        let s = Settings {
            context: num_ctx,
            batch: parallel,
            flash_attention: flash_attn != "off",
            ..settings.clone()
        };
        let cfg = LlamaCppConfig {
            flash_attention_off: flash_attn == "off",
            ..self.0.clone()
        };
        let Planned::Own(mut selection) = LlamaCpp(&cfg).plan(source, &s, candidates)? else {
            return Ok(Planned::Unmodelled);
        };
        selection.plan.accounting = Accounting::Ollama;
        let Some(EngineAccount::LlamaCpp(a)) = selection.plan.account.take() else {
            return Ok(Planned::Own(selection));
        };
        let output = parallel * source.arch.vocab_size * 4;
        let (size, vram) = sizes(&a, output);
        let shown = processor(&a, (size, vram));
        // A full offload's SIZE is its GPU buffers alone (`MemorySize`).
        let size = if shown == Processor::Gpu { vram } else { size };
        let kv = s.kv_dtype.name;
        selection.plan.account = Some(EngineAccount::Ollama(Box::new(OllamaAccount {
            num_ctx,
            num_ctx_from: from,
            total_vram_bytes: total_vram,
            num_parallel: parallel,
            flash_attn,
            kv_cache_type: (kv != "f16").then_some(kv),
            layers_offloaded: a.n_gpu_layers.min(a.repeating_layers + 1),
            layers_total: a.repeating_layers + 1,
            size_bytes: size,
            size_vram_bytes: vram,
            processor: shown,
            llamacpp: a,
        })));
        Ok(Planned::Own(selection))
    }
}
