//! llama.cpp's fit for a mixture-of-experts model (`common_params_fit_impl` in
//! `common/fit.cpp` of the llama.cpp vendored by llama-cpp-python 0.3.36), which `llama-server
//! --fit` and `llama-fit-params` run when the defaults do not fit:
//!
//! 1. with every routed expert in system memory, the devices are filled from the last to the
//!    first with "dense-only" layers (attention and the rest on the device, experts on the
//!    CPU), each device the most that keep its margin, found by false position;
//! 2. if the dense weights of every layer fit with room to spare, dense-only layers are turned
//!    into full layers from the first device on, overflowing to the next device or system
//!    memory, and one more layer is tried in part (its up projections, then its gate and up,
//!    else its attention alone).
//!
//! The steps, their order and their rounding are llama.cpp's, so the `-ngl`, `-ts` and `-ot`
//! it prints are what this prints (checked against `llama-fit-params` in
//! `tests/fixtures/llamacpp-fit/*-moe.json`).

use serde::Serialize;

use super::placement::{device_uses, Offload};
use crate::model::{FfnMove, LayerMove, LayerWeights, ModelArch};
use crate::plan::engines::Settings;

/// One override of llama.cpp's fit: layer `layer`'s weights that `what` names go to device
/// `to` (`None`: system memory).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TensorOverride {
    /// The layer (the output layer's index is the number of repeating layers).
    pub layer: u64,
    /// Which feed-forward weights.
    #[serde(skip)]
    pub what: FfnMove,
    /// Where to: a device, or the CPU.
    pub to: Option<usize>,
    /// The `-ot` pattern, as llama.cpp writes it.
    pub pattern: Option<String>,
}

/// llama.cpp's fitted placement of a MoE model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MoeFit {
    /// `-ngl` (`None`: its default, every layer, nothing overridden).
    pub n_gpu_layers: Option<u64>,
    /// Each device's layers (`-ts`) when there are several.
    pub tensor_split: Option<Vec<u64>>,
    /// The `-ot` overrides, in llama.cpp's order.
    pub overrides: Vec<TensorOverride>,
}

impl MoeFit {
    /// The layer moves the overrides make, indexed by layer.
    pub fn moves(&self) -> Vec<LayerMove> {
        let n = self
            .overrides
            .iter()
            .map(|o| o.layer + 1)
            .max()
            .unwrap_or(0);
        let mut moves = vec![LayerMove::default(); usize::try_from(n).unwrap_or(0)];
        for o in &self.overrides {
            if let Some(m) = usize::try_from(o.layer).ok().and_then(|i| moves.get_mut(i)) {
                *m = LayerMove {
                    what: o.what,
                    to: o.to,
                };
            }
        }
        moves
    }
}

/// One device's share in the fit (`ngl_t`): its layers, how many of them are partial, and what
/// the first partial one moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Share {
    layers: u64,
    partial: u64,
    overflow: FfnMove,
}

impl Default for Share {
    fn default() -> Self {
        Share {
            layers: 0,
            partial: 0,
            overflow: FfnMove::Experts,
        }
    }
}

impl Share {
    fn full(&self) -> u64 {
        self.layers - self.partial
    }
}

/// What the fit works on: the model, its settings, and each device's free memory and target.
struct Fit<'a> {
    weights: &'a LayerWeights,
    arch: &'a ModelArch,
    settings: &'a Settings,
    /// Repeating layers plus the output layer.
    all: u64,
    targets: Vec<i64>,
}

impl Fit<'_> {
    fn nd(&self) -> usize {
        self.targets.len()
    }

    /// The overrides `shares` make (`set_ngl_tensor_split_tbo`): each device's full layers
    /// first, then its partial ones, the first of them moving `overflow` to `overflow_to`.
    fn overrides(&self, shares: &[Share], overflow_to: &[Option<usize>]) -> Vec<TensorOverride> {
        let total: u64 = shares.iter().map(|s| s.layers).sum();
        let mut il0 = self.all - total;
        let mut out = Vec::new();
        for (id, s) in shares.iter().enumerate() {
            il0 += s.full();
            for il in il0..il0 + s.partial {
                let (what, to) = if il == il0 {
                    (s.overflow, overflow_to[id])
                } else {
                    (FfnMove::Experts, None)
                };
                out.push(TensorOverride {
                    layer: il,
                    what,
                    to,
                    pattern: what.pattern(il),
                });
            }
            il0 += s.partial;
        }
        out
    }

    fn result(&self, shares: &[Share], overflow_to: &[Option<usize>]) -> MoeFit {
        MoeFit {
            n_gpu_layers: Some(shares.iter().map(|s| s.layers).sum()),
            tensor_split: (self.nd() > 1).then(|| shares.iter().map(|s| s.layers).collect()),
            overrides: self.overrides(shares, overflow_to),
        }
    }

    /// Each device's projected use under `shares` (`get_memory_for_layers`).
    fn memory(&self, shares: &[Share], overflow_to: &[Option<usize>]) -> Option<Vec<i64>> {
        let fit = self.result(shares, overflow_to);
        #[expect(clippy::cast_precision_loss, reason = "layer counts, far below 2^24")]
        let offload = Offload {
            n_gpu_layers: fit.n_gpu_layers.unwrap_or(self.all),
            tensor_split: if self.nd() > 1 {
                shares.iter().map(|s| s.layers as f32).collect()
            } else {
                vec![1.0]
            },
            kv_offload: true,
            moves: fit.moves(),
        };
        let uses = device_uses(self.weights, self.arch, self.settings, &offload)?;
        Some(
            uses[..self.nd()]
                .iter()
                .map(|u| i64::try_from(u.total()).unwrap_or(i64::MAX))
                .collect(),
        )
    }
}

