//! `gpumem select`.

use anyhow::Result;

use super::options::{
    estimate_settings, load_options, model_source, probe_all, select_engines, select_policy,
};
use crate::backend::{discover_with, host_info, DeviceSpec};
use crate::cli::SelectArgs;
use crate::error::CliError;
use crate::exit::Exit;
use crate::model::estimate::estimate_with_projector;
use crate::output::select::SelectReport;
use crate::output::Output;
use crate::plan::launch::{launch, LaunchSettings, ModelRef};
use crate::plan::{
    candidates_from_discovery, capacity, model_requirement, plan, read_inventories, Candidate,
    Capacity, PlanKind, Requirement,
};

/// Re-estimates what the model needs for another (batch, context); `None` past 2^64 bytes.
type NeedsAt = Box<dyn Fn(u64, u64) -> Option<Requirement>>;

/// Runs `gpumem select` and returns its exit status.
pub fn run(args: &SelectArgs, out: &Output) -> Result<Exit> {
    let spec = model_source(&args.source);
    if spec.is_none() && args.bytes.is_none() {
        return Err(CliError::Usage(
            "give --bytes SIZE or a model (--model, --config, --gguf, --safetensors)".into(),
        )
        .into());
    }
    let policy = select_policy(args);
    let (context, batch) = (
        u64::from(args.settings.context),
        u64::from(args.settings.batch),
    );

    // What must fit.
    let mut model_name = None;
    let mut trained_context = None;
    let (requirement, needs_at): (Requirement, Option<NeedsAt>) = match (&spec, args.bytes) {
        (_, Some(bytes)) => (
            Requirement {
                total: bytes,
                model: None,
            },
            None,
        ),
        (Some(spec), None) => {
            let s = estimate_settings(&args.settings)?;
            let model = crate::model::load_with(spec, &load_options(&args.settings))?;
            for w in &model.warnings {
                out.warn(&crate::output::estimate::warning_text(w));
            }
            let b = estimate_with_projector(
                &model.arch,
                model.file_weights,
                model.projector.as_ref().map_or(0, |p| p.bytes),
                &s,
            )?;
            model_name = Some(model.name.clone());
            trained_context = model.arch.max_position_embeddings;
            let requirement = model_requirement(&model.arch, &b, s.fragmentation_reserve);
            let (arch, weights) = (model.arch, model.file_weights);
            let projector = model.projector.as_ref().map_or(0, |p| p.bytes);
            let at = move |batch: u64, context: u64| {
                let settings = crate::model::Settings {
                    batch: batch.max(1),
                    context: context.max(1),
                    ..s.clone()
                };
                // Settings whose estimate overflows 64 bits fit nowhere.
                let b = estimate_with_projector(&arch, weights, projector, &settings).ok()?;
                Some(model_requirement(&arch, &b, settings.fragmentation_reserve))
            };
            (requirement, Some(Box::new(at)))
        }
        (None, None) => unreachable_usage()?,
    };

    // Where it could go.
    let (mut candidates, held_back) = read_inventories(&args.inventory)?;
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
        let found = discover_with(&probe_all(args.timeout));
        let host = host_info().hostname.unwrap_or_else(|| "localhost".into());
        candidates = candidates_from_discovery(&found, &host);
    }
    let total_at = needs_at
        .as_ref()
        .map(|f| move |c: u64| f(batch, c).map_or(u64::MAX, |r| r.total));
    let mut selection = plan(
        &requirement,
        &candidates,
        &policy,
        total_at
            .as_ref()
            .map(|f| (f as &dyn Fn(u64) -> u64, context)),
    );
    if let Some(f) = &needs_at {
        selection.plan.capacity = capacity(&selection, &candidates, &policy, context, batch, f)
            .map(|c| Capacity {
                trained_context,
                ..c
            });
    }
    // Launch commands for a model (not for --bytes).
    let launches = match (&spec, args.bytes, &requirement.model) {
        (Some(spec), None, Some(needs)) => {
            let model = ModelRef::for_source(spec);
            let settings = LaunchSettings {
                context,
                batch,
                layers: needs.layers,
                memory_fraction: policy.memory_fraction,
            };
            select_engines(args, &model)
                .into_iter()
                .map(|e| (e, launch(e, &model, &selection.plan, &settings)))
                .collect()
        }
        _ => Vec::new(),
    };
    let none = selection.plan.kind == PlanKind::None;
    out.emit(&SelectReport {
        model: model_name,
        selection,
        launches,
        held_back,
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
