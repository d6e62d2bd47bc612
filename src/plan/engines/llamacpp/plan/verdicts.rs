//! How each candidate is judged under llama.cpp's plan (a GPU by its share, or by taking every
//! layer, against its free memory less llama.cpp's margin; system RAM by what the plan leaves
//! there), and what is said when no plan holds the model.

use super::Fitted;
use crate::backend::BackendKind;
use crate::model::LayerWeights;
use crate::plan::engines::llamacpp::draft::LlamaCppDraft;
use crate::plan::engines::llamacpp::placement::one_device;
use crate::plan::engines::Settings;
use crate::plan::{
    Accounting, Candidate, Plan, Rank, Selection, Usable, UsableRule, Verdict, VerdictReason,
};

/// No plan: llama.cpp's fit puts `f`'s share on the GPUs, which hold it, but the rest is more
/// than the system RAM beside them; the shortfall is the RAM's.
pub(super) fn ram_too_small(verdicts: Vec<Verdict>, f: &Fitted<'_>) -> Selection {
    let need = f.ram_needed();
    let ram = f.ram.map_or(0, |h| h.free_bytes.unwrap_or(h.total_bytes));
    Selection {
        required_bytes: f.required(),
        plan: Plan::none(None, Some(need.saturating_sub(ram)), Accounting::LlamaCpp),
        candidates: verdicts,
    }
}

/// No GPU holds even the output layer with its margin, or the layers left need system RAM no
/// inventory names: the shortfall is the best GPU's with every layer on it, and the longest
/// context (per sequence) with which every layer fits there.
pub(super) fn none(
    verdicts: Vec<Verdict>,
    (weights, draft): (&LayerWeights, Option<&LlamaCppDraft>),
    arch: &crate::model::ModelArch,
    s: &Settings,
    asked: &Settings,
) -> Selection {
    let needed = whole_on_one(weights, draft, arch, s).unwrap_or(0);
    let best = verdicts
        .iter()
        .filter(|v| v.backend != BackendKind::Cpu)
        .map(|v| v.usable_bytes)
        .max();
    let shortfall = best.map(|u| needed.saturating_sub(u));
    let batch = asked.batch.max(1);
    let fits_at = |context: u64| {
        let at = Settings {
            context: context.saturating_mul(batch),
            ..s.clone()
        };
        whole_on_one(weights, draft, arch, &at).is_some_and(|d| best.is_some_and(|u| d <= u))
    };
    let (mut lo, mut hi) = (0u64, asked.context.saturating_sub(1));
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if fits_at(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let max_context = (lo > 0 && fits_at(lo)).then_some(lo);
    Selection {
        required_bytes: needed,
        plan: Plan::none(max_context, shortfall, Accounting::LlamaCpp),
        candidates: verdicts,
    }
}

/// What one GPU needs to hold every layer, and the draft's beside them.
fn whole_on_one(
    weights: &LayerWeights,
    draft: Option<&LlamaCppDraft>,
    arch: &crate::model::ModelArch,
    s: &Settings,
) -> Option<u64> {
    let (d, _) = one_device(weights, arch, s, arch.num_layers + 1)?;
    let extra = match draft {
        Some(dr) => dr.uses(s, &[1])?.first()?.total(),
        None => 0,
    };
    Some(d.total() + extra)
}

/// Each candidate: a GPU judged by what every layer needs on it against its free memory less
/// llama.cpp's margin; system RAM by what the chosen plan leaves there.
pub(super) fn verdicts(
    (weights, draft): (&LayerWeights, Option<&LlamaCppDraft>),
    arch: &crate::model::ModelArch,
    s: &Settings,
    candidates: &[Candidate],
    shown: Option<(&Fitted<'_>, bool)>,
) -> Option<Vec<Verdict>> {
    // The fit whose shares the devices are judged by, and whether it is the plan.
    let (chosen, planned) = match shown {
        Some((f, planned)) => (Some(f), planned),
        None => (None, false),
    };
    let full = whole_on_one(weights, draft, arch, s)?;
    Some(
        candidates
            .iter()
            .map(|c| {
                let base = c.free_bytes.unwrap_or(c.total_bytes);
                let gpu = c.is_gpu();
                let usable = if gpu {
                    base.saturating_sub(s.llamacpp.fit_margin)
                } else {
                    base
                };
                let same = |o: &Candidate| {
                    o.host == c.host && o.backend == c.backend && o.device == c.device
                };
                // A device the plan uses is judged by its share; another GPU by taking it all.
                let share = chosen.and_then(|f| {
                    let gpu = f.gpus.iter().zip(&f.uses).find(|(d, _)| same(d));
                    let ram = f
                        .ram
                        .filter(|h| same(h) && f.uses_ram(arch.num_layers + 1))
                        .map(|_| f.ram_needed());
                    gpu.map(|(_, u)| u.total()).or(ram)
                });
                let needed = share.unwrap_or(if gpu { full } else { 0 });
                let used = share.is_some();
                // A GPU API run in software on the CPU (PoCL, lavapipe): llama.cpp does not
                // take it as a GPU, and the RAM behind it is the cpu backend's row.
                let software = !gpu && c.backend != BackendKind::Cpu;
                let shares = !gpu && used && chosen.is_some_and(|f| f.shared() > 0);
                let reason = match (gpu, needed <= usable) {
                    _ if software => VerdictReason::SoftwareDeviceSkipped,
                    _ if shares => VerdictReason::SharedRam,
                    // System RAM is judged only by what a fit leaves there.
                    (false, fits) if fits || !used => VerdictReason::SystemRam,
                    (_, true) => VerdictReason::Fits,
                    _ => VerdictReason::TooSmall,
                };
                let rule = UsableRule::FitMargin {
                    margin_bytes: if gpu { s.llamacpp.fit_margin } else { 0 },
                };
                Verdict::of(
                    c,
                    Usable {
                        bytes: usable,
                        base_bytes: base,
                        base_is_free: c.free_bytes.is_some(),
                        rule,
                    },
                    needed,
                    needed <= usable && (gpu || used),
                    reason,
                    (used && planned).then_some(Rank {
                        rank: 0,
                        of: 1,
                        stage: 0,
                        stages: 1,
                    }),
                )
            })
            .collect(),
    )
}
