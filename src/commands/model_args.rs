//! Turning the shared model flags (`estimate`, `select`) into a loaded model and settings.

use anyhow::Result;

use crate::cli::{ModelSourceArgs, WorkloadSettings};
use crate::error::CliError;
use crate::model::{
    self, kv_precision, weight_precision, ModelSource, Settings, SourceSpec, KV_PRECISIONS,
    WEIGHT_PRECISIONS,
};

/// The source the flags name, if any.
pub fn source_spec(args: &ModelSourceArgs) -> Option<SourceSpec> {
    if let Some(name) = &args.model {
        Some(SourceSpec::Catalog(name.clone()))
    } else if let Some(p) = &args.config {
        Some(SourceSpec::Config(p.clone()))
    } else if let Some(p) = &args.gguf {
        Some(SourceSpec::Gguf(p.clone()))
    } else {
        args.safetensors
            .as_ref()
            .map(|p| SourceSpec::Safetensors(p.clone()))
    }
}

/// Loads the named model (errors name the file or model).
pub fn load_model(spec: &SourceSpec) -> Result<ModelSource> {
    Ok(model::load(spec)?)
}

fn names(table: &[model::Precision]) -> String {
    table.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
}

/// Parses the precision and workload flags; an unknown dtype is a usage error.
pub fn settings(args: &WorkloadSettings) -> Result<Settings> {
    let dtype = match &args.dtype {
        None => None,
        Some(name) => Some(weight_precision(name).ok_or_else(|| {
            CliError::Usage(format!(
                "unknown --dtype '{name}'; expected one of {}",
                names(WEIGHT_PRECISIONS)
            ))
        })?),
    };
    let kv_dtype = kv_precision(&args.kv_dtype).ok_or_else(|| {
        CliError::Usage(format!(
            "unknown --kv-dtype '{}'; expected one of {}",
            args.kv_dtype,
            names(KV_PRECISIONS)
        ))
    })?;
    Ok(Settings {
        dtype,
        kv_dtype,
        batch: u64::from(args.batch),
        context: u64::from(args.context),
        ubatch: u64::from(args.ubatch),
        flash_attention: args.flash_attention,
        overhead: args.overhead,
        fragmentation_reserve: args.fragmentation_reserve,
        mode: match args.mode {
            crate::cli::Mode::Infer => model::Mode::Infer,
            crate::cli::Mode::Train => model::Mode::Train,
        },
        optimizer: match args.optimizer {
            crate::cli::Optimizer::Adam => model::Optimizer::Adam,
            crate::cli::Optimizer::Adamw => model::Optimizer::Adamw,
            crate::cli::Optimizer::Sgd => model::Optimizer::Sgd,
        },
        checkpointing: args.checkpointing,
    })
}
