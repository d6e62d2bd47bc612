//! Partial CPU offload: as many layers as fit on the best GPU (MIG slices included), the rest
//! in the system RAM of the same host. Without a model's layers (`--bytes`), the GPU takes what
//! it can and the RAM the rest.

use super::{placement, Devices, Found};
use crate::plan::PlanKind;

pub(super) fn plan(d: &Devices<'_>) -> Option<Found> {
    let (req, policy) = (d.req, d.policy);
    let gpu = d
        .gpus
        .iter()
        .filter(|g| d.cpu_of(&g.host).is_some())
        .max_by_key(|c| policy.usable(c))?;
    let cpu = d.cpu_of(&gpu.host)?;
    let gpu_usable = policy.usable(gpu);
    let cpu_usable = policy.usable(cpu);
    let (gpu_bytes, gpu_layers, cpu_bytes, cpu_layers) = match req.model {
        Some(m) => {
            let room = gpu_usable.saturating_sub(m.overhead + m.activations + m.non_layer);
            let on_gpu = (room / m.per_layer.max(1)).min(m.layers);
            let on_cpu = m.layers - on_gpu;
            let cpu_bytes = on_cpu * m.per_layer + m.activations;
            if on_gpu == 0 || cpu_bytes > cpu_usable {
                return None;
            }
            (
                m.overhead + m.activations + m.non_layer + on_gpu * m.per_layer,
                Some(on_gpu),
                cpu_bytes,
                Some(on_cpu),
            )
        }
        None => {
            let rest = req.total.saturating_sub(gpu_usable);
            if gpu_usable == 0 || rest > cpu_usable {
                return None;
            }
            (gpu_usable, None, rest, None)
        }
    };
    Some(Found {
        kind: PlanKind::CpuOffload,
        placements: vec![
            placement(gpu, gpu_bytes, gpu_layers),
            placement(cpu, cpu_bytes, cpu_layers),
        ],
        gpu_layers,
    })
}