/// The step of llama.cpp's false position between a fitting `low` and a failing `high` use,
/// `delta` layers apart: computed in 64 bits, narrowed to 32 as C++ narrows it, kept within
/// `1..delta`.
fn step(delta: u64, target: i64, low: i64, high: i64) -> u64 {
    let span = high - low;
    let guess = if span == 0 {
        0
    } else {
        i64::try_from(delta).unwrap_or(i64::MAX) * (target - low) / span
    };
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "llama.cpp stores the guess in a uint32_t: this is its wrap-around"
    )]
    let narrowed = u64::from(guess as u32);
    narrowed.max(1).min(delta - 1)
}

/// llama.cpp's fit for a model with routed experts over devices with `free` bytes each and
/// `margins` to keep. `None` where the graph is not replayed.
pub fn fit_moe(
    weights: &LayerWeights,
    arch: &ModelArch,
    settings: &Settings,
    free: &[u64],
    margins: &[u64],
) -> Option<MoeFit> {
    fit_moe_from(weights, arch, settings, (free, margins), true)
}

/// [`fit_moe`], with its step 1 (llama.cpp's defaults) only when `check_defaults`: after its
/// context fit llama.cpp goes straight to the experts.
pub fn fit_moe_from(
    weights: &LayerWeights,
    arch: &ModelArch,
    settings: &Settings,
    (free, margins): (&[u64], &[u64]),
    check_defaults: bool,
) -> Option<MoeFit> {
    let all = arch.num_layers + 1;
    let nd = free.len();
    let int = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let fit = Fit {
        weights,
        arch,
        settings,
        all,
        targets: free
            .iter()
            .zip(margins)
            .map(|(&f, &m)| int(f) - int(m))
            .collect(),
    };
    #[expect(
        clippy::cast_precision_loss,
        reason = "llama.cpp splits by free memory in f32"
    )]
    let by_free = |moves: Vec<LayerMove>| Offload {
        n_gpu_layers: all,
        tensor_split: free.iter().map(|&f| f as f32).collect(),
        kv_offload: true,
        moves,
    };
    // Step 1: llama.cpp's defaults, when they keep every margin.
    let uses = device_uses(weights, arch, settings, &by_free(Vec::new()))?;
    if check_defaults
        && uses
            .iter()
            .zip(&fit.targets)
            .all(|(u, &t)| int(u.total()) <= t)
    {
        return Some(MoeFit {
            n_gpu_layers: None,
            tensor_split: None,
            overrides: Vec::new(),
        });
    }
    // With every expert in system memory, is there room to spare in all?
    let all_experts = (0..all)
        .map(|_| LayerMove {
            what: FfnMove::Experts,
            to: None,
        })
        .collect();
    let dense = device_uses(weights, arch, settings, &by_free(all_experts))?;
    let surplus: i64 = dense
        .iter()
        .zip(&fit.targets)
        .map(|(u, &t)| t - int(u.total()))
        .sum();
    let mut overflow_to = vec![None; nd];
    let mut shares = vec![Share::default(); nd];
    let mut mem = fit.memory(&shares, &overflow_to)?;
    fill_dense_only(&fit, &mut shares, &mut mem, &overflow_to)?;
    if surplus > 0 {
        fill_full(&fit, &mut shares, &mut mem, &mut overflow_to)?;
    }
    Some(fit.result(&shares, &overflow_to))
}

/// Step 3: the devices from the last to the first, each given the most dense-only layers that
/// keep its target (the last device's first layer, the output layer, whole).
fn fill_dense_only(
    fit: &Fit<'_>,
    shares: &mut Vec<Share>,
    mem: &mut Vec<i64>,
    overflow_to: &[Option<usize>],
) -> Option<()> {
    let nd = fit.nd();
    for id in (0..nd).rev() {
        let unassigned = fit.all - shares[id + 1..].iter().map(|s| s.layers).sum::<u64>();
        let mut high = shares.clone();
        high[id].layers = unassigned;
        high[id].partial = if id < nd - 1 {
            unassigned
        } else {
            unassigned.saturating_sub(1)
        };
        if high[id].layers == 0 {
            continue;
        }
        let mut mem_high = fit.memory(&high, overflow_to)?;
        if mem_high[id] <= fit.targets[id] {
            *shares = high;
            *mem = mem_high;
            continue;
        }
        let mut delta = high[id].layers - shares[id].layers;
        while delta > 1 {
            let s = step(delta, fit.targets[id], mem[id], mem_high[id]);
            let mut test = shares.clone();
            test[id].layers += s;
            test[id].partial += if id == nd - 1 && test[id].partial == 0 {
                s - 1
            } else {
                s
            };
            let mem_test = fit.memory(&test, overflow_to)?;
            if mem_test[id] <= fit.targets[id] {
                *shares = test;
                *mem = mem_test;
            } else {
                high = test;
                mem_high = mem_test;
            }
            delta = high[id].layers - shares[id].layers;
        }
    }
    Some(())
}

