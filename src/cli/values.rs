//! Value parsers for flags whose values need more than `FromStr`: sizes that must not be zero,
//! block sizes, factors, fractions and percentages, each failing with a line naming the limit.

use crate::units::{parse_bytes, parse_tokens};

pub(super) fn parse_nonzero_bytes(s: &str) -> Result<u64, String> {
    match parse_bytes(s).map_err(|e| e.to_string())? {
        0 => Err("must be at least 1 byte".into()),
        n => Ok(n),
    }
}

/// A context length: `4096`, `32k` (32,768) or `128k`, from 1 token to 2^32 − 1.
pub(super) fn parse_context(s: &str) -> Result<u32, String> {
    match parse_tokens(s).map_err(|e| e.to_string())? {
        0 => Err("must be at least 1 token".into()),
        n => u32::try_from(n).map_err(|_| format!("{s} is above {} tokens", u32::MAX)),
    }
}

pub(super) fn parse_block_bytes(s: &str) -> Result<u64, String> {
    match parse_bytes(s).map_err(|e| e.to_string())? {
        n if n < 512 => Err(format!("{n} bytes is below the pool's 512-byte block")),
        n => Ok(n),
    }
}

/// A finite ratio above zero (NaN and infinity would make a gate meaningless).
pub(super) fn parse_factor(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number"))?;
    if !v.is_finite() || v <= 0.0 {
        return Err(format!("{s} is not a finite number above 0"));
    }
    Ok(v)
}

pub(super) fn parse_fraction(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number"))?;
    if !(0.0..=1.0).contains(&v) {
        return Err(format!("{s} is outside 0..=1"));
    }
    Ok(v)
}

pub(super) fn parse_percent(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("'{s}' is not a number"))?;
    if !(0.0..=100.0).contains(&v) {
        return Err(format!("{s} is outside 0..=100"));
    }
    Ok(v)
}

/// A size in GiB (vLLM's `--cpu-offload-gb`): a finite number from 0 to 16 Ti.
pub(super) fn parse_gib(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number of GiB"))?;
    if !v.is_finite() || !(0.0..=16_777_216.0).contains(&v) {
        return Err(format!("{s} is outside 0..=16777216 GiB"));
    }
    Ok(v)
}
