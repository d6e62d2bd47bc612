//! Rendering of `gpumem estimate`.

use std::fmt::Write as _;

use serde::Serialize;

use super::one_line;
use super::{new_table, thousands, Report, Style};
use crate::backend::BackendKind;
use crate::model::{CatalogModel, ModelSource, ModelWarning, SourceKind};
use crate::plan::engines::pytorch::generate::GeneratePeak;
use crate::plan::engines::Breakdown;
use crate::plan::engines::LlamaCppAccount;
use crate::plan::engines::TrainingStep;
use crate::plan::engines::{ActivationsBasis, Mode, Settings, TrainingBytes};
use crate::units::format_bytes;

/// Whose inference the figures are, and why that engine (JSON `engine`).
#[derive(Debug, Clone, Serialize)]
pub struct EngineChoice {
    /// `llama.cpp` or `transformers`.
    pub name: &'static str,
    /// Why: `flag` (`--engine`), `format` (a GGUF is llama.cpp's), or `default` (a checkpoint
    /// llama.cpp would first convert; vLLM's need is `--engine vllm`).
    pub chosen_by: ChosenBy,
}

/// Why `estimate` counts the engine it counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChosenBy {
    /// `--engine` named it.
    Flag,
    /// The model's format implies it (a GGUF: llama.cpp).
    Format,
    /// No flag and no format's engine: llama.cpp, gpumem's default.
    Default,
}

/// llama.cpp's fit on `--device`'s devices, as `select --engine llama.cpp` plans it (JSON
/// `llamacpp`).
#[derive(Debug, Clone, Serialize)]
pub struct LlamaCppNeed {
    /// The devices planned on, by name.
    pub devices: Vec<String>,
    /// What it needs on each GPU used (`select`'s figure), or the host's when none is.
    pub needed_bytes: u64,
    /// Whether it loads there.
    pub fits: bool,
    /// Its buffers per device and on the host, and its flags.
    pub account: Option<LlamaCppAccount>,
}

/// The model part of the report.
#[derive(Debug, Clone, Serialize)]
pub struct ModelView {
    /// Name shown in reports: catalog name, GGUF `general.name` or file name.
    pub name: String,
    /// Where it came from.
    pub source: SourceKind,
    /// HF model_type / GGUF architecture.
    pub family: String,
    /// Parameters stored, all experts included.
    pub parameters: u64,
    /// Active parameters per token.
    pub active_parameters: u64,
    /// Decoder layers.
    pub layers: u64,
    /// The vision and audio towers of a multimodal config.json, with their projections into
    /// the text model: only vLLM's plan loads them (the other engines' figures are the
    /// language model's). Absent where the config has no towers gpumem counts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tower_parameters: Option<u64>,
    /// Parameters the published checkpoint stores that engines do not load to serve: Gemma 4's
    /// KV-sharing layers' own K and V projections (no engine loads them), and DeepSeek-V3's,
    /// V3.2's and GLM-5's multi-token-prediction layers (`num_nextn_predict_layers`: loaded only
    /// when vLLM drafts with them). Absent where there are none or the source is a GGUF.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unloaded_parameters: Option<u64>,
    /// An encoder's pooling (`none`, `mean`, `cls`, `last`, `rank`); absent for a decoder.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pooling: Option<crate::model::Pooling>,
}

/// The settings part of the report.
#[derive(Debug, Clone, Serialize)]
pub struct SettingsView {
    /// Weight precision (`file` when the file's own types are used).
    pub dtype: String,
    /// Precision of the KV cache.
    pub kv_dtype: String,
    /// Sequences decoded at once.
    pub batch: u64,
    /// Tokens per sequence the KV cache holds.
    pub context: u64,
    /// Prefill chunk in tokens (activations scale with it).
    pub ubatch: u64,
    /// Inference or training.
    pub mode: Mode,
    /// Whether flash attention is assumed (no score matrix in the activations).
    pub flash_attention: bool,
    /// Under training, whether activations are checkpointed (absent for inference).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpointing: Option<bool>,
}

