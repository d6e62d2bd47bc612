//! A draft model beside the target (`llama-server -md DRAFT --spec-type draft-simple`): the
//! draft's own model, KV-cache and compute buffers, and what drafting changes in the target's.
//!
//! llama-server derives the draft's parameters from the target's (`common/speculative.cpp`,
//! `common_base_params_to_speculative`): the same context, micro-batch and sequences, its own
//! `-ngld` (all layers by default) over the same devices, an f16 cache unless `-ctkd`/`-ctvd`
//! say otherwise (the target's `-ctk` is not inherited), and logits for one token a sequence.
//! The target then keeps logits for the drafted tokens too: `-np × (1 + --spec-draft-n-max)`
//! rows, at most a batch (`common_speculative_get_output_limits`). llama.cpp's fit counts the
//! draft beside the target at every context it tries (`common_fit_extra_model`), but moves only
//! the target's layers.
//!
//! A Gemma 4 assistant (`gemma4-assistant`) drafts as llama-server's `draft-mtp` does (it
//! names no such type from the file, whose layers are not MTP blocks, so the launch says it):
//! an MTP context whose `ctx_other` is the target's (`common_speculative_init_result`), its
//! layers viewing the target's last sliding and full caches, so it has no cache of its own and
//! reads the target's at the target's cache type. llama.cpp's fit measures a draft alone,
//! which an assistant cannot be ("requires ctx_other"): it fits the target without the
//! assistant's weights and compute buffers, which gpumem counts.

use std::path::PathBuf;

use serde::Serialize;

use super::placement::{device_uses, on_cpu, DeviceUse, Offload};
use crate::model::{
    Family, LayerWeights, ModelArch, ModelSource, DEFAULT_WEIGHT_PRECISION, KV_F16,
};
use crate::plan::engines::Settings;

/// llama-server's logical batch (`-b`, 2048), which caps the target's rows of logits.
const SERVER_BATCH: u64 = 2048;

/// `--spec-draft-n-max`'s default (`common_params_speculative_draft::n_max`).
pub const DEFAULT_N_MAX: u64 = 3;

/// How llama-server is told the draft: a file (`-md`) or a Hub GGUF (`-hfd`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DraftRef {
    /// A GGUF file.
    File(PathBuf),
    /// A GGUF repository on the Hub with llama.cpp's tag, `ORG/NAME[:QUANT]`.
    Hub(String),
}

/// The draft model and how llama-server runs it.
#[derive(Debug, Clone)]
pub struct LlamaCppDraft {
    /// The draft model, read like any model.
    pub source: Box<ModelSource>,
    /// How the launch names it.
    pub load: DraftRef,
    /// `--spec-draft-n-max`: the most tokens drafted a step.
    pub n_max: u64,
    /// `-ngld`: the draft's layers on the GPUs, the output layer counted as one (`None`: all).
    pub n_gpu_layers: Option<u64>,
}

impl LlamaCppDraft {
    /// The target's rows of logits for `sequences` (`-np`) when this draft proposes tokens.
    pub fn target_outputs(&self, sequences: u64) -> u64 {
        sequences
            .saturating_mul(1 + self.n_max)
            .clamp(1, SERVER_BATCH)
    }

    /// `-ngld` as llama.cpp resolves it: every layer and the output one by default.
    pub fn gpu_layers(&self) -> u64 {
        let all = self.source.arch.num_layers + 1;
        self.n_gpu_layers.map_or(all, |n| n.min(all))
    }

    /// A Gemma 4 assistant: it reads the target's caches and drafts as `draft-mtp`.
    pub fn is_assistant(&self) -> bool {
        self.source.arch.family_kind() == Family::Gemma4Assistant
    }

