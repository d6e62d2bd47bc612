//! Rendering of `gpumem select`.

use std::fmt::Write as _;

use serde::Serialize;

use super::launch::{launch_json, launch_text, LaunchJson};
use super::one_line;
use super::{new_table, thousands, Report, Style};
use crate::backend::{BackendKind, SameGpu};
use crate::plan::engines::EngineVersion;
use crate::plan::launch::{Engine, Launch, NoLaunch};
use crate::plan::{
    Accounting, Capacity, HeldBack, Placement, Plan, PlanKind, Selection, Suggestion, Usable,
    UsableRule, Verdict, VerdictReason,
};
use crate::units::format_bytes;

/// The select report (JSON schema: docs/json-schema.md#select).
#[derive(Debug, Clone)]
pub struct SelectReport {
    /// The model, when one was given.
    pub model: Option<String>,
    /// The plan and every candidate.
    pub selection: Selection,
    /// Each engine's launch commands, or why it has none.
    pub launches: Vec<(Engine, Result<Launch, NoLaunch>)>,
    /// Kubernetes nodes whose GPUs are not all schedulable (planned without those).
    pub held_back: Vec<HeldBack>,
    /// GPUs this machine lists through several APIs, planned once each.
    pub same_gpu: Vec<SameGpu>,
    /// When nothing fits: changes that would make it fit, each planned with first.
    pub suggestions: Vec<Suggestion>,
    /// With `--max-context`: the longest context that plans (`Some(None)`: not even one
    /// token); the plan is for it.
    pub longest_context: Option<Option<u64>>,
    /// With `--max-concurrency`: the most sequences of the context at once (`Some(None)`: not
    /// even one).
    pub most_sequences: Option<Option<u64>>,
    /// With `--suggest-dtype`: the weight precision of least loss that fits (`Some(None)`:
    /// none does); the plan is in it.
    pub suggested_dtype: Option<Option<&'static str>>,
}

/// The JSON view: the library's typed verdicts plus their reason in words.
#[derive(Serialize)]
struct SelectJson<'a> {
    model: &'a Option<String>,
    required_bytes: u64,
    plan: &'a Plan,
    engine_release: Option<EngineVersion>,
    candidates: Vec<VerdictJson<'a>>,
    launch: Vec<LaunchJson<'a>>,
    held_back: &'a [HeldBack],
    same_gpu: &'a [SameGpu],
    suggestions: &'a [Suggestion],
    #[serde(skip_serializing_if = "Option::is_none")]
    longest_context: Option<Option<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    most_sequences: Option<Option<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    suggested_dtype: Option<Option<&'static str>>,
}

#[derive(Serialize)]
struct VerdictJson<'a> {
    #[serde(flatten)]
    verdict: &'a Verdict,
    reason: String,
}

impl Serialize for SelectReport {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let s = &self.selection;
        SelectJson {
            held_back: &self.held_back,
            same_gpu: &self.same_gpu,
            suggestions: &self.suggestions,
            longest_context: self.longest_context,
            most_sequences: self.most_sequences,
            suggested_dtype: self.suggested_dtype,
            model: &self.model,
            required_bytes: s.required_bytes,
            plan: &s.plan,
            engine_release: s.plan.accounting.release(),
            candidates: s
                .candidates
                .iter()
                .map(|v| VerdictJson {
                    verdict: v,
                    reason: reason_text(v),
                })
                .collect(),
            launch: self
                .launches
                .iter()
                .map(|(e, r)| launch_json(*e, r))
                .collect(),
        }
        .serialize(serializer)
    }
}

/// Which rule set the usable figure, in words: "21.60 GiB usable after the 90 % memory fraction".
fn usable_text(u: &Usable) -> String {
    let base = if u.base_is_free { "free" } else { "total" };
    let rule = match u.rule {
        UsableRule::MemoryFraction { fraction } => {
            format!("the {:.0} % memory fraction", fraction * 100.0)
        }
        UsableRule::MinFree { min_free_bytes } => {
            format!("{} kept free", format_bytes(min_free_bytes))
        }
        // llama.cpp's fit keeps no margin in system RAM: all of it holds what stays there.
        UsableRule::FitMargin { margin_bytes: 0 } => {
            return format!(
                "{} usable: all its {base} memory (llama.cpp's fit keeps no margin in system RAM)",
                format_bytes(u.bytes)
            )
        }
        UsableRule::FitMargin { margin_bytes } => {
            format!("llama.cpp's {} fit margin", format_bytes(margin_bytes))
        }
        UsableRule::GpuMemoryUtilization { fraction } => {
            format!("--gpu-memory-utilization {fraction}")
        }
        UsableRule::WholeDevice => {
            return format!(
                "{} usable: all its {base} memory (the need holds the CUDA context)",
                format_bytes(u.bytes)
            )
        }
        UsableRule::Reserve { reserve_bytes } => {
            format!(
                "a {} driver and context reserve",
                format_bytes(reserve_bytes)
            )
        }
    };
    format!(
        "{} usable of {} {base} after {rule}",
        format_bytes(u.bytes),
        format_bytes(u.base_bytes)
    )
}

