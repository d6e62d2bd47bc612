//! A model's weight bytes by the layer llama.cpp puts them in: exact from a GGUF's tensors, or
//! counted from the shape at one precision for a source without tensors.

use super::arch::ModelArch;
use super::dtype::Precision;
use super::gguf::quantize_mix::{self, QuantMix};
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
    /// The bytes ggml-cuda adds to a quantized tensor whose rows are not a multiple of
    /// `CUDA_ROW_PADDING` elements, by GGUF name (only such tensors).
    pub row_padding: BTreeMap<String, u64>,
}

/// ggml-cuda pads a quantized tensor's last row to a multiple of this many elements
/// (`MATRIX_ROW_PADDING`), so its kernels read no further than the buffer: each such tensor
/// takes the bytes of the missing elements more (`get_alloc_size`).
pub const CUDA_ROW_PADDING: u64 = 512;

/// The bytes ggml-cuda adds to a tensor of `ty` whose rows are `row` elements long.
pub fn cuda_row_padding(row: u64, block_elems: u64, block_bytes: u64) -> u64 {
    let short = row % CUDA_ROW_PADDING;
    if block_elems <= 1 || short == 0 {
        return 0;
    }
    // Rows hold whole blocks and 512 is a multiple of every block, so the gap is too.
    ((CUDA_ROW_PADDING - short) / block_elems.max(1)).saturating_mul(block_bytes)
}

impl LayerWeights {
    /// The bytes of the weight `name` in layer `layer` (`None`: the input or output layer),
    /// `elements` large, a `matrix` or (otherwise) a norm or bias, which GGUFs keep in f32. A
    /// head tied to the embeddings is their copy.
    pub fn weight_bytes(&self, layer: Option<u64>, name: &str, elements: u64, matrix: bool) -> u64 {
        match self.stored_name(layer, name) {
            Some(key) => self.tensors.get(&key).copied().unwrap_or(0),
            None if matrix => {
                let (bytes, per) = self.matrix_rate;
                u64::try_from(u128::from(elements) * u128::from(bytes) / u128::from(per.max(1)))
                    .unwrap_or(u64::MAX)
            }
            None => elements.saturating_mul(4),
        }
    }

    /// The bytes ggml-cuda adds to the weight [`Self::weight_bytes`] sizes
    /// (`cuda_row_padding`).
    pub fn weight_row_padding(&self, layer: Option<u64>, name: &str) -> u64 {
        self.stored_name(layer, name)
            .map_or(0, |key| self.row_padding_of(&key))
    }

