//! transformers' assisted generation (`generate(assistant_model=...)`, greedy, one sequence:
//! `_assisted_decoding` refuses more) as `MemTracker` counts it, on top of [`super::generate`].
//!
//! Each round the assistant runs its own `generate` (`AssistedCandidateGenerator`): its own
//! `DynamicCache`, `num_assistant_tokens` candidates (transformers' default 20, a constant
//! schedule), and `output_scores=True`, so one f32 row of logits a candidate, stacked. The
//! target then verifies them in one forward pass with `logits_to_keep = candidates + 1`; in the
//! first round that pass is the prefill, over the prompt and the candidates at once.
//!
//! - **First round**, at the target's last layer's MLP: the prefill's walk over prompt +
//!   candidates positions, beside the prompt's own ids (int64; the candidates' sequence is a
//!   new tensor), the stacked candidate logits (f32, candidates × the assistant's vocabulary)
//!   and the assistant's cache, which holds all but the last candidate.
//!
//! - **A later round** ends at `input_ids`' concatenation after the verification: the target's
//!   logits for the candidates and its own next token (bf16), their f32 copy and its clone,
//!   the candidates' f32 logits, both caches at their length, and the ids (the old sequence,
//!   the candidates' one, the target's choices, the new sequence). The last round binds, or
//!   the one before where the last has fewer candidates (capped by the tokens left); every
//!   candidate being accepted, a round adds candidates + 1 tokens.
//!
//! Checked against `MemTracker` (`tests/fixtures/pytorch/generate-assisted-*.json`,
//! `tools/pytorch-reference/measure_generate_assisted.py`), every candidate accepted: how many
//! are is data, which fake tensors cannot read.

use super::generate::{
    adapter_bytes, check_lora, kv_token, prefill_live, walked, AssistantShare, GeneratePeak,
    GeneratePhase, GenerateRun, ACT,
};
use super::training::TrainingError;
use crate::model::ModelArch;

/// The assistant model and how many tokens it proposes a round.
#[derive(Debug, Clone, Copy)]
pub struct Assistant<'a> {
    /// The draft model.
    pub arch: &'a ModelArch,
    /// `num_assistant_tokens`.
    pub tokens: u64,
}

/// The peak of `run` on `arch` assisted by `assistant`, in bf16.
pub fn assisted_peak(
    arch: &ModelArch,
    run: &GenerateRun,
    assistant: Assistant<'_>,
) -> Result<GeneratePeak, TrainingError> {
    if run.batch != 1 {
        return Err(TrainingError::Unsupported {
            what: "assisted generation of more than one sequence (transformers refuses it)",
        });
    }
    let (s, experts) = walked(arch)?;
    let (a, _) = walked(assistant.arch)?;
    if s.window.is_some() || a.window.is_some() {
        return Err(TrainingError::Unsupported {
            what: "assisted generation with a sliding window (its cache cropping is not walked)",
        });
    }
    check_lora(&s, run.lora)?;
    let (p, n) = (u128::from(run.prompt), u128::from(run.new_tokens.max(1)));
    let k = u128::from(assistant.tokens);
    // `_calculate_new_tokens`: no more candidates than leave room for the target's own token.
    let k_first = k.min(n - 1);
    let (kv_target, prefill) = prefill_live(&s, experts.as_ref(), run.lora, 1, p + k_first);
    let draft_kv = |cached: u128| a.layers * kv_token(&a) * cached;
    let first = Moment {
        phase: GeneratePhase::Prefill,
        target_kv: kv_target,
        draft_kv: if k_first == 0 {
            0
        } else {
            draft_kv(p + k_first - 1)
        },
        logits: 4 * k_first * a.vocab,
        rest: prefill + 8 * p,
    };
    // Rounds of k + 1 tokens until the last, which starts at `c` with the tokens left.
    let rounds = n.div_ceil(k + 1);
    let round_end = |round: u128| {
        let c = p + (round - 1) * (k + 1);
        let kr = k.min(p + n - c - 1);
        let draft_cached = match (kr, round) {
            (0, 1) => 0,
            // No candidates this round: the assistant's cache stays as the last round left it.
            (0, _) => c - 2,
            _ => c + kr - 1,
        };
        let candidates = if kr == 0 { 0 } else { c + kr };
        Moment {
            phase: if round == 1 {
                GeneratePhase::Prefill
            } else {
                GeneratePhase::Decode
            },
            target_kv: s.layers * kv_token(&s) * (c + kr),
            draft_kv: draft_kv(draft_cached),
            logits: 4 * kr * a.vocab,
            rest: (kr + 1) * s.vocab * (ACT + 4 + 4)
                + 8 * (c + candidates + (kr + 1) + (c + kr + 1)),
        }
    };
    let peak = [
        Some(first),
        Some(round_end(rounds)),
        (rounds > 1).then(|| round_end(rounds - 1)),
    ]
    .into_iter()
    .flatten()
    .max_by_key(Moment::total)
    .unwrap_or(first);
    let (kv, draft_kv, logits) = (peak.target_kv + peak.draft_kv, peak.draft_kv, peak.logits);
    let activations = peak.rest + peak.logits;
    let adapters = adapter_bytes(&s, run.lora);
    let draft_params = a.params * ACT;
    let mut peak = GeneratePeak::of(
        peak.phase,
        (s.params + a.params) * ACT + adapters,
        4 * (s.head_dim + a.head_dim),
        kv,
        activations,
    )?;
    let fit = |v: u128| u64::try_from(v).map_err(|_| TrainingError::Overflow);
    peak.adapter_parameters = run.lora.map(|_| fit(adapters)).transpose()?;
    peak.assistant = Some(AssistantShare {
        parameters: fit(draft_params)?,
        kv_cache: fit(draft_kv)?,
        candidate_logits: fit(logits)?,
        candidates: fit(k_first)?,
    });
    Ok(peak)
}

/// What lives at one moment besides the weights: both caches, the candidates' logits, the rest.
#[derive(Debug, Clone, Copy)]
struct Moment {
    phase: GeneratePhase,
    target_kv: u128,
    draft_kv: u128,
    logits: u128,
    rest: u128,
}

impl Moment {
    fn total(&self) -> u128 {
        self.target_kv + self.draft_kv + self.logits + self.rest
    }
}