fn reason_text(v: &Verdict) -> String {
    let text = match v.reason {
        VerdictReason::SoftwareDevice => format!(
            "a software device on the CPU ({}); prefer the cpu backend, or --prefer {}",
            v.name, v.backend
        ),
        VerdictReason::SoftwareDeviceSkipped => format!(
            "a software device on the CPU ({}); llama.cpp runs on the cpu backend instead ({})",
            v.name,
            if v.backend == BackendKind::Vulkan {
                "its Vulkan backend takes a CPU-type device only where GGML_VK_VISIBLE_DEVICES \
                 names it"
            } else {
                "it has no backend for this API's CPU devices"
            }
        ),
        VerdictReason::Fits => format!(
            "fits: needs {}, {}",
            format_bytes(v.needed_bytes),
            usable_text(&v.usable)
        ),
        VerdictReason::TooSmall => format!(
            "needs {}, {}",
            format_bytes(v.needed_bytes),
            usable_text(&v.usable)
        ),
        VerdictReason::NotForEngine => "the engine serves from GPUs only".into(),
        VerdictReason::SystemRam => {
            "system RAM: the token embeddings and any layers not offloaded".into()
        }
        VerdictReason::SharedRam => format!(
            "system RAM, also the GPU's memory: needs {} with the GPU's share, has {}",
            format_bytes(v.needed_bytes),
            format_bytes(v.usable_bytes)
        ),
        VerdictReason::OffloadedOptimizer => format!(
            "system RAM for the ranks' offloaded optimizers: needs {}, has {}",
            format_bytes(v.needed_bytes),
            format_bytes(v.usable_bytes)
        ),
    };
    match &v.mig_profile {
        Some(profile) => format!(
            "{text}; a MIG {} slice: planned alone, never split with other slices",
            one_line(profile)
        ),
        None => text,
    }
}

impl Report for SelectReport {
    fn render_text(&self, style: &Style) -> String {
        let s = &self.selection;
        let mut text = String::new();
        let what = self
            .model
            .as_deref()
            .map_or_else(|| "the request".into(), |m| super::one_line(m).into_owned());
        let answers = [
            self.longest_context.map(|c| {
                c.map_or("No context fits, not even one token".into(), |c| {
                    format!("The longest context that fits: {} tokens", thousands(c))
                })
            }),
            self.most_sequences.map(|n| {
                n.map_or("Not even one sequence fits".into(), |n| {
                    format!("The most sequences that fit at once: {}", thousands(n))
                })
            }),
            self.suggested_dtype.map(|d| {
                d.map_or("No precision the engine loads fits".into(), |d| {
                    format!("The precision of least loss that fits: --dtype {d}")
                })
            }),
        ];
        // The answers to --max-context, --max-concurrency and --suggest-dtype come first.
        for answer in answers.into_iter().flatten() {
            let _ = writeln!(text, "{answer}\n");
        }
        let per = if matches!(s.plan.accounting, Accounting::Vllm | Accounting::Sglang) {
            " on each GPU, with one request of the full context"
        } else {
            ""
        };
        let _ = writeln!(
            text,
            "{what} needs {}{per}\n",
            format_bytes(s.required_bytes)
        );
        let _ = writeln!(text, "{}", verdict_table(s, style));
        reasons_text(&mut text, s, style);
        for h in &self.held_back {
            let _ = writeln!(text, "{}", held_back_text(h));
        }
        for g in &self.same_gpu {
            let _ = writeln!(
                text,
                "{}:{} is the GPU {}:{} drives (same UUID or PCI address); planned once, \
                 through {}",
                g.backend, g.device, g.kept_backend, g.kept_device, g.kept_backend
            );
        }
        let p = &s.plan;
        let plan = format!("{}\n", plan_line(s));
        let _ = write!(text, "{}", style.paint(&plan, p.kind != PlanKind::None));
        accounting_note(&mut text, p, &self.launches);
        if let Some(a) = p.llamacpp() {
            super::engine::llamacpp_text(&mut text, a);
        }
        if let Some(f) = p.vllm().filter(|_| p.accounting == Accounting::Vllm) {
            let len = p.capacity.map_or(0, |c| c.context);
            super::engine::vllm_text(&mut text, f, p.kind != PlanKind::None, len);
        }
        if let Some(a) = p.ollama() {
            super::engine_ollama::ollama_text(&mut text, a);
        }
        if let Some(f) = p.sglang() {
            super::engine_sglang::sglang_text(&mut text, f);
        }
        if let Some(c) = p.capacity {
            capacity_text(&mut text, &c);
        }
        for (engine, result) in &self.launches {
            launch_text(&mut text, *engine, result);
        }
        if let Some(c) = p.max_context.filter(|_| self.suggestions.is_empty()) {
            let _ = writeln!(
                text,
                "The largest context that fits on the best device: {} tokens.",
                thousands(c)
            );
        }
        suggestions_text(&mut text, &self.suggestions);
        text
    }

