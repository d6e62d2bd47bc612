//! A model's weight bytes by the layer llama.cpp puts them in: exact from a GGUF's tensors, or
//! counted from the shape at one precision for a source without tensors.

use super::arch::ModelArch;
use super::dtype::Precision;
use super::gguf::GgufFile;

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
        };
        let mut has_head = false;
        let mut token_embd = 0;
        for t in &file.tensors {
            let bytes = pad(t.bytes);
            if let Some(il) = layer_of(&t.name) {
                match w.layers.get_mut(il) {
                    Some(l) => *l += bytes,
                    None => w.input += bytes,
                }
                if is_experts(&t.name) {
                    if let Some(e) = w.experts.get_mut(il) {
                        *e += bytes;
                    }
                }
            } else if t.name.starts_with("output.") || t.name.starts_with("output_norm.") {
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
        w
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

/// The layer index of `blk.N.…`.
fn layer_of(name: &str) -> Option<usize> {
    name.strip_prefix("blk.")?.split('.').next()?.parse().ok()
}
