//! Layers across hosts (pipeline parallel: vLLM's `--pipeline-parallel-size`, llama.cpp's RPC
//! backend): the fewest hosts that hold the model, largest first, every GPU of each in
//! proportion to its usable memory, each host's GPUs kept together so the pipeline crosses the
//! network once per host.

use super::layers::{layer_placements, split_layers};
use super::{Devices, Found};
use crate::plan::{Candidate, PlanKind};

pub(super) fn plan(d: &Devices<'_>) -> Option<Found> {
    let m = d.req.model?;
    let policy = d.policy;
    let mut hosts: Vec<(&str, u64)> = Vec::new();
    for c in &d.whole_gpus {
        match hosts.iter_mut().find(|(h, _)| *h == c.host) {
            Some((_, sum)) => *sum += policy.usable(c),
            None => hosts.push((&c.host, policy.usable(c))),
        }
    }
    hosts.sort_by_key(|&(h, sum)| (std::cmp::Reverse(sum), h));
    (2..=hosts.len()).find_map(|k| {
        let mut devs: Vec<&Candidate> = Vec::new();
        for (h, _) in &hosts[..k] {
            let mut on_host: Vec<&Candidate> = d
                .whole_gpus
                .iter()
                .copied()
                .filter(|c| c.host == *h)
                .collect();
            on_host.sort_by_key(|c| std::cmp::Reverse(policy.usable(c)));
            devs.extend(on_host);
        }
        let usable: Vec<u64> = devs.iter().map(|c| policy.usable(c)).collect();
        let layers = split_layers(&m, &usable)?;
        Some(Found {
            kind: PlanKind::CrossHost,
            placements: layer_placements(&devs, &layers, &m),
            gpu_layers: Some(m.layers),
        })
    })
}
