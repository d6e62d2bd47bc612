//! Values offered to shell completion for flags that take more than a fixed list: device
//! specs, precisions and catalog models. The parsers accept what they always accepted; the
//! values only feed the generated completions (and are hidden from `--help`).

use std::ffi::OsStr;

use clap::builder::{PossibleValue, TypedValueParser};

use crate::backend::DeviceSpec;

/// Specs worth offering for `--device`: the forms a spec takes, at typical sizes.
const DEVICE_SPECS: &[&str] = &[
    "host",
    "host:4GiB",
    "sim:8GiB",
    "sim:24GiB",
    "sim:48GiB",
    "sim:80GiB",
    "sim:141GiB",
    "sim:h100",
    "sim:h200",
    "sim:a100-80gb",
    "sim:l40s",
    "sim:rtx4090",
    "sim:mi300x",
    "cuda:0",
    "cuda:1",
    "rocm:0",
    "opencl:0",
    "vulkan:0",
    "metal:0",
];

/// `--device SPEC`: parsed as before, the usual specs offered to completion.
#[derive(Debug, Clone, Copy)]
pub struct DeviceSpecs;

impl TypedValueParser for DeviceSpecs {
    type Value = DeviceSpec;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<DeviceSpec, clap::Error> {
        let parse = |s: &str| s.parse::<DeviceSpec>();
        parse.parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(DEVICE_SPECS.iter().map(PossibleValue::new)))
    }
}

/// A free-text flag whose usual values come from one of gpumem's tables.
#[derive(Debug, Clone, Copy)]
pub struct Offered(pub fn() -> Vec<&'static str>);

impl TypedValueParser for Offered {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<String, clap::Error> {
        clap::builder::StringValueParser::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new((self.0)().into_iter().map(PossibleValue::new)))
    }
}

/// Catalog models by name and alias.
pub fn catalog_names() -> Vec<&'static str> {
    crate::model::catalog()
        .into_iter()
        .flat_map(|m| std::iter::once(m.name).chain(m.aliases.iter().copied()))
        .collect()
}

/// Weight precisions `--dtype` takes.
pub fn weight_precisions() -> Vec<&'static str> {
    crate::model::WEIGHT_PRECISIONS
        .iter()
        .map(|p| p.name)
        .collect()
}

/// KV-cache precisions `--kv-dtype` takes.
pub fn kv_precisions() -> Vec<&'static str> {
    crate::model::KV_PRECISIONS.iter().map(|p| p.name).collect()
}
