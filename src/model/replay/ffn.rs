//! The routed feed-forward block's tensor sizes.

/// Tensor sizes of a routed feed-forward block.
pub(super) struct Routed {
    pub(super) k: u64,
    pub(super) router: u64,
    pub(super) weights: u64,
    pub(super) sums: u64,
    pub(super) expert_ffn: u64,
    /// The first projection's output: `expert_ffn`, or twice it where gate and up are fused.
    pub(super) gate_up: u64,
    pub(super) expert_out: u64,
    /// A shared expert's width (Llama 4, GLM-4.5, Qwen3-Next), 0 without one.
    pub(super) shared: u64,
    /// The shared expert's output is scaled by a sigmoid gate of its own (Qwen3-Next).
    pub(super) shared_gate: bool,
    /// The weights are scaled by an op of their own.
    pub(super) scaled: bool,
    /// Routing within expert groups: the groups and how many a token uses.
    pub(super) groups: Option<(u64, u64)>,
    /// Group-limited routing's tensors: two scores per group, one per group, and the kept
    /// groups' experts.
    pub(super) group_pairs: u64,
    pub(super) group_scores: u64,
    pub(super) kept_scores: u64,
}
