//! `gpumem estimate`.

use anyhow::Result;

use crate::cli::EstimateArgs;

use crate::error::CliError;
use crate::exit::Exit;
use crate::output::Output;

/// Runs `gpumem estimate`.
pub fn run(_args: &EstimateArgs, _out: &Output) -> Result<Exit> {
    Err(CliError::NotImplemented {
        command: "estimate",
        issue: 5,
    }
    .into())
}
