//! What a plan can serve: the longest context and the most sequences its devices still hold,
//! searched by re-planning rather than extrapolated.

use super::{plan, Candidate, Capacity, PlanKind, Policy, Requirement, Selection};

/// The serving capacity of `selection`'s plan (`None` without a plan): on the devices the plan
/// uses, the longest context for `batch` sequences and the most sequences of `context` tokens
/// that the planner still places, `needs_at(batch, context)` re-estimating the model each time
/// (activations and KV cache both grow with them). Searched, not extrapolated, so a figure it
/// gives is one `select` itself accepts.
pub fn capacity(
    selection: &Selection,
    candidates: &[Candidate],
    policy: &Policy,
    context: u64,
    batch: u64,
    needs_at: &dyn Fn(u64, u64) -> Option<Requirement>,
) -> Option<Capacity> {
    let placements = &selection.plan.placements;
    if selection.plan.kind == PlanKind::None || placements.is_empty() {
        return None;
    }
    let devices: Vec<Candidate> = candidates
        .iter()
        .filter(|c| {
            placements
                .iter()
                .any(|p| c.host == p.host && c.backend == p.backend && c.device == p.device)
        })
        .cloned()
        .collect();
    let fits = |batch: u64, context: u64| {
        needs_at(batch, context)
            .is_some_and(|r| plan(&r, &devices, policy, None).plan.kind != PlanKind::None)
    };
    // The largest n in [0, 2^32] with fits(n): the CLI's batch and context are 32-bit.
    let largest = |fits_n: &dyn Fn(u64) -> bool| {
        let (mut lo, mut hi) = (0u64, u64::from(u32::MAX));
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if fits_n(mid) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        lo
    };
    Some(Capacity {
        context,
        batch,
        kv_tokens: largest(&|c| c > 0 && fits(1, c)),
        max_concurrent_sequences: largest(&|b| b > 0 && fits(b, context)),
        max_context_at_batch: largest(&|c| c > 0 && fits(batch, c)),
        trained_context: None,
        max_concurrency_centi: None,
    })
}
