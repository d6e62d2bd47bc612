//! Rendering of `gpumem select`.

use std::fmt::Write as _;

use serde::Serialize;

use super::one_line;
use super::{new_table, thousands, Report, Style};
use crate::plan::{
    Placement, Plan, PlanKind, Selection, Usable, UsableRule, Verdict, VerdictReason,
};
use crate::units::{format_bytes, format_signed_bytes};

/// The select report (JSON schema: docs/json-schema.md#select).
#[derive(Debug, Clone)]
pub struct SelectReport {
    /// The model, when one was given.
    pub model: Option<String>,
    /// The plan and every candidate.
    pub selection: Selection,
}

/// The JSON view: the library's typed verdicts plus their reason in words.
#[derive(Serialize)]
struct SelectJson<'a> {
    model: &'a Option<String>,
    required_bytes: u64,
    plan: &'a Plan,
    candidates: Vec<VerdictJson<'a>>,
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
            model: &self.model,
            required_bytes: s.required_bytes,
            plan: &s.plan,
            candidates: s
                .candidates
                .iter()
                .map(|v| VerdictJson {
                    verdict: v,
                    reason: reason_text(v),
                })
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
    match v.reason {
        VerdictReason::SoftwareDevice => format!(
            "a software device on the CPU ({}); prefer the cpu backend, or --prefer {}",
            v.name, v.backend
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
    }
}

impl Report for SelectReport {
    fn render_text(&self, style: &Style) -> String {
        let s = &self.selection;
        let mut text = String::new();
        let what = self.model.clone().unwrap_or_else(|| "the request".into());
        let _ = writeln!(text, "{what} needs {}\n", format_bytes(s.required_bytes));
        let mut t = new_table(
            style,
            &[
                "host", "backend", "device", "name", "usable", "needed", "headroom", "verdict",
            ],
        );
        for v in &s.candidates {
            t.add_row(vec![
                comfy_table::Cell::new(one_line(&v.host)),
                comfy_table::Cell::new(v.backend.name()),
                comfy_table::Cell::new(v.device),
                comfy_table::Cell::new(one_line(&v.name)),
                comfy_table::Cell::new(format_bytes(v.usable_bytes)),
                comfy_table::Cell::new(format_bytes(v.needed_bytes)),
                comfy_table::Cell::new(format_signed_bytes(v.headroom_bytes)),
                style.verdict(
                    &if v.fits {
                        "fits".to_string()
                    } else {
                        format!("rejected: {}", reason_text(v))
                    },
                    v.fits,
                ),
            ]);
        }
        let _ = writeln!(text, "{t}");
        let p = &s.plan;
        let at = |x: &Placement| format!("{}:{} on {}", x.backend, x.device, one_line(&x.host));
        let split = |p: &Plan| {
            p.placements
                .iter()
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
        };
        let line = match p.kind {
            PlanKind::Single => format!("Plan: single device — {}", at(&p.placements[0])),
            PlanKind::TensorParallel => format!(
                "Plan: tensor parallel over {} devices on {} ({} each): {}",
                p.placements.len(),
                one_line(&p.placements[0].host),
                format_bytes(p.placements[0].bytes),
                p.placements
                    .iter()
                    .map(|x| format!("{}:{}", x.backend, x.device))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            PlanKind::LayerSplit => format!("Plan: layer split — {}", split(p)),
            PlanKind::CrossHost => format!("Plan: layers across hosts — {}", split(p)),
            PlanKind::CpuOffload => {
                let (g, c) = (&p.placements[0], &p.placements[1]);
                match (g.layers, c.layers) {
                    (Some(gl), Some(cl)) => format!(
                        "Plan: CPU offload — {gl} layers on {} ({}), {cl} layers in its system RAM ({})",
                        at(g),
                        format_bytes(g.bytes),
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
            PlanKind::None => format!(
                "No plan fits: the closest candidate is {} short.",
                format_bytes(p.shortfall_bytes.unwrap_or(s.required_bytes))
            ),
        };
        let _ = writeln!(text, "{}", style.paint(&line, p.kind != PlanKind::None));
        if let Some(c) = p.capacity {
            let _ = writeln!(
                text,
                "Serving capacity: {} tokens of KV cache — {} sequences of {} tokens at once, or \
                 {} tokens each for a batch of {}.",
                thousands(c.kv_tokens),
                thousands(c.max_concurrent_sequences),
                thousands(c.context),
                thousands(c.max_context_at_batch),
                c.batch
            );
        }
        if let Some(c) = p.max_context {
            let _ = writeln!(
                text,
                "The largest context that fits on the best device: {c} tokens."
            );
        }
        text
    }
}
