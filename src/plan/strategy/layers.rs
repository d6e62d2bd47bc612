//! Layers spread over devices in proportion to their usable memory: the arithmetic the
//! layer-split and cross-host strategies share.

use super::super::{Candidate, ModelNeeds, Placement};

/// Each device's share of a layer split: its layers, overhead and activations, and on the first
/// device the weights outside the layers. Devices given no layer are left out.
pub(super) fn layer_placements(
    devs: &[&Candidate],
    layers: &[u64],
    m: &ModelNeeds,
) -> Vec<Placement> {
    devs.iter()
        .zip(layers)
        .enumerate()
        .filter(|(_, (_, l))| **l > 0)
        .map(|(i, (c, l))| Placement {
            host: c.host.clone(),
            backend: c.backend,
            device: c.device,
            bytes: m.overhead
                + m.activations
                + l * m.per_layer
                + if i == 0 { m.non_layer } else { 0 },
            layers: Some(*l),
        })
        .collect()
}

/// Layers per device in proportion to usable memory (largest remainder), moved to devices with
/// room when a share does not fit; `None` when the layers cannot all be placed. Device 0 also
/// holds the non-layer weights; every device holds overhead and activations.
#[expect(
    clippy::cast_possible_truncation,
    reason = "at most m.layers, a u64: the share u is at most the total"
)]
pub fn split_layers(m: &ModelNeeds, usable: &[u64]) -> Option<Vec<u64>> {
    let capacity: Vec<u64> = usable
        .iter()
        .enumerate()
        .map(|(i, &u)| {
            let fixed = m.overhead + m.activations + if i == 0 { m.non_layer } else { 0 };
            u.saturating_sub(fixed) / m.per_layer.max(1)
        })
        .collect();
    if capacity.iter().sum::<u64>() < m.layers {
        return None;
    }
    let total: u128 = usable.iter().map(|&u| u128::from(u)).sum();
    let mut layers: Vec<u64> = usable
        .iter()
        .map(|&u| (u128::from(m.layers) * u128::from(u) / total.max(1)) as u64)
        .collect();
    let mut left = m.layers - layers.iter().sum::<u64>();
    let mut i = 0;
    let n = layers.len();
    while left > 0 {
        layers[i % n] += 1;
        left -= 1;
        i += 1;
    }
    // Move layers from over-full devices to devices with room.
    for d in 0..layers.len() {
        while layers[d] > capacity[d] {
            let to = (0..layers.len()).find(|&j| layers[j] < capacity[j])?;
            layers[d] -= 1;
            layers[to] += 1;
        }
    }
    Some(layers)
}
