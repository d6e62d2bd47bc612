//! SGLang's speculative decoding as it sizes memory (0.5.23): an EAGLE, EAGLE-3 or MTP draft's
//! weights (`crate::plan::engines::speculative`) are loaded before the pool is sized, so they
//! come out of `P × f`; its KV layers share the pool, each token's cell growing by the draft's
//! layers (`pool_configurator.py`: `cell += cell × draft_layers / layers`); and
//! `max_running_requests` defaults to 48 (`arg_groups/speculative_hook.py`).

pub use crate::plan::engines::speculative::{draft, Draft, SpecAlgorithm};

/// `max_running_requests`' default under speculative decoding.
pub const SPEC_MAX_RUNNING_REQUESTS: u64 = 48;