    /// `--quiet`: the verdict and the commands that launch it, or what the closest plan lacks
    /// and the changes that would make it fit.
    fn render_brief(&self, style: &Style) -> Option<String> {
        let s = &self.selection;
        let mut text = String::new();
        let plan = format!("{}\n", plan_line(s));
        let _ = write!(
            text,
            "{}",
            style.paint(&plan, s.plan.kind != PlanKind::None)
        );
        for (engine, result) in &self.launches {
            launch_text(&mut text, *engine, result);
        }
        suggestions_text(&mut text, &self.suggestions);
        Some(text)
    }
}

/// Every candidate's single-device verdict.
fn verdict_table(s: &Selection, style: &Style) -> comfy_table::Table {
    // One host (this machine, or simulated cards): no host column, to keep within 80 columns.
    let many_hosts = many_hosts(s);
    let most = name_limit(s, style);
    // The headroom is usable − needed, in the JSON; the table keeps to 80 columns without it.
    let mut headers = vec!["device", "name", "usable", "needed", "verdict"];
    if many_hosts {
        headers.insert(0, "host");
    }
    let mut t = new_table(style, &headers);
    for v in &s.candidates {
        let mut row = vec![
            comfy_table::Cell::new(format!("{}:{}", v.backend.name(), v.device)),
            comfy_table::Cell::new(short_name(&one_line(&v.name), most)),
            comfy_table::Cell::new(format_bytes(v.usable_bytes)),
            comfy_table::Cell::new(format_bytes(v.needed_bytes)),
            style.verdict(&verdict_text(v, s.plan.kind), v.fits || v.rank.is_some()),
        ];
        if many_hosts {
            row.insert(0, comfy_table::Cell::new(one_line(&v.host)));
        }
        t.add_row(row);
    }
    t
}

/// The verdict column: the device's part in the plan when it has one, else whether it fits
/// alone and why not.
fn verdict_text(v: &Verdict, kind: PlanKind) -> String {
    match v.rank {
        Some(r) if kind == PlanKind::Sharded => format!("used: FSDP rank {} of {}", r.rank, r.of),
        Some(r) if kind == PlanKind::DataParallel => {
            format!("used: DP rank {} of {}", r.rank, r.of)
        }
        Some(r) if r.stages > 1 && r.of > 1 => format!(
            "used: stage {} of {}, TP rank {} of {}",
            r.stage + 1,
            r.stages,
            r.rank,
            r.of
        ),
        Some(r) if r.stages > 1 => format!("used: stage {} of {}", r.stage + 1, r.stages),
        Some(r) if r.of > 1 => format!("used: TP rank {} of {}", r.rank, r.of),
        Some(_) => "used".into(),
        None if v.fits => "fits".into(),
        None => match v.reason {
            VerdictReason::SoftwareDevice | VerdictReason::SoftwareDeviceSkipped => {
                "software device".into()
            }
            VerdictReason::NotForEngine => "not a GPU".into(),
            VerdictReason::SystemRam => "system RAM".into(),
            VerdictReason::OffloadedOptimizer | VerdictReason::SharedRam => "RAM too small".into(),
            _ => "too small".into(),
        },
    }
}