    /// The GGUF name the weight `name` of `layer` is stored under: the embeddings' for a tied
    /// head, `None` where the count holds no such tensor.
    fn stored_name(&self, layer: Option<u64>, name: &str) -> Option<String> {
        let key = match layer {
            Some(l) => format!("blk.{l}.{name}"),
            None => name.to_string(),
        };
        if self.tensors.contains_key(&key) {
            return Some(key);
        }
        let tied = "token_embd.weight";
        (name == "output.weight" && self.tensors.contains_key(tied)).then(|| tied.to_string())
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
    /// Counted from `arch` at `precision` (a catalog model or a config.json). A llama-quantize
    /// file type (`q4_k_m`, `q6_k`, `iq4_xs`, …) is the file it would write, tensor by tensor
    /// (`gguf::quantize_mix`), placed as a real GGUF's; otherwise (or where that file's tensors are
    /// not synthesized) each layer's parameters, the token embeddings, and the output norm and
    /// head at the precision's average rate.
    pub fn from_arch(arch: &ModelArch, precision: Precision) -> Self {
        let mixed =
            QuantMix::of(&precision).and_then(|mix| quantize_mix::quantized_file(arch, mix));
        match mixed {
            Some(file) => Self::of(&file, arch.num_layers, 32),
            None => Self::at_average(arch, precision),
        }
    }

    /// Counted from `arch` at `precision`'s average rate: each layer's parameters, the token
    /// embeddings, and the output norm and head.
    fn at_average(arch: &ModelArch, precision: Precision) -> Self {
        let bytes = |p: u64| u64::try_from(precision.bytes_for(u128::from(p))).unwrap_or(u64::MAX);
        let vocab = arch.vocab_size.saturating_mul(arch.hidden_size);
        // Gemma 4's per-layer embeddings' table is the input layer's, beside the token
        // embeddings.
        let per_layer_table = u64::try_from(arch.per_layer_table_params()).unwrap_or(u64::MAX);
        let count = arch.params();
        let norm = arch.norm_params();
        let in_layers = count
            .total
            .saturating_sub(count.embedding)
            .saturating_sub(per_layer_table)
            .saturating_sub(norm);
        LayerWeights {
            input: bytes(vocab) + bytes(per_layer_table),
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
            layers: Self::layer_params(arch, in_layers)
                .into_iter()
                .map(bytes)
                .collect(),
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
            row_padding: BTreeMap::new(),
            matrix_rate: (bytes(1 << 20), 1 << 20),
        }
    }

    /// Each layer's parameters, `in_layers` in all. Where the layers' feed-forward blocks
    /// differ (a dense lead before MoE layers, a double-wide MLP), each keeps its own block
    /// beside an equal share of the rest, so that no layer is smaller than the experts or MLP
    /// an override moves off it; otherwise every layer takes an equal share.
    fn layer_params(arch: &ModelArch, in_layers: u64) -> Vec<u64> {
        let n = arch.num_layers.max(1);
        let ffn: Vec<u64> = (0..arch.num_layers)
            .map(|l| {
                let f = Self::ffn_from_arch(arch, l, &|p| p);
                f.gate.saturating_add(f.up).saturating_add(f.down)
            })
            .collect();
        if ffn.windows(2).all(|w| w[0] == w[1]) {
            return vec![in_layers / n; ffn.len()];
        }
        let rest = in_layers.saturating_sub(ffn.iter().fold(0u64, |a, &f| a.saturating_add(f)));
        ffn.iter().map(|&f| (rest / n).saturating_add(f)).collect()
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
                let dense = bytes(h.saturating_mul(arch.layer_intermediate(l)));
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
            row_padding: BTreeMap::new(),
        };
        let (mut rate_bytes, mut rate_elements) = (0u64, 0u64);
        let mut has_head = false;
        let mut token_embd = 0;
        for t in &file.tensors {
            w.tensors.insert(t.name.clone(), t.bytes);
            let row = t.dims.first().copied().unwrap_or(0);
            let extra = cuda_row_padding(row, t.ggml_type.block_elems, t.ggml_type.block_bytes);
            if extra > 0 {
                w.row_padding.insert(t.name.clone(), extra);
            }
            if t.dims.len() >= 2 && layer_of(&t.name).is_some() {
                rate_bytes = rate_bytes.saturating_add(t.bytes);
                rate_elements = rate_elements.saturating_add(t.elements);
            }
            let bytes = pad(t.bytes);
            has_head |= t.name == "output.weight";
            if t.name == "token_embd.weight" {
                token_embd = bytes;
            }
            w.add_placed(&t.name, bytes);
        }
        if !has_head {
            w.tied_head = token_embd;
        }
        w.matrix_rate = (rate_bytes, rate_elements.max(1));
        w
    }
}

impl LayerWeights {
    /// Counts `bytes` of the tensor `name` where llama.cpp loads it: a repeating layer's (its
    /// feed-forward and expert parts noted), the input's or the output's.
    fn add_placed(&mut self, name: &str, bytes: u64) {
        if let Some(il) = layer_of(name) {
            match self.layers.get_mut(il) {
                Some(l) => *l += bytes,
                None => self.input += bytes,
            }
            let experts = is_experts(name);
            if experts {
                if let Some(e) = self.experts.get_mut(il) {
                    *e += bytes;
                }
            }
            if let (Some(f), Some(class)) = (self.ffn.get_mut(il), ffn_class(name)) {
                match class {
                    FfnClass::Gate => f.gate += bytes,
                    FfnClass::Up => f.up += bytes,
                    FfnClass::Down => f.down += bytes,
                }
                if experts {
                    f.experts += bytes;
                }
            }
        } else if name.starts_with("token_embd_norm.")
            || name.starts_with("nextn.pre_projection.")
            || name.starts_with("rope_freqs.")
            || name.starts_with("per_layer_model_proj.")
            || name.starts_with("per_layer_proj_norm.")
        {
            // llama.cpp creates the embeddings' norm, Gemma 4's projection to the per-layer
            // embeddings and its norm, and an assistant's projection in, as the first layer's
            // tensors; the RoPE frequencies as the first layer's that uses them (Llama's first,
            // Gemma 4's first full one, which is placed here with the first: a KiB on another
            // device where the two are split).
            match self.layers.first_mut() {
                Some(l) => *l += bytes,
                None => self.input += bytes,
            }
        } else if name.starts_with("output.")
            || name.starts_with("output_norm.")
            || name.starts_with("nextn.post_projection.")
            || name.starts_with("cls.")
        {
            // An encoder's classification head (`cls`, `cls.output`) is the output layer's.
            self.output += bytes;
        } else {
            self.input += bytes;
        }
    }