/// One device compared with the total (`--fits`).
#[derive(Debug, Clone, Serialize)]
pub struct DeviceFit {
    /// Backend of the device.
    pub backend: BackendKind,
    /// Device index within its backend.
    pub device: usize,
    /// Device name as its driver gives it.
    pub name: String,
    /// What a plan may use there, by the serving engine's rule (as `select` counts it).
    pub available_bytes: u64,
    /// What the model needs there alone, by the same rule.
    pub needed_bytes: u64,
    /// The engine does not run on it (`needed_bytes` is then 0): a software GPU llama.cpp
    /// skips, or a device vLLM does not serve from.
    pub engine_skips: bool,
    /// Whether the total fits.
    pub fits: bool,
}

/// The estimate report (JSON schema: docs/json-schema.md#estimate).
#[derive(Debug, Clone, Serialize)]
pub struct EstimateReport {
    /// The model estimated.
    pub model: ModelView,
    /// The settings it was estimated under.
    pub settings: SettingsView,
    /// Weight bytes.
    pub weights_bytes: u64,
    /// Multimodal projector weight bytes (`--mmproj`, or an Ollama model's projector); 0 without.
    pub projector_bytes: u64,
    /// The compute buffer llama.cpp's clip reserves at warm-up to encode one image with the
    /// projector (what it prints at load); 0 without one, or where its graph is not modelled.
    pub projector_compute_bytes: u64,
    /// The buffer once the largest image the projector accepts is encoded (`--image-max-tokens`
    /// where given), which the total counts: above `projector_compute_bytes` for a tower of
    /// dynamic resolution (Qwen's), equal to it otherwise.
    pub projector_largest_image_compute_bytes: u64,
    /// KV-cache bytes for every sequence at full context, recurrent state included.
    pub kv_cache_bytes: u64,
    /// The part of `kv_cache_bytes` that is recurrent layers' state.
    pub recurrent_state_bytes: u64,
    /// KV cache per token.
    pub kv_bytes_per_token: u64,
    /// Activation scratch (inference) or stored activations (training).
    pub activation_bytes: u64,
    /// How `activation_bytes` was obtained: `graph_replay`, `stage_estimate`, `training` (the
    /// closed formula) or `pytorch_step`.
    pub activations_basis: ActivationsBasis,
    /// Runtime overhead (`--overhead`).
    pub overhead_bytes: u64,
    /// Bytes added for pool fragmentation (`--fragmentation-reserve` percent).
    pub fragmentation_bytes: u64,
    /// Training parts, with --mode train.
    pub training: Option<TrainingBytes>,
    /// With --mode train, PyTorch's step: recipe, peak by category, phase.
    pub training_step: Option<TrainingStep>,
    /// With --mode train, why the step was counted by the closed formula instead.
    pub training_unwalked: Option<String>,
    /// With --engine transformers, `generate`'s peak.
    pub generate: Option<GeneratePeak>,
    /// With --engine transformers, why llama.cpp's figures stand instead.
    pub generate_unwalked: Option<String>,
    /// Sum of every part: what must fit on one device.
    pub total_bytes: u64,
    /// Warnings about the source.
    pub warnings: Vec<String>,
    /// Devices compared, with --fits.
    pub fits: Option<Vec<DeviceFit>>,
    /// Inference: whose figures these are.
    pub engine: Option<EngineChoice>,
    /// `--device` under llama.cpp: its fit there.
    pub llamacpp: Option<LlamaCppNeed>,
}

