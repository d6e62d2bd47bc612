//! What a model's files say its weights are, apart from any engine.

use super::dtype::Precision;

/// Exact weights from a file, when the source has them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileWeights {
    /// Parameters (elements over all tensors).
    pub parameters: u64,
    /// Bytes over all tensors.
    pub bytes: u64,
}

/// The precision weights were counted in, and who chose it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightsDtype {
    /// `--dtype` named it; weights are parameters × its size.
    Chosen(Precision),
    /// The file's own tensor types, byte for byte (GGUF, safetensors).
    File,
    /// Nothing named one and the source has no tensor types: [`DEFAULT_WEIGHT_PRECISION`].
    Default(Precision),
}

impl WeightsDtype {
    /// The name reports use: the precision's name, or `file`.
    pub fn name(&self) -> &'static str {
        match self {
            WeightsDtype::Chosen(p) | WeightsDtype::Default(p) => p.name,
            WeightsDtype::File => "file",
        }
    }
}

/// Weights are counted in bf16 when neither `--dtype` nor a file says otherwise: the dtype
/// checkpoints of current models are published in.
pub const DEFAULT_WEIGHT_PRECISION: Precision = Precision {
    name: "bf16",
    block_bytes: 2,
    block_elems: 1,
};
