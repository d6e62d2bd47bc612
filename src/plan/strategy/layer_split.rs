//! Layers split over the GPUs of one host, in proportion to their usable memory (llama.cpp's
//! `--tensor-split`, vLLM's pipeline stages).

use super::layers::{layer_placements, split_layers};
use super::{Devices, Found};
use crate::plan::{Candidate, PlanKind};

pub(super) fn plan(d: &Devices<'_>) -> Option<Found> {
    let m = d.req.model?;
    let mut hosts: Vec<&str> = d.whole_gpus.iter().map(|c| c.host.as_str()).collect();
    hosts.dedup();
    hosts.into_iter().find_map(|host| {
        let mut devs: Vec<&Candidate> = d
            .whole_gpus
            .iter()
            .copied()
            .filter(|c| c.host == host)
            .collect();
        if devs.len() < 2 {
            return None;
        }
        devs.sort_by_key(|c| std::cmp::Reverse(d.policy.usable(c)));
        let usable: Vec<u64> = devs.iter().map(|c| d.policy.usable(c)).collect();
        let layers = split_layers(&m, &usable)?;
        Some(Found {
            kind: PlanKind::LayerSplit,
            placements: layer_placements(&devs, &layers, &m),
            gpu_layers: Some(m.layers),
        })
    })
}