impl EstimateReport {
    /// The report for `model` under `s`, from its breakdown.
    pub fn new(
        model: &ModelSource,
        s: &Settings,
        b: Breakdown,
        fits: Option<Vec<DeviceFit>>,
    ) -> Self {
        EstimateReport {
            model: ModelView {
                name: model.name.clone(),
                source: model.kind,
                family: model.arch.family.clone(),
                parameters: b.parameters,
                active_parameters: b.active_parameters,
                layers: model.arch.num_layers,
                tower_parameters: model.hf_vision.as_ref().and_then(|v| v.parameters()),
                unloaded_parameters: Some(model.arch.unloaded_params())
                    .filter(|&n| n > 0 && model.kind != SourceKind::Gguf),
                pooling: model.arch.encoder.map(|e| e.pooling),
            },
            settings: SettingsView {
                dtype: b.weights_dtype.name().to_string(),
                kv_dtype: s.kv_dtype.name.to_string(),
                batch: s.batch,
                context: s.context,
                ubatch: s.ubatch,
                mode: s.mode,
                flash_attention: s.flash_attention,
                checkpointing: (s.mode == Mode::Train).then_some(s.pytorch.checkpointing),
            },
            weights_bytes: b.weights_bytes,
            projector_bytes: b.projector_bytes,
            projector_compute_bytes: b.projector_compute_bytes,
            projector_largest_image_compute_bytes: b.projector_largest_image_compute_bytes,
            kv_cache_bytes: b.kv_cache_bytes,
            recurrent_state_bytes: b.recurrent_state_bytes,
            kv_bytes_per_token: b.kv_bytes_per_token,
            activation_bytes: b.activation_bytes,
            activations_basis: b.activations_basis,
            overhead_bytes: b.overhead_bytes,
            fragmentation_bytes: b.fragmentation_bytes,
            training: b.training,
            training_step: b.training_step,
            training_unwalked: b.training_unwalked.as_ref().map(ToString::to_string),
            generate: b.generate,
            generate_unwalked: b.generate_unwalked.as_ref().map(ToString::to_string),
            total_bytes: b.total_bytes,
            warnings: model.warnings.iter().map(warning_text).collect(),
            fits,
            engine: None,
            llamacpp: None,
        }
    }
}

fn pct(part: u64, total: u64) -> String {
    if total == 0 {
        "-".into()
    } else {
        format!("{:.1} %", part as f64 * 100.0 / total as f64)
    }
}

impl Report for EstimateReport {
    fn render_text(&self, style: &Style) -> String {
        let mut text = String::new();
        let m = &self.model;
        let params = if m.active_parameters != m.parameters {
            format!(
                "{} parameters ({} active)",
                thousands(m.parameters),
                thousands(m.active_parameters)
            )
        } else {
            format!("{} parameters", thousands(m.parameters))
        };
        let s = &self.settings;
        // "file" weights come from the file's own tensors, or (catalog, config.json) from the
        // checkpoint a quantization_config describes.
        let weights = match (s.dtype.as_str(), m.source) {
            ("file", SourceKind::Gguf | SourceKind::Safetensors) => "file".to_string(),
            ("file", _) => "quantized checkpoint".to_string(),
            (other, _) => other.to_string(),
        };
        let _ = writeln!(
            text,
            "{} ({}, from {}): {params}\n{} weights, {} KV cache, batch {}, context {}, {}\n",
            one_line(&m.name),
            one_line(&m.family),
            m.source,
            weights,
            s.kv_dtype,
            thousands(s.batch),
            thousands(s.context),
            if s.mode == Mode::Train {
                "training"
            } else {
                "inference"
            }
        );
        let table = self.parts_table(style);
        let _ = writeln!(text, "{table}");
        if self.training.is_none() {
            self.inference_text(&mut text);
        }
        if self.settings.mode == Mode::Train {
            super::estimate_pytorch::training_text(
                &mut text,
                self.training_step.as_ref(),
                self.training_unwalked.as_ref(),
                self.settings.checkpointing,
            );
        }
        super::estimate_pytorch::generate_text(
            &mut text,
            self.generate.as_ref(),
            self.generate_unwalked.as_ref(),
        );
        if let Some(fits) = &self.fits {
            self.fits_text(&mut text, fits, style);
        }
        text
    }
}

