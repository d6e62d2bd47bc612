//! A model's weight bytes by the layer llama.cpp puts them in: exact from a GGUF's tensors, or
//! counted from the shape at one precision for a source without tensors.

use super::arch::ModelArch;
use super::dtype::Precision;
use super::gguf::GgufFile;
use std::collections::BTreeMap;

/// A GGUF's weight bytes by where llama.cpp puts them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerWeights {
    /// The input layer: token embeddings and anything not in a layer or the output (always on
    /// the CPU).
    pub input: u64,
    /// The output layer: the output norm and head.
    pub output: u64,
    /// A head tied to the token embeddings: loaded a second time on the output layer's device
    /// when that is not the CPU (on the CPU both read the same mapped bytes). 0 when untied.
    pub tied_head: u64,
    /// Each repeating layer's tensors (`blk.N.*`).
    pub layers: Vec<u64>,
    /// The part of each layer's bytes that is its routed experts' weights (`ffn_*_exps`): what
    /// `--n-cpu-moe` keeps on the CPU.
    pub experts: Vec<u64>,
    /// Each layer's feed-forward weights by the name prefix llama.cpp's fit overrides them by.
    pub ffn: Vec<FfnBytes>,
    /// Each tensor's bytes by its GGUF name (none for a source without tensors): what ggml's
    /// scheduler copies to a device that runs an op on it (operator offload).
    pub tensors: BTreeMap<String, u64>,
    /// The weight matrices' bytes per element as (bytes, elements): what a matrix not in
    /// `tensors` is sized at.
    pub matrix_rate: (u64, u64),
    /// What each tensor's bytes are padded to in the counts above (1: unpadded).
    pub alignment: u64,
}

impl LayerWeights {
    /// The bytes of the weight `name` in layer `layer` (`None`: the input or output layer),
    /// `elements` large, a `matrix` or (otherwise) a norm or bias, which GGUFs keep in f32. A
    /// head tied to the embeddings is their copy.
    pub fn weight_bytes(&self, layer: Option<u64>, name: &str, elements: u64, matrix: bool) -> u64 {
        let key = match layer {
            Some(l) => format!("blk.{l}.{name}"),
            None => name.to_string(),
        };
        let tied = || {
            (name == "output.weight")
                .then(|| self.tensors.get("token_embd.weight"))
                .flatten()
        };
        match self.tensors.get(&key).or_else(tied) {
            Some(&b) => b,
            None if matrix => {
                let (bytes, per) = self.matrix_rate;
                u64::try_from(u128::from(elements) * u128::from(bytes) / u128::from(per.max(1)))
                    .unwrap_or(u64::MAX)
            }
            None => elements.saturating_mul(4),
        }
    }
}

/// One layer's feed-forward weight bytes (routed, shared and dense alike) by name:
/// `ffn_gate*` (the router `ffn_gate_inp`, fused `ffn_gate_up*` included), `ffn_up*` and
/// `ffn_down*`, of which `experts` (`ffn_*_exps`) are a part.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FfnBytes {
    /// `ffn_gate*`.
    pub gate: u64,
    /// `ffn_up*`.
    pub up: u64,
    /// `ffn_down*`.
    pub down: u64,
    /// The routed experts' part of the three.
    pub experts: u64,
}

/// Which of a layer's feed-forward weights a tensor override (`-ot PATTERN=BUFFER`) moves off
/// the layer's device: the four patterns `--n-cpu-moe` and llama.cpp's fit
/// (`common/fit.cpp`) write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FfnMove {
    /// Nothing: the layer is whole on its device.
    #[default]
    Nothing,
    /// `ffn_(up|down|gate_up|gate)_(ch|)exps`: the routed experts (`--n-cpu-moe`).
    Experts,
    /// `ffn_(gate|up|gate_up|down).*`: every feed-forward weight, attention stays.
    AllFfn,
    /// `ffn_(gate|gate_up|down).*`: all but the up projections.
    GateDown,
    /// `ffn_down.*`: the down projections.
    Down,
}

/// The class of a feed-forward weight, by its name's prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FfnClass {
    /// `ffn_gate*` (the router and fused gate/up included).
    Gate,
    /// `ffn_up*`.
    Up,
    /// `ffn_down*`.
    Down,
}

impl FfnMove {
    /// Whether this override moves a weight of `class` (`experts`: a routed expert's).
    pub fn moves(self, class: FfnClass, experts: bool) -> bool {
        match self {
            FfnMove::Nothing => false,
            FfnMove::Experts => experts,
            FfnMove::AllFfn => true,
            FfnMove::GateDown => class != FfnClass::Up,
            FfnMove::Down => class == FfnClass::Down,
        }
    }

