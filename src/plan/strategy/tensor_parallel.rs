//! Tensor parallel over identical devices of one host (same backend, name and size): the
//! smallest group that fits, each device holding an even share of everything but the per-device
//! overhead, which each holds whole, over a group whose size divides the attention heads.

use super::{placement, Devices, Found};
use crate::plan::{identical_groups, Candidate, PlanKind};

#[expect(
    clippy::cast_possible_truncation,
    reason = "usize is 64 bits (lib.rs refuses other targets)"
)]
pub(super) fn plan(d: &Devices<'_>) -> Option<Found> {
    let (req, policy) = (d.req, d.policy);
    let mut best: Option<(u64, Vec<&Candidate>, u64)> = None;
    for group in identical_groups(&d.whole_gpus) {
        let mut sorted = group.clone();
        sorted.sort_by_key(|c| std::cmp::Reverse(policy.usable(c)));
        let splits = |n: u64| req.model.is_none_or(|m| m.shards_heads(n));
        for n in (2..=sorted.len() as u64).filter(|&n| splits(n)) {
            let per_device = match req.model {
                Some(m) => (req.total - m.overhead).div_ceil(n) + m.overhead,
                None => req.total.div_ceil(n),
            };
            let chosen = &sorted[..n as usize];
            if chosen.iter().all(|c| policy.usable(c) >= per_device) {
                if best.as_ref().is_none_or(|(bn, _, _)| n < *bn) {
                    best = Some((n, chosen.to_vec(), per_device));
                }
                break;
            }
        }
    }
    let (_, chosen, per_device) = best?;
    let layers = req.model.map(|m| m.layers);
    Some(Found {
        kind: PlanKind::TensorParallel,
        placements: chosen
            .iter()
            .map(|c| placement(c, per_device, layers))
            .collect(),
        gpu_layers: layers,
    })
}