impl EstimateReport {
    /// Inference's lines under the table: the cache a token takes (or an encoder's pooling),
    /// the projector's largest image, how the activations were obtained, any recurrent state,
    /// and the total.
    fn inference_text(&self, text: &mut String) {
        if let Some(pooling) = self.model.pooling {
            let _ = writeln!(
                text,
                "encoder: no KV cache; each input is one micro-batch of up to {} tokens, \
                     pooled by {}",
                thousands(self.settings.ubatch.min(self.settings.context)),
                pooling_name(pooling)
            );
        } else if self.kv_bytes_per_token > 0 || self.recurrent_state_bytes == 0 {
            let _ = writeln!(
                text,
                "KV cache per token: {} bytes",
                thousands(self.kv_bytes_per_token)
            );
        }
        if self.projector_largest_image_compute_bytes > self.projector_compute_bytes {
            let _ = writeln!(
                text,
                "projector compute: {} to encode its largest image; {} at warm-up, what \
                     llama.cpp prints at load and its fit counts",
                format_bytes(self.projector_largest_image_compute_bytes),
                format_bytes(self.projector_compute_bytes)
            );
        }
        let _ = writeln!(
            text,
            "activations: {}",
            match self.activations_basis {
                ActivationsBasis::GraphReplay => {
                    "llama.cpp's prompt graph replayed through its allocator: its CPU compute buffer to the byte, and its output buffer (logits), which llama.cpp's breakdown leaves out"
                }
                ActivationsBasis::TransformersGenerate => {
                    "what lives at generate's peak beside the weights and the cache"
                }
                ActivationsBasis::Unmodelled => {
                    "NOT MODELLED for this architecture: llama.cpp's graph is not replayed, and a plain decoder's largest stage stands in (it can be far from llama.cpp's compute buffer either way)"
                }
                _ =>
                    "llama.cpp's graph stage by stage, rounded up (never below its compute buffer)",
            }
        );
        if self.recurrent_state_bytes > 0 {
            let _ = writeln!(
                text,
                "recurrent state: {} bytes for {} sequence{}, whatever the context",
                thousands(self.recurrent_state_bytes),
                self.settings.batch,
                if self.settings.batch == 1 { "" } else { "s" }
            );
        }
        self.total_text(text);
    }

    /// Inference: whose total it is, and (`--device`) llama.cpp's fit on those devices.
    fn total_text(&self, text: &mut String) {
        let reserves = self.overhead_bytes > 0 || self.fragmentation_bytes > 0;
        let asked = if reserves {
            ", with the --overhead and --fragmentation-reserve asked for"
        } else {
            ""
        };
        let Some(engine) = &self.engine else {
            return;
        };
        let line = match (engine.name, engine.chosen_by) {
            ("transformers", _) => format!("total: transformers' generate at its peak{asked}"),
            (_, ChosenBy::Default) => format!(
                "total: llama.cpp's model, KV-cache and compute buffers on a CPU{asked}, as \
                 `select --engine llama.cpp` plans them (gpumem's default engine; vLLM's need: \
                 `estimate --engine vllm --device sim:h100`)"
            ),
            (_, ChosenBy::Format) => format!(
                "total: llama.cpp's model, KV-cache and compute buffers on a CPU{asked}, as \
                 `select --engine llama.cpp` plans them (a GGUF is llama.cpp's; --device for \
                 its fit on a GPU)"
            ),
            _ => format!(
                "total: llama.cpp's model, KV-cache and compute buffers on a CPU{asked}, as \
                 `select --engine llama.cpp` plans them"
            ),
        };
        let _ = writeln!(text, "{line}");
        if let Some(need) = &self.llamacpp {
            let _ = writeln!(
                text,
                "\nOn {}: llama.cpp needs {}{}",
                need.devices.join(", "),
                format_bytes(need.needed_bytes),
                if need.fits {
                    ""
                } else {
                    "; it does not load there"
                }
            );
            if let Some(a) = &need.account {
                super::engine::llamacpp_text(text, a);
            }
        }
    }

