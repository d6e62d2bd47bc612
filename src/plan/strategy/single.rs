//! One device holds everything: the best-ranked device with room, the most usable memory first
//! within a rank.

use super::{placement, rank, Devices, Found};
use crate::backend::BackendKind;
use crate::plan::PlanKind;

pub(super) fn plan(d: &Devices<'_>) -> Option<Found> {
    let (req, policy) = (d.req, d.policy);
    let fits = |c: &&&crate::plan::Candidate| policy.usable(c) >= req.total;
    let best_rank = d
        .singles
        .iter()
        .filter(fits)
        .map(|c| rank(c, policy.prefer))
        .min()?;
    let c = d
        .singles
        .iter()
        .filter(fits)
        .find(|c| rank(c, policy.prefer) == best_rank)?;
    let layers = req.model.map(|m| m.layers);
    Some(Found {
        kind: PlanKind::Single,
        placements: vec![placement(c, req.total, layers)],
        gpu_layers: if c.backend == BackendKind::Cpu {
            Some(0)
        } else {
            layers
        },
    })
}