    /// These weights with a LoRA adapter's factors beside the matrices they adapt: llama.cpp
    /// loads each pair into the buffer type of its base matrix (`llama_adapter_lora_init`), so
    /// the pair goes where the matrix goes, a moved feed-forward matrix's included, and takes
    /// each device's alignment as a tensor of its own.
    pub fn with_adapter(self, adapter: &super::LoraAdapter) -> LayerWeights {
        let mut w = self;
        let align = w.alignment.max(1);
        let pad = |b: u64| b.div_ceil(align) * align;
        for p in &adapter.pairs {
            for (suffix, bytes) in [("lora_a", p.a_bytes), ("lora_b", p.b_bytes)] {
                let name = format!("{}.{suffix}", p.base);
                let padded = pad(bytes);
                w.add_placed(&name, padded);
                w.tensors.insert(name, bytes);
            }
        }
        w
    }
}

impl LayerWeights {
    /// How many more bytes layer `layer`'s tensors (`None`: the output layer's) take in a buffer
    /// that aligns each tensor to `alignment` than counted here (negative where it is finer):
    /// ggml-cuda aligns to 128 bytes where the CPU's buffers align to 32, which small tensors
    /// (norms, SSM parameters) feel, and (`pad_rows`) adds each quantized tensor's
    /// `cuda_row_padding` before aligning it.
    pub fn realigned(&self, layer: Option<usize>, alignment: u64, pad_rows: bool) -> i64 {
        let prefix = layer.map(|l| format!("blk.{l}."));
        let mine = |name: &str| match &prefix {
            Some(p) => name.starts_with(p.as_str()),
            None => ["output.", "output_norm.", "nextn.post_projection.", "cls."]
                .iter()
                .any(|p| name.starts_with(p)),
        };
        self.realigned_where(&mine, alignment, pad_rows)
    }

    /// [`Self::realigned`] for a head tied to the embeddings, loaded again on a device.
    pub fn realigned_tied_head(&self, alignment: u64, pad_rows: bool) -> i64 {
        if self.tied_head == 0 {
            return 0;
        }
        self.realigned_where(&|name| name == "token_embd.weight", alignment, pad_rows)
    }

    fn realigned_where(&self, mine: &dyn Fn(&str) -> bool, alignment: u64, pad_rows: bool) -> i64 {
        let pad = |b: u64, a: u64| b.div_ceil(a.max(1)).saturating_mul(a.max(1));
        self.tensors
            .iter()
            .filter(|(name, _)| mine(name))
            .map(|(name, &b)| {
                let extra = if pad_rows {
                    self.row_padding_of(name)
                } else {
                    0
                };
                i64::try_from(pad(b.saturating_add(extra), alignment)).unwrap_or(i64::MAX)
                    - i64::try_from(pad(b, self.alignment)).unwrap_or(i64::MAX)
            })
            .sum()
    }

    /// The bytes ggml-cuda adds to the tensor `name` (`cuda_row_padding`; 0 for one whose
    /// rows need none or that the count did not read from a file).
    pub fn row_padding_of(&self, name: &str) -> u64 {
        self.row_padding.get(name).copied().unwrap_or(0)
    }

    /// Whether any tensor counted here takes ggml-cuda's row padding.
    pub fn pads_rows(&self) -> bool {
        !self.row_padding.is_empty()
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

#[cfg(test)]
mod tests {
    use super::cuda_row_padding;
    use crate::model::dtype::ggml_type;

    /// `ggml_row_size(type, 512 - ne0 % 512)` for the rows of gpt-oss (2,880 values, MXFP4),
    /// Qwen3-30B-A3B's experts (768, Q4_K) and Gemma 2 (2,304, Q8_0); none for whole rows or
    /// an unquantized type.
    #[test]
    fn cuda_pads_the_missing_values_of_a_quantized_row() {
        let pad = |row, id| {
            let t = ggml_type(id).unwrap();
            cuda_row_padding(row, t.block_elems, t.block_bytes)
        };
        assert_eq!(pad(2880, 39), 192 / 32 * 17);
        assert_eq!(pad(768, 12), 144);
        assert_eq!(pad(2304, 8), 272);
        assert_eq!(pad(4096, 8), 0);
        assert_eq!(pad(2880, 1), 0);
    }
}