    /// Every part of the estimate, its bytes and share, and the total.
    fn parts_table(&self, style: &Style) -> comfy_table::Table {
        let mut table = new_table(style, &["part", "bytes", "size", "share"]);
        let mut rows: Vec<(&str, u64)> = vec![("weights", self.weights_bytes)];
        if self.projector_bytes > 0 {
            rows.push(("projector (mmproj)", self.projector_bytes));
        }
        let largest = self.projector_largest_image_compute_bytes;
        if largest > self.projector_compute_bytes {
            rows.push(("projector compute, largest image", largest));
        } else if largest > 0 {
            rows.push(("projector compute", largest));
        }
        if let Some(t) = &self.training {
            rows.push(("gradients", t.gradients_bytes));
            rows.push(("optimizer state", t.optimizer_bytes));
            if self.training_step.is_none() {
                rows.push(("fp32 master weights", t.master_weights_bytes));
            }
        } else {
            let state = self.recurrent_state_bytes;
            if self.kv_cache_bytes > state || state == 0 {
                rows.push(("KV cache", self.kv_cache_bytes - state));
            }
            if state > 0 {
                rows.push(("recurrent state", state));
            }
        }
        rows.push(("activations", self.activation_bytes));
        // Inference's figures are the engine's own: a generic reserve is shown only when asked.
        let train = self.settings.mode == Mode::Train;
        if train || self.overhead_bytes > 0 {
            rows.push(("runtime overhead", self.overhead_bytes));
        }
        if train || self.fragmentation_bytes > 0 {
            rows.push(("fragmentation reserve", self.fragmentation_bytes));
        }
        for (name, bytes) in rows {
            table.add_row(vec![
                name.to_string(),
                thousands(bytes),
                format_bytes(bytes),
                pct(bytes, self.total_bytes),
            ]);
        }
        table.add_row(vec![
            style.header("total"),
            style.header(&thousands(self.total_bytes)),
            style.header(&format_bytes(self.total_bytes)),
            style.header("100.0 %"),
        ]);
        table
    }

    /// `--fits`: each device's verdict.
    fn fits_text(&self, text: &mut String, fits: &[DeviceFit], style: &Style) {
        let mut t = new_table(
            style,
            &["backend", "device", "name", "usable", "needed", "fits"],
        );
        for d in fits {
            t.add_row(vec![
                comfy_table::Cell::new(d.backend.name()),
                comfy_table::Cell::new(d.device),
                comfy_table::Cell::new(one_line(&d.name)),
                comfy_table::Cell::new(format_bytes(d.available_bytes)),
                comfy_table::Cell::new(if d.engine_skips {
                    "not used".to_string()
                } else {
                    format_bytes(d.needed_bytes)
                }),
                style.verdict(if d.fits { "yes" } else { "no" }, d.fits),
            ]);
        }
        let _ = writeln!(text, "\n{t}");
        if fits.iter().any(|d| d.engine_skips) {
            let _ = writeln!(
                text,
                "not used: the engine does not run on that device (a software GPU, or not a \
                 GPU for a GPU engine)"
            );
        }
        if !fits.iter().any(|d| d.fits) {
            let _ = writeln!(
                text,
                "No device holds it alone (by the rule `gpumem select` uses; it also tries \
                 splits)."
            );
        }
    }
}

/// One catalog model, as `--list-models` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct CatalogRow {
    /// Name accepted by `-m`.
    pub name: String,
    /// Other names `-m` accepts.
    pub aliases: Vec<String>,
    /// Architecture family (`llama`, `qwen2`, `mixtral`, …).
    pub family: String,
    /// Parameters stored, all experts included.
    pub parameters: u64,
    /// Parameters run per token (fewer than `parameters` for MoE).
    pub active_parameters: u64,
    /// Decoder layers.
    pub layers: u64,
    /// Longest context the model was trained for, when published.
    pub max_context: Option<u64>,
    /// Hugging Face repository the shape was taken from.
    pub hf_repo: String,
    /// The instruction-tuned variant, when one is published: `{name, hf_repo}`.
    pub instruct: Option<InstructRow>,
}

/// A catalog model's instruction-tuned variant.
#[derive(Debug, Clone, Serialize)]
pub struct InstructRow {
    /// Name accepted by `-m`.
    pub name: String,
    /// Its repository.
    pub hf_repo: String,
}

