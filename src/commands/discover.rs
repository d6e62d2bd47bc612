//! `gpumem discover`.

use anyhow::Result;

use super::options::discover_options;
use crate::backend::{discover_with, host_info, recommend, same_gpus};
use crate::cli::{DiscoverArgs, DiscoverFormat, GlobalArgs};
use crate::exit::Exit;
use crate::output::discover::{prometheus, DiscoverReport};
use crate::output::Output;

/// Runs `gpumem discover`: always exits 0, whatever is missing, because "no GPU here" is an
/// answer, not a failure.
pub fn run(args: &DiscoverArgs, global: &GlobalArgs, out: &Output) -> Result<Exit> {
    let backends = discover_with(&discover_options(args));
    let report = DiscoverReport {
        host: host_info(),
        recommended: recommend(&backends),
        same_gpu: same_gpus(&backends),
        backends,
    };
    match (args.format, global.json) {
        (DiscoverFormat::Prometheus, false) => out.write_stdout(&prometheus(&report))?,
        (DiscoverFormat::Json, _) | (_, true) => out.emit_json(&report)?,
        (DiscoverFormat::Table, false) => out.emit(&report)?,
    }
    Ok(Exit::Success)
}