    /// llama-server's `--spec-type` for this draft.
    pub fn spec_type(&self) -> &'static str {
        match self.is_assistant() {
            true => "draft-mtp",
            false => "draft-simple",
        }
    }

    /// Why llama.cpp cannot draft with this model for `target` (`None`: it can). An assistant
    /// views the target's last two layers' caches as a sliding and a full one of its own head
    /// sizes and KV heads (llama_kv_cache_iswa's shared layers) and reads rows as wide as the
    /// target's embeddings (`common_speculative_impl_draft_mtp` asserts the widths), so it
    /// drafts only for the Gemma 4 it was made for.
    pub fn refusal(&self, target: &ModelArch) -> Option<String> {
        let a = &self.source.arch;
        if !self.is_assistant() {
            return None;
        }
        let name = &self.source.name;
        if target.family_kind() != Family::Gemma4 {
            return Some(format!(
                "{name} is a Gemma 4 assistant: llama.cpp drafts with it only for a Gemma 4 \
                 target, whose caches it reads ({} is {})",
                target.name, target.family
            ));
        }
        let backbone = a.edge.map_or(0, |e| e.backbone);
        let n = target.num_layers;
        let tail_ok = n >= 2 && target.is_sliding_layer(n - 2) && !target.is_sliding_layer(n - 1);
        let heads = |x: &ModelArch| {
            let f = x.full_attention.map(|f| (f.head_dim, f.kv_heads));
            (x.head_dim, x.num_kv_heads, f)
        };
        if backbone != target.hidden_size || !tail_ok || heads(a) != heads(target) {
            return Some(format!(
                "{name} is a Gemma 4 assistant for a target {backbone} wide whose last two \
                 layers are a sliding and a full one of its head sizes: {} is not that target",
                target.name
            ));
        }
        None
    }

    /// The draft's run from the target's `s`: its context, streams, devices and `-np` (an
    /// assistant's cache type the target's, whose caches it reads).
    fn settings(&self, s: &Settings) -> Settings {
        let mut d = s.clone();
        if !self.is_assistant() {
            d.kv_dtype = KV_F16;
            d.kv_dtype_auto = false;
        }
        d.llamacpp.outputs = Some(s.llamacpp.parallel.max(1));
        d
    }

    /// The draft's bytes on each GPU of `free` bytes and, last, the host, with the target run
    /// as `s`: its layers split by the GPUs' free memory as llama.cpp splits a model given no
    /// `-ts`. `None` where its graph is not replayed.
    pub fn uses(&self, s: &Settings, free: &[u64]) -> Option<Vec<DeviceUse>> {
        let arch = &self.source.arch;
        let weights = self.weights(s);
        let d = self.settings(s);
        if free.is_empty() {
            return Some(vec![on_cpu(&weights, arch, &d)?]);
        }
        #[expect(
            clippy::cast_precision_loss,
            reason = "llama.cpp splits by free memory in f32"
        )]
        let offload = Offload {
            n_gpu_layers: self.gpu_layers(),
            tensor_split: free.iter().map(|&f| f as f32).collect(),
            kv_offload: true,
            moves: Vec::new(),
        };
        device_uses(&weights, arch, &d, &offload)
    }

    /// The draft's weights by layer: a GGUF's own, else counted from its shape at the
    /// precision asked for the target.
    fn weights(&self, s: &Settings) -> LayerWeights {
        self.source.layer_weights.clone().unwrap_or_else(|| {
            LayerWeights::from_arch(
                &self.source.arch,
                s.dtype.unwrap_or(DEFAULT_WEIGHT_PRECISION),
            )
        })
    }
}

/// Each of `a` with `b`'s bytes added, device by device.
pub fn add_uses(a: &mut [DeviceUse], b: &[DeviceUse]) {
    for (x, y) in a.iter_mut().zip(b) {
        x.model += y.model;
        x.context += y.context;
        x.compute += y.compute;
    }
}

/// The draft's share of a llama.cpp plan, as the account reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DraftAccount {
    /// The draft model's name.
    pub model: String,
    /// How the launch names it.
    pub load: DraftRef,
    /// `--spec-draft-n-max`.
    pub n_max: u64,
    /// `--spec-type`: `draft-simple`, or `draft-mtp` for a Gemma 4 assistant.
    pub spec_type: &'static str,
    /// `-ngld`, the output layer counted as one.
    pub n_gpu_layers: u64,
    /// Its bytes on each GPU, in the target's order (inside the account's `devices`).
    pub devices: Vec<DeviceUse>,
    /// Its bytes on the host (inside the account's `host`).
    pub host: DeviceUse,
}