/// Step 4: dense-only layers turned into full ones from the first device on, then part of one
/// more layer tried on each device.
fn fill_full(
    fit: &Fit<'_>,
    shares: &mut Vec<Share>,
    mem: &mut Vec<i64>,
    overflow_to: &mut Vec<Option<usize>>,
) -> Option<()> {
    let nd = fit.nd();
    // The first of the trailing devices that hold layers.
    let mut dense_start = nd;
    for id in (0..nd).rev() {
        if shares[id].layers == 0 {
            break;
        }
        dense_start = id;
    }
    let mut id = 0;
    while id <= dense_start && dense_start < nd {
        let mut high = shares.clone();
        for jd in dense_start..nd {
            let moved = if jd < nd - 1 {
                high[jd].layers
            } else {
                high[jd].layers.saturating_sub(1)
            };
            high[id].layers += moved;
            high[jd].layers -= moved;
            high[jd].partial = 0;
        }
        let start_high = nd - 1;
        let mut mem_high = fit.memory(&high, overflow_to)?;
        if mem_high[id] > fit.targets[id] {
            let mut delta = high[id].full() - shares[id].full();
            while delta > 1 {
                let s = step(delta, fit.targets[id], mem[id], mem_high[id]);
                let mut test = shares.clone();
                let mut start_test = dense_start;
                let mut converted = 0;
                while start_test < nd {
                    let n = (s - converted).min(test[start_test].partial);
                    test[start_test].layers -= n;
                    test[start_test].partial -= n;
                    test[id].layers += n;
                    converted += n;
                    if test[start_test].partial > 0 {
                        break;
                    }
                    start_test += 1;
                }
                let mem_test = fit.memory(&test, overflow_to)?;
                if mem_test[id] <= fit.targets[id] {
                    *shares = test;
                    *mem = mem_test;
                    dense_start = start_test;
                } else {
                    high = test;
                    mem_high = mem_test;
                }
                delta = high[id].full() - shares[id].full();
            }
        } else {
            *shares = high;
            *mem = mem_high;
            dense_start = start_high;
        }
        if dense_start < nd {
            one_more_partial(fit, shares, mem, overflow_to, id, &mut dense_start)?;
        }
        id += 1;
    }
    Some(())
}

/// Part of one more layer on device `id`: its up projections kept (then its gate too), else
/// only its attention, the rest overflowing to the next device or system memory.
fn one_more_partial(
    fit: &Fit<'_>,
    shares: &mut Vec<Share>,
    mem: &mut Vec<i64>,
    overflow_to: &mut Vec<Option<usize>>,
    id: usize,
    dense_start: &mut usize,
) -> Option<()> {
    let nd = fit.nd();
    let floor = u64::from(id == nd - 1);
    if shares[*dense_start].layers <= floor {
        return Some(());
    }
    let mut test = shares.clone();
    let mut start_test = *dense_start;
    // llama.cpp moves a layer from the first dense-only device to this one in 32-bit unsigned
    // counts: on the same device (its dense-only layers already converted) the two steps cancel
    // out; from a device with no dense-only layer left the count would wrap, which is not
    // followed.
    if start_test != id {
        if test[start_test].partial == 0 {
            return Some(());
        }
        test[start_test].layers -= 1;
        test[start_test].partial -= 1;
        test[id].layers += 1;
        test[id].partial += 1;
    }
    if test[start_test].partial == 0 {
        start_test += 1;
    }
    let mut to_test = overflow_to.clone();
    if id < nd - 1 {
        to_test[id] = Some(id + 1);
    }
    let fits =
        |m: &[i64]| m[id] < fit.targets[id] && (id + 1 == nd || m[id + 1] < fit.targets[id + 1]);
    test[id].overflow = FfnMove::GateDown;
    let mem_test = fit.memory(&test, &to_test)?;
    if fits(&mem_test) {
        *shares = test.clone();
        *overflow_to = to_test.clone();
        *mem = mem_test;
        *dense_start = start_test;
        test[id].overflow = FfnMove::Down;
        let mem_test = fit.memory(&test, &to_test)?;
        if fits(&mem_test) {
            *shares = test;
            *overflow_to = to_test;
            *mem = mem_test;
        }
    } else {
        test[id].overflow = FfnMove::AllFfn;
        let mem_test = fit.memory(&test, &to_test)?;
        if fits(&mem_test) {
            *shares = test;
            *overflow_to = to_test;
            *mem = mem_test;
            *dense_start = start_test;
        }
    }
    Some(())
}