    /// The bytes of `ffn` this override moves.
    pub fn bytes(self, ffn: &FfnBytes) -> u64 {
        match self {
            FfnMove::Nothing => 0,
            FfnMove::Experts => ffn.experts,
            FfnMove::AllFfn => ffn.gate + ffn.up + ffn.down,
            FfnMove::GateDown => ffn.gate + ffn.down,
            FfnMove::Down => ffn.down,
        }
    }

    /// The override's pattern for layer `il`, as llama.cpp writes it.
    pub fn pattern(self, il: u64) -> Option<String> {
        let tail = match self {
            FfnMove::Nothing => return None,
            FfnMove::Experts => r"ffn_(up|down|gate_up|gate)_(ch|)exps",
            FfnMove::AllFfn => r"ffn_(gate|up|gate_up|down).*",
            FfnMove::GateDown => r"ffn_(gate|gate_up|down).*",
            FfnMove::Down => r"ffn_down.*",
        };
        Some(format!(r"blk\.{il}\.{tail}"))
    }
}

/// Where one layer's moved feed-forward weights go.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LayerMove {
    /// What moves.
    pub what: FfnMove,
    /// To device `Some(d)`, or to the CPU.
    pub to: Option<usize>,
}

impl LayerMove {
    /// `--n-cpu-moe n`: the first `n` layers' routed experts on the CPU.
    pub fn cpu_moe(n: u64) -> Vec<LayerMove> {
        (0..n)
            .map(|_| LayerMove {
                what: FfnMove::Experts,
                to: None,
            })
            .collect()
    }

    /// Layer `il`'s move in `moves` (nothing past its end).
    pub fn of(moves: &[LayerMove], il: u64) -> LayerMove {
        usize::try_from(il)
            .ok()
            .and_then(|i| moves.get(i))
            .copied()
            .unwrap_or_default()
    }
}

impl LayerWeights {
    /// Counted from `arch` at `precision` (a catalog model or a config.json): each layer's
    /// parameters, the token embeddings, and the output norm and head.
    pub fn from_arch(arch: &ModelArch, precision: Precision) -> Self {
        let bytes = |p: u64| u64::try_from(precision.bytes_for(u128::from(p))).unwrap_or(u64::MAX);
        let vocab = arch.vocab_size.saturating_mul(arch.hidden_size);
        let count = arch.params();
        let norm = arch.norm_params();
        let in_layers = count
            .total
            .saturating_sub(count.embedding)
            .saturating_sub(norm);
        let n = arch.num_layers.max(1);
        LayerWeights {
            input: bytes(vocab),
            output: bytes(norm)
                + if arch.tie_word_embeddings {
                    0
                } else {
                    bytes(vocab)
                },
            tied_head: if arch.tie_word_embeddings {
                bytes(vocab)
            } else {
                0
            },
            layers: (0..arch.num_layers).map(|_| bytes(in_layers / n)).collect(),
            experts: (0..arch.num_layers)
                .map(|l| {
                    let m = arch.moe.as_ref().filter(|_| arch.is_moe_layer(l));
                    m.map_or(0, |m| {
                        let per = 3u64
                            .saturating_mul(arch.hidden_size)
                            .saturating_mul(m.expert_intermediate);
                        bytes(per.saturating_mul(m.experts))
                    })
                })
                .collect(),
            ffn: (0..arch.num_layers)
                .map(|l| Self::ffn_from_arch(arch, l, &bytes))
                .collect(),
            alignment: 1,
            tensors: BTreeMap::new(),
            matrix_rate: (bytes(1 << 20), 1 << 20),
        }
    }

    /// Layer `l`'s feed-forward bytes counted from `arch`: the router and each gated
    /// projection of the routed experts, the shared ones and a dense MLP.
    fn ffn_from_arch(arch: &ModelArch, l: u64, bytes: &dyn Fn(u64) -> u64) -> FfnBytes {
        let h = arch.hidden_size;
        match arch.moe.as_ref().filter(|_| arch.is_moe_layer(l)) {
            Some(m) => {
                let routed = bytes(
                    h.saturating_mul(m.expert_intermediate)
                        .saturating_mul(m.experts),
                );
                let shared = bytes(h.saturating_mul(m.shared_intermediate));
                FfnBytes {
                    gate: routed + shared + bytes(h.saturating_mul(m.experts)),
                    up: routed + shared,
                    down: routed + shared,
                    experts: 3 * routed,
                }
            }
            None => {
                let dense = bytes(h.saturating_mul(arch.intermediate_size));
                FfnBytes {
                    gate: dense,
                    up: dense,
                    down: dense,
                    experts: 0,
                }
            }
        }
    }