/// The report of `estimate --list-models`.
#[derive(Debug, Clone, Serialize)]
pub struct CatalogReport {
    /// Every catalog model, in catalog order.
    pub models: Vec<CatalogRow>,
}

impl CatalogReport {
    /// One row per catalog model.
    pub fn new(models: &[CatalogModel]) -> Self {
        CatalogReport {
            models: models
                .iter()
                .map(|m| {
                    let p = m.arch.params();
                    CatalogRow {
                        name: m.name.into(),
                        aliases: m.aliases.iter().map(|a| a.to_string()).collect(),
                        family: m.arch.family.clone(),
                        parameters: p.total,
                        active_parameters: p.active,
                        layers: m.arch.num_layers,
                        max_context: m.arch.max_position_embeddings,
                        hf_repo: m.hf_repo.into(),
                        instruct: crate::model::instruct_of(m.name).map(|(name, repo)| {
                            InstructRow {
                                name: name.into(),
                                hf_repo: repo.into(),
                            }
                        }),
                    }
                })
                .collect(),
        }
    }
}

impl Report for CatalogReport {
    fn render_text(&self, style: &Style) -> String {
        // Aliases, families, active parameters, layers and context are in the JSON: with them
        // the table would not fit 80 columns.
        let mut t = new_table(style, &["model", "Hugging Face id", "params"]);
        for m in &self.models {
            t.add_row(vec![
                m.name.clone(),
                m.hf_repo.clone(),
                crate::units::format_params(m.parameters),
            ]);
        }
        format!(
            "{t}\nA name plans its bundled config; its id reads the Hub. Instruct variants \
             (-instruct, -it, -chat), aliases, families, layers and context: --json.\n"
        )
    }
}

/// A model warning in words.
pub fn warning_text(w: &ModelWarning) -> String {
    match w {
        ModelWarning::UnknownModelType {
            model_type,
            fields_used,
        } => format!(
            "unknown model_type '{model_type}': using the generic decoder formula (gated MLP, RMSNorm, no biases) with fields {}",
            fields_used.join(", ")
        ),
        ModelWarning::TowersNotCounted { parameters } => format!(
            "multimodal model: its towers ({} parameters) are in no engine's figures here \
             (vLLM's plan takes the model with --limit-mm-per-prompt setting every modality \
             to 0, which leaves them out; --json: model.tower_parameters)",
            crate::units::format_params(*parameters)
        ),
        ModelWarning::VisionTowerNotCounted => {
            "multimodal model: its vision tower and projector are counted only in vLLM's \
             plan, for the towers it models (Qwen2-VL, Qwen2.5-VL, Gemma 3, Qwen3-VL, \
             Qwen3.5); other engines' figures are the language model's"
                .to_string()
        }
        ModelWarning::NoConfig { path } => format!(
            "no config.json beside {}: KV cache and activations are not estimated",
            path.display()
        ),
        ModelWarning::ProjectorComputeNotCounted => {
            "multimodal projector: its weights are counted; the compute buffer it needs to \
             encode an image is not"
                .to_string()
        }
        ModelWarning::BundledConfig { repo, why } => format!(
            "{repo}: answered from gpumem's bundled copy of its config.json (weights at --dtype, \
             not its headers), since {why}"
        ),
        ModelWarning::MlaFullCache { full, latent } => format!(
            "this GGUF keeps attn_kv_b unsplit (an older conversion): llama.cpp caches full K and \
             V per head for it, {:.1}× the latent a current conversion caches; reconvert to \
             shrink the KV cache",
            *full as f64 / (*latent).max(1) as f64
        ),
    }
}

/// How an encoder's pooling reads in a sentence.
fn pooling_name(p: crate::model::Pooling) -> &'static str {
    use crate::model::Pooling;
    match p {
        Pooling::None => "nothing (one vector a token)",
        Pooling::Mean => "the mean over each input's tokens",
        Pooling::Cls => "the first token",
        Pooling::Last => "the last token",
        Pooling::Rank => "a reranker's classification head",
    }
}
