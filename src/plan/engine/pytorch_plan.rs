//! PyTorch training on one GPU (`select --mode train`): the step's peak as
//! [`crate::model::training`] walks it, with the estimate's `--overhead` (the CUDA context) and
//! `--fragmentation-reserve` (the caching allocator's slack), against each GPU's free (else
//! total) memory. No serving engine's rule applies, and no generic fraction is stacked on top.
//! Sharded training (DDP, FSDP, ZeRO) is not planned yet: a step that fits no single GPU gets
//! no plan, with the closest GPU's shortfall.

use crate::model::{EstimateOverflow, ModelSource, Settings};
use crate::plan::policy::{Usable, UsableRule};
use crate::plan::{
    Accounting, Candidate, Placement, Plan, PlanKind, Selection, Verdict, VerdictReason,
};

/// The plan for one training step of `source` under `settings` over `candidates`.
pub fn select_training(
    source: &ModelSource,
    settings: &Settings,
    candidates: &[Candidate],
) -> Result<Selection, EstimateOverflow> {
    let need = source.estimate(settings)?.total_bytes;
    let usable = |c: &Candidate| {
        let base = c.free_bytes.unwrap_or(c.total_bytes);
        Usable {
            bytes: base,
            base_bytes: base,
            base_is_free: c.free_bytes.is_some(),
            rule: UsableRule::WholeDevice,
        }
    };
    let gpu = |c: &Candidate| c.is_gpu() && c.mig_profile.is_none();
    let best = candidates
        .iter()
        .filter(|c| gpu(c))
        .max_by_key(|c| usable(c).bytes);
    let chosen = best.filter(|c| usable(c).bytes >= need);
    let candidates: Vec<Verdict> = candidates
        .iter()
        .map(|c| {
            let u = usable(c);
            let fits = gpu(c) && u.bytes >= need;
            let reason = match (gpu(c), fits) {
                (false, _) => VerdictReason::NotForEngine,
                (true, true) => VerdictReason::Fits,
                (true, false) => VerdictReason::TooSmall,
            };
            Verdict::of(c, u, need, fits, reason, None)
        })
        .collect();
    let plan = match chosen {
        Some(c) => Plan {
            kind: PlanKind::Single,
            placements: vec![Placement {
                host: c.host.clone(),
                backend: c.backend,
                device: c.device,
                bytes: need,
                layers: None,
            }],
            gpu_layers: None,
            max_context: None,
            shortfall_bytes: None,
            capacity: None,
            engine: None,
            llamacpp: None,
            accounting: Accounting::PytorchTraining,
        },
        None => Plan::none(
            None,
            best.map(|c| need.saturating_sub(usable(c).bytes)),
            Accounting::PytorchTraining,
        ),
    };
    Ok(Selection {
        required_bytes: need,
        plan,
        candidates,
    })
}