    /// The weights of `file` by layer, each tensor padded to the buffer's `alignment` (32 for
    /// the CPU and RPC devices).
    pub fn of(file: &GgufFile, layers: u64, alignment: u64) -> Self {
        let pad = |b: u64| b.div_ceil(alignment.max(1)) * alignment.max(1);
        let mut w = LayerWeights {
            input: 0,
            output: 0,
            tied_head: 0,
            layers: vec![0; usize::try_from(layers).unwrap_or(0)],
            experts: vec![0; usize::try_from(layers).unwrap_or(0)],
            ffn: vec![FfnBytes::default(); usize::try_from(layers).unwrap_or(0)],
            tensors: BTreeMap::new(),
            matrix_rate: (0, 1),
            alignment: alignment.max(1),
        };
        let (mut rate_bytes, mut rate_elements) = (0u64, 0u64);
        let mut has_head = false;
        let mut token_embd = 0;
        for t in &file.tensors {
            w.tensors.insert(t.name.clone(), t.bytes);
            if t.dims.len() >= 2 && layer_of(&t.name).is_some() {
                rate_bytes = rate_bytes.saturating_add(t.bytes);
                rate_elements = rate_elements.saturating_add(t.elements);
            }
            let bytes = pad(t.bytes);
            if let Some(il) = layer_of(&t.name) {
                match w.layers.get_mut(il) {
                    Some(l) => *l += bytes,
                    None => w.input += bytes,
                }
                let experts = is_experts(&t.name);
                if experts {
                    if let Some(e) = w.experts.get_mut(il) {
                        *e += bytes;
                    }
                }
                if let (Some(f), Some(class)) = (w.ffn.get_mut(il), ffn_class(&t.name)) {
                    match class {
                        FfnClass::Gate => f.gate += bytes,
                        FfnClass::Up => f.up += bytes,
                        FfnClass::Down => f.down += bytes,
                    }
                    if experts {
                        f.experts += bytes;
                    }
                }
            } else if t.name.starts_with("token_embd_norm.") {
                // llama.cpp creates the embeddings' norm as the first layer's tensor.
                match w.layers.first_mut() {
                    Some(l) => *l += bytes,
                    None => w.input += bytes,
                }
            } else if t.name.starts_with("output.")
                || t.name.starts_with("output_norm.")
                || t.name.starts_with("cls.")
            {
                // An encoder's classification head (`cls`, `cls.output`) is the output layer's.
                has_head |= t.name == "output.weight";
                w.output += bytes;
            } else {
                if t.name == "token_embd.weight" {
                    token_embd = bytes;
                }
                w.input += bytes;
            }
        }
        if !has_head {
            w.tied_head = token_embd;
        }
        w.matrix_rate = (rate_bytes, rate_elements.max(1));
        w
    }
}

impl LayerWeights {
    /// How many more bytes layer `layer`'s tensors (`None`: the output layer's) take in a buffer
    /// that aligns each tensor to `alignment` than counted here (negative where it is finer):
    /// ggml-cuda aligns to 128 bytes where the CPU's buffers align to 32, which small tensors
    /// (norms, SSM parameters) feel.
    pub fn realigned(&self, layer: Option<usize>, alignment: u64) -> i64 {
        let pad = |b: u64, a: u64| b.div_ceil(a.max(1)).saturating_mul(a.max(1));
        let prefix = layer.map(|l| format!("blk.{l}."));
        let mine = |name: &str| match &prefix {
            Some(p) => name.starts_with(p.as_str()),
            None => ["output.", "output_norm.", "cls."]
                .iter()
                .any(|p| name.starts_with(p)),
        };
        self.tensors
            .iter()
            .filter(|(name, _)| mine(name))
            .map(|(_, &b)| {
                i64::try_from(pad(b, alignment)).unwrap_or(i64::MAX)
                    - i64::try_from(pad(b, self.alignment)).unwrap_or(i64::MAX)
            })
            .sum()
    }
}

/// A routed expert's tensor, as llama.cpp's `--n-cpu-moe` pattern matches it
/// (`blk.N.ffn_(up|down|gate_up|gate)_(ch|)exps`, biases included).
fn is_experts(name: &str) -> bool {
    let Some(rest) = name
        .strip_prefix("blk.")
        .and_then(|r| r.split_once('.'))
        .map(|(_, r)| r)
    else {
        return false;
    };
    ["ffn_up_", "ffn_down_", "ffn_gate_up_", "ffn_gate_"]
        .iter()
        .filter_map(|p| rest.strip_prefix(p))
        .any(|r| r.starts_with("exps") || r.starts_with("chexps"))
}

/// A feed-forward weight's class by its name after `blk.N.`, as the fit's patterns read it.
fn ffn_class(name: &str) -> Option<FfnClass> {
    let rest = name.strip_prefix("blk.")?.split_once('.')?.1;
    if rest.starts_with("ffn_gate") {
        Some(FfnClass::Gate)
    } else if rest.starts_with("ffn_up") {
        Some(FfnClass::Up)
    } else if rest.starts_with("ffn_down") {
        Some(FfnClass::Down)
    } else {
        None
    }
}

/// The layer index of `blk.N.…`.
fn layer_of(name: &str) -> Option<usize> {
    name.strip_prefix("blk.")?.split('.').next()?.parse().ok()
}