/// Each device the plan does not use, and why, below the table: the reasons are sentences,
/// which would make the table too wide for a terminal.
fn reasons_text(text: &mut String, s: &Selection, style: &Style) {
    // Names the table had to cut, whole.
    let most = name_limit(s, style);
    for v in &s.candidates {
        let name = one_line(&v.name);
        if short_name(&name, most) != name {
            let _ = writeln!(text, "{}:{} is {name}", v.backend, v.device);
        }
    }
    for v in s.candidates.iter().filter(|v| v.rank.is_none() && !v.fits) {
        let line = format!(
            "{}:{} on {}: {}",
            v.backend,
            v.device,
            one_line(&v.host),
            reason_text(v)
        );
        let _ = writeln!(text, "{line}");
    }
}

/// A device name cut to 20 characters for the table (the JSON keeps it whole).
fn short_name(name: &str, most: usize) -> String {
    if name.chars().count() <= most {
        return name.to_string();
    }
    let head: String = name.chars().take(most - 1).collect();
    format!("{head}…")
}

/// Whether the verdict table needs a host column: the candidates are on more than one host.
fn many_hosts(s: &Selection) -> bool {
    let first = s.candidates.first().map(|v| v.host.as_str());
    s.candidates.iter().any(|v| Some(v.host.as_str()) != first)
}

/// The widest device name the verdict table shows whole: less beside a host column in a narrow
/// terminal, so that no name wraps inside its cell.
fn name_limit(s: &Selection, style: &Style) -> usize {
    if many_hosts(s) && style.narrow() {
        14
    } else {
        20
    }
}

/// Why a host offers fewer GPUs than it has.
fn held_back_text(h: &HeldBack) -> String {
    let why = if h.cordoned {
        "the node is cordoned".to_string()
    } else if !h.mig_enabled.is_empty() {
        let list = h
            .mig_enabled
            .iter()
            .map(|i| format!("GPU {i}"))
            .collect::<Vec<_>>()
            .join(", ");
        let verb = if h.mig_enabled.len() == 1 {
            "is"
        } else {
            "are"
        };
        format!(
            "{list} {verb} in MIG mode: nvidia-smi's --query-gpu gives the whole GPU, not the \
             slices a process can use; describe the slices in a hand-written inventory, a name \
             and total_bytes each"
        )
    } else {
        format!(
            "{} in use or unschedulable",
            h.gpus.saturating_sub(h.allocatable)
        )
    };
    format!(
        "{}: {} of {} GPUs {} ({why}); planned without the rest",
        one_line(&h.host),
        h.allocatable,
        h.gpus,
        if h.mig_enabled.is_empty() {
            "allocatable"
        } else {
            "planned"
        }
    )
}

