//! What a model's files say its weights are, apart from any engine.

/// Exact weights from a file, when the source has them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileWeights {
    /// Parameters (elements over all tensors).
    pub parameters: u64,
    /// Bytes over all tensors.
    pub bytes: u64,
}
