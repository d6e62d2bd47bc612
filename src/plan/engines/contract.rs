//! The one contract every engine plans through: a model under its settings over the candidate
//! devices, answered by the engine's own rule with a plan that carries its account, its
//! placement and the layout its launch command takes.

use super::{EstimateOverflow, Settings};
use crate::model::ModelSource;
use crate::plan::{Candidate, Selection};

/// What an engine's planner answers.
#[derive(Debug, Clone)]
pub enum Planned {
    /// The engine's own plan (or, where nothing serves, its closest layout and what it lacks).
    Own(Box<Selection>),
    /// The engine's accounting does not cover this model on these devices (an architecture
    /// vLLM's model has no rule for, a graph llama.cpp's replay does not build): the generic
    /// rule plans it instead.
    Unmodelled,
}

/// An engine that plans a model over devices by its own rule.
pub trait EnginePlanner {
    /// `source` under `settings` over `candidates`; a part past 2^64 bytes is an error.
    fn plan(
        &self,
        source: &ModelSource,
        settings: &Settings,
        candidates: &[Candidate],
    ) -> Result<Planned, EstimateOverflow>;
}