/// The placements of `p` (only the GPUs' with `gpus_only`): layers, where, bytes.
fn split_line(p: &Plan, at: &dyn Fn(&Placement) -> String, gpus_only: bool) -> String {
    p.placements
        .iter()
        .filter(|x| !gpus_only || x.backend != crate::backend::BackendKind::Cpu)
        .map(|x| {
            format!(
                "{} layers on {} ({})",
                x.layers.unwrap_or(0),
                at(x),
                format_bytes(x.bytes)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A plan of equal shares on one host's devices: how many, where, each one's bytes, which.
fn even(p: &Plan, what: &str, devices: &str, each: &str) -> String {
    format!(
        "Plan: {what} {} {devices} on {} ({} {each}): {}",
        p.placements.len(),
        one_line(&p.placements[0].host),
        format_bytes(p.placements[0].bytes),
        p.placements
            .iter()
            .map(|x| format!("{}:{}", x.backend, x.device))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The plan in one line.
fn plan_line(s: &Selection) -> String {
    let p = &s.plan;
    let at = |x: &Placement| format!("{}:{} on {}", x.backend, x.device, one_line(&x.host));
    let split = |p: &Plan| split_line(p, &at, false);
    match p.kind {
        PlanKind::Single => format!("Plan: single device — {}", at(&p.placements[0])),
        PlanKind::TensorParallel => even(p, "tensor parallel over", "devices", "each"),
        PlanKind::LayerSplit => format!("Plan: layer split — {}", split(p)),
        PlanKind::Sharded => even(p, "FSDP2 over", "GPUs", "a rank"),
        PlanKind::DataParallel => even(p, "data parallel over", "GPUs", "a rank"),
        PlanKind::CrossHost => format!("Plan: layers across hosts — {}", split(p)),
        PlanKind::CpuOffload => {
            let (g, c) = (&p.placements[0], &p.placements[p.placements.len() - 1]);
            // llama.cpp's fit may also keep routed experts of layers on the GPUs in RAM.
            let experts = p.llamacpp().map_or(0, |a| {
                a.overrides
                    .iter()
                    .filter(|o| o.to.is_none() && o.layer < a.repeating_layers)
                    .count()
            });
            let in_ram = |cl: u64| match (cl, experts) {
                (_, 0) => format!("{cl} layers"),
                (0, n) => format!("the experts of {n} layers"),
                (_, n) => format!("{cl} layers and the experts of {n} more"),
            };
            match (g.layers, c.layers) {
                (Some(_), Some(cl)) if p.placements.len() > 2 => format!(
                    "Plan: CPU offload — {}; {} in its system RAM ({})",
                    split_line(p, &at, true),
                    in_ram(cl),
                    format_bytes(c.bytes)
                ),
                (Some(gl), Some(cl)) => format!(
                    "Plan: CPU offload — {gl} layers on {} ({}), {} in its system RAM ({})",
                    at(g),
                    format_bytes(g.bytes),
                    in_ram(cl),
                    format_bytes(c.bytes)
                ),
                _ => format!(
                    "Plan: CPU offload — {} on {}, {} in its system RAM",
                    format_bytes(g.bytes),
                    at(g),
                    format_bytes(c.bytes)
                ),
            }
        }
        PlanKind::None => match p.vllm() {
            Some(f) => format!(
                "No plan fits: the closest, vLLM with --tensor-parallel-size {}{}, is {} \
                 short per GPU.",
                f.tensor_parallel,
                if f.pipeline_parallel > 1 {
                    format!(" --pipeline-parallel-size {}", f.pipeline_parallel)
                } else {
                    String::new()
                },
                format_bytes(p.shortfall_bytes.unwrap_or(s.required_bytes))
            ),
            None => format!(
                "No plan fits: the closest candidate is {} short.",
                format_bytes(p.shortfall_bytes.unwrap_or(s.required_bytes))
            ),
        },
    }
}

/// What the plan can serve.
fn capacity_text(text: &mut String, c: &Capacity) {
    if c.max_concurrency_centi.is_some() {
        let _ = writeln!(
            text,
            "Serving: {} request{} of {} tokens at once ({} tokens of KV cache).",
            thousands(c.max_concurrent_sequences),
            if c.max_concurrent_sequences == 1 {
                ""
            } else {
                "s"
            },
            thousands(c.context),
            thousands(c.kv_tokens)
        );
        return;
    }
    let _ = writeln!(
        text,
        "Serving capacity: {} tokens of KV cache — {} sequence{} of {} tokens at once, or \
             {} tokens each for a batch of {}.",
        thousands(c.kv_tokens),
        thousands(c.max_concurrent_sequences),
        if c.max_concurrent_sequences == 1 {
            ""
        } else {
            "s"
        },
        thousands(c.context),
        thousands(c.max_context_at_batch),
        c.batch
    );
    if let Some(t) = c.trained_context.filter(|&t| c.max_context_at_batch > t) {
        let _ = writeln!(
            text,
            "The model was trained for up to {} tokens; engines refuse a longer context.",
            thousands(t)
        );
    }
}

/// A whole number of GiB as a flag value (`64GiB`), else bytes.
fn size_flag(bytes: u64) -> String {
    if bytes % (1 << 30) == 0 {
        format!("{}GiB", bytes >> 30)
    } else {
        bytes.to_string()
    }
}

/// Changes that would make it fit, as the flags to give.
fn suggestions_text(text: &mut String, suggestions: &[Suggestion]) {
    if suggestions.is_empty() {
        return;
    }
    let _ = writeln!(text, "\nIt fits with any one of these (each planned with):");
    for s in suggestions {
        let line = match s {
            Suggestion::Context { context } => {
                format!("--context {context}   (the longest context that fits)")
            }
            Suggestion::KvDtype { dtype } => format!("--kv-dtype {dtype}   (a smaller KV cache)"),
            Suggestion::Dtype { dtype } => format!("--dtype {dtype}   (lower-precision weights)"),
            Suggestion::GpuMemoryUtilization { fraction } => {
                format!("--gpu-memory-utilization {fraction}   (more of each GPU for vLLM)")
            }
            Suggestion::Ram { bytes } => format!(
                "--ram {}   (system RAM beside the GPU, for CPU offload)",
                size_flag(*bytes)
            ),
            Suggestion::MoreGpus { count, each_bytes } => format!(
                "{count} GPUs of {} in all   (more of the largest GPU here)",
                format_bytes(*each_bytes)
            ),
            Suggestion::Fsdp {
                ranks,
                instead_of_ddp: false,
            } => format!("--fsdp {ranks}   (FSDP2, one rank on each of {ranks} GPUs here)"),
            Suggestion::Fsdp {
                ranks,
                instead_of_ddp: true,
            } => format!("--fsdp {ranks}   (FSDP2 on {ranks} GPUs here, in place of --ddp)"),
            Suggestion::Checkpointing => {
                "--checkpointing   (gradient checkpointing: keep each layer's input only)".into()
            }
            Suggestion::MicroBatch { batch, grad_accum } => format!(
                "--batch {batch} --grad-accum {grad_accum}   (smaller micro-batches, the same \
                 batch a step)"
            ),
            Suggestion::Recipe { recipe } => {
                format!("--recipe {recipe}   (adapters on the frozen model, not full fine-tuning)")
            }
            Suggestion::ZeroOffload => "--deepspeed-zero2 1 --offload-optimizer   (ZeRO-Offload: \
                                        the optimizer in host RAM)"
                .into(),
            Suggestion::DeepSpeed { stage, ranks } => format!(
                "--deepspeed-zero{stage} {ranks}   (in its place: ZeRO-{stage}, a rank on each of \
                 {ranks} GPUs)"
            ),
        };
        let _ = writeln!(text, "  {line}");
    }
}

/// Whose rule judged the plan, where it is not the engine's own account (PyTorch's training
/// step, or the generic rule standing in for vLLM's or SGLang's): said, never silent.
fn accounting_note(text: &mut String, p: &Plan, launches: &[(Engine, Result<Launch, NoLaunch>)]) {
    if p.accounting == Accounting::PytorchTraining {
        let _ = writeln!(
            text,
            "PyTorch {} training: the step's peak (one FSDP2 rank's with --fsdp N, one DDP\n\
             rank's with --ddp, the fullest ZeRO-1 rank's with --zero1 N, the fullest\n\
             DeepSpeed rank's with --deepspeed-zero1/2/3 N) with the CUDA context\n\
             (--overhead) and the allocator's slack (--fragmentation-reserve), against\n\
             free memory (`estimate --mode train` shows its parts); with\n\
             --offload-optimizer the host's RAM must hold every rank's optimizer.",
            crate::plan::engines::pytorch::VERSION.version
        );
    }
    // An engine's own account that does not cover the model (RWKV or DeepSeek-V4 under vLLM,
    // Gemma 4 under SGLang) leaves the plan to the generic rule: said, never silent.
    if let [(engine @ (Engine::Vllm | Engine::Sglang), _)] = launches {
        if p.accounting == Accounting::Generic {
            let what = if p.kind == PlanKind::None {
                "the verdicts above are"
            } else {
                "this plan is"
            };
            let _ = writeln!(
                text,
                "{}'s own accounting does not cover this model; {what} by gpumem's \
                 generic rule (--memory-fraction).",
                super::launch::engine_name(*engine)
            );
        }
    }
    if p.accounting == Accounting::GenericAfterVllm {
        // Nothing fits only where vLLM had no GPU to judge (`demand::after_vllm`).
        if p.kind == PlanKind::None {
            let _ = writeln!(
                text,
                "With no GPU here vLLM's own accounting judges nothing; the verdicts above \
                 are by gpumem's generic rule (--memory-fraction)."
            );
        } else {
            let _ = writeln!(
                text,
                "No tensor-parallel layout serves under vLLM's own accounting; this plan is \
                 by gpumem's generic rule (--memory-fraction), which is all gpumem models of \
                 vLLM's pipeline stages and --cpu-offload-gb so far."
            );
        }
    }
}
