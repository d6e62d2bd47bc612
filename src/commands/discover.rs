//! `gpumem discover`.

use anyhow::Result;

use crate::cli::DiscoverArgs;
use crate::cli::GlobalArgs;
use crate::error::CliError;
use crate::exit::Exit;
use crate::output::Output;

/// Runs `gpumem discover`.
pub fn run(_args: &DiscoverArgs, _global: &GlobalArgs, _out: &Output) -> Result<Exit> {
    Err(CliError::NotImplemented {
        command: "discover",
        issue: 4,
    }
    .into())
}
