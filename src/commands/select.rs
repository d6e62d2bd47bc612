//! `gpumem select`.

use anyhow::Result;

use super::model_args::{load_model, settings, source_spec};
use crate::backend::{discover_with, host_info, BackendKind, DeviceSpec, DiscoverOptions};
use crate::cli::{Preference, SelectArgs};
use crate::error::CliError;
use crate::exit::Exit;
use crate::model::estimate::estimate;
use crate::output::select::SelectReport;
use crate::output::Output;
use crate::plan::{
    candidates_from_discovery, plan, read_inventory, Candidate, ModelNeeds, PlanKind, Policy,
    Requirement,
};

/// Re-estimates the total for another context length.
type TotalAtContext = Box<dyn Fn(u64) -> u64>;

/// Runs `gpumem select`.
pub fn run(args: &SelectArgs, out: &Output) -> Result<Exit> {
    let spec = source_spec(&args.source);
    if spec.is_none() && args.bytes.is_none() {
        return Err(CliError::Usage(
            "give --bytes SIZE or a model (--model, --config, --gguf, --safetensors)".into(),
        )
        .into());
    }
    let policy = Policy {
        prefer: match args.prefer {
            Preference::Auto => None,
            Preference::Cuda => Some(BackendKind::Cuda),
            Preference::Rocm => Some(BackendKind::Rocm),
            Preference::Metal => Some(BackendKind::Metal),
            Preference::Opencl => Some(BackendKind::Opencl),
            Preference::Vulkan => Some(BackendKind::Vulkan),
            Preference::Cpu => Some(BackendKind::Cpu),
        },
        memory_fraction: args.memory_fraction,
        min_free: args.min_free,
        driver_reserve: args.driver_reserve,
        context_reserve: args.context_reserve,
        reserve_fraction: args.reserve_fraction,
        reserve_cap: args.reserve_cap,
    };

    // What must fit.
    let mut model_name = None;
    let (requirement, context_fn): (Requirement, Option<TotalAtContext>) = match (&spec, args.bytes)
    {
        (_, Some(bytes)) => (
            Requirement {
                total: bytes,
                model: None,
            },
            None,
        ),
        (Some(spec), None) => {
            let s = settings(&args.settings)?;
            let model = load_model(spec)?;
            for w in &model.warnings {
                out.warn(w);
            }
            let b = estimate(&model.arch, model.file_weights, &s);
            // The fragmentation reserve grows every part in proportion.
            let scale = 1.0 + s.fragmentation_reserve / 100.0;
            let grow = |v: u64| (v as f64 * scale).ceil() as u64;
            let needs = (model.arch.num_layers > 0).then(|| ModelNeeds {
                layers: model.arch.num_layers,
                per_layer: grow(b.per_layer_bytes),
                non_layer: grow(b.non_layer_bytes),
                activations: grow(b.activation_bytes),
                overhead: b.overhead_bytes,
            });
            model_name = Some(model.name.clone());
            let (arch, weights) = (model.arch.clone(), model.file_weights);
            let at = move |context: u64| {
                estimate(
                    &arch,
                    weights,
                    &crate::model::Settings {
                        context: context.max(1),
                        ..s.clone()
                    },
                )
                .total_bytes
            };
            (
                Requirement {
                    total: b.total_bytes,
                    model: needs,
                },
                Some(Box::new(at)),
            )
        }
        (None, None) => unreachable_usage()?,
    };

    // Where it could go.
    let mut candidates: Vec<Candidate> = Vec::new();
    for path in &args.inventory {
        candidates.extend(read_inventory(path)?);
    }
    for (i, d) in args.device.iter().enumerate() {
        match d {
            DeviceSpec::Sim { capacity } => candidates.push(Candidate::sim(i, *capacity)),
            other => {
                return Err(CliError::Usage(format!(
                    "--device takes sim:SIZE here (got {other}); real devices are discovered"
                ))
                .into())
            }
        }
    }
    if args.inventory.is_empty() && args.device.is_empty() {
        let found = discover_with(&DiscoverOptions {
            only: Vec::new(),
            timeout: args.timeout,
        });
        let host = host_info().hostname.unwrap_or_else(|| "localhost".into());
        candidates = candidates_from_discovery(&found, &host);
    }
    let context = args.settings.context as u64;
    let selection = plan(
        &requirement,
        &candidates,
        &policy,
        context_fn.as_ref().map(|f| (f.as_ref(), context)),
    );
    let none = selection.plan.kind == PlanKind::None;
    out.emit(&SelectReport {
        model: model_name,
        selection,
    })?;
    Ok(if none {
        Exit::DoesNotFit
    } else {
        Exit::Success
    })
}

fn unreachable_usage<T>() -> Result<T> {
    Err(CliError::Usage("give --bytes SIZE or a model".into()).into())
}
