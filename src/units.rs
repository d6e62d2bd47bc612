//! Byte sizes and durations as people type and read them.
//!
//! Parsing accepts a whole number of bytes (`4096`) or a number with a unit (`512MiB`,
//! `28GiB`, `1.5GB`). Binary units (`KiB`, `MiB`, `GiB`, `TiB`, `PiB`) are powers of 1024 and
//! decimal units (`kB`, `MB`, `GB`, `TB`, `PB`) powers of 1000, because a vendor's "80 GB"
//! card and a driver's "80 GiB" budget differ by 5 GB and users need both. Units are
//! case-insensitive; the result must be a whole number of bytes and fit in `u64`.
//!
//! Formatting is always base 1024 with two decimals (`14.48 GiB`), matching what
//! `nvidia-smi` and PyTorch print.

use std::time::Duration;

use thiserror::Error;

/// Why a size or duration string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseUnitError {
    /// Nothing was given.
    #[error("empty value; expected a size such as 4096, 512MiB or 1.5GB")]
    Empty,
    /// The text is not a number followed by an optional unit.
    #[error(
        "'{0}' is not a size; expected a number with an optional unit such as 512MiB or 1.5GB"
    )]
    Malformed(String),
    /// The unit is not one of the known ones.
    #[error(
        "unknown unit '{unit}' in '{input}'; use B, kB, KiB, MB, MiB, GB, GiB, TB, TiB, PB or PiB"
    )]
    UnknownUnit {
        /// The unit as typed.
        unit: String,
        /// The text that failed to parse, quoted back in the message.
        input: String,
    },
    /// The value is a fraction of a byte (e.g. `1.5` or `0.1B`); fractions of larger units
    /// are rounded to the nearest byte.
    #[error("'{0}' is not a whole number of bytes")]
    Fractional(String),
    /// The value does not fit in 64 bits.
    #[error("'{0}' is too large")]
    Overflow(String),
    /// The text is not a number of tokens.
    #[error("'{0}' is not a number of tokens; expected e.g. 4096, 32k (32,768) or 128k (131,072)")]
    MalformedTokens(String),
    /// The text is not a duration.
    #[error("'{0}' is not a duration; expected e.g. 10s, 500ms, 2m or a number of seconds")]
    MalformedDuration(String),
}

const UNITS: &[(&str, u64)] = &[
    ("b", 1),
    ("kb", 1_000),
    ("kib", 1 << 10),
    ("mb", 1_000_000),
    ("mib", 1 << 20),
    ("gb", 1_000_000_000),
    ("gib", 1 << 30),
    ("tb", 1_000_000_000_000),
    ("tib", 1 << 40),
    ("pb", 1_000_000_000_000_000),
    ("pib", 1 << 50),
];

/// Parses a byte size such as `4096`, `512MiB`, `28GiB` or `1.5GB`.
#[expect(
    clippy::cast_possible_truncation,
    reason = "at most 19 fraction digits are kept"
)]
pub fn parse_bytes(input: &str) -> Result<u64, ParseUnitError> {
    let text = input.trim();
    if text.is_empty() {
        return Err(ParseUnitError::Empty);
    }
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let unit = unit.trim_start();
    if number.is_empty() {
        return Err(ParseUnitError::Malformed(input.to_string()));
    }
    let multiplier = if unit.is_empty() {
        1
    } else {
        let lower = unit.to_ascii_lowercase();
        UNITS
            .iter()
            .find(|(name, _)| *name == lower)
            .map(|(_, m)| *m)
            .ok_or_else(|| ParseUnitError::UnknownUnit {
                unit: unit.to_string(),
                input: input.to_string(),
            })?
    };
    let (int_part, frac_part) = match number.split_once('.') {
        Some((i, f)) => (i, f),
        None => (number, ""),
    };
    let digits_ok = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    if (int_part.is_empty() && frac_part.is_empty())
        || !digits_ok(int_part)
        || !digits_ok(frac_part)
        || number.ends_with('.')
    {
        return Err(ParseUnitError::Malformed(input.to_string()));
    }
    // Exact arithmetic in u128 so that "1.5GB" is exactly 1_500_000_000 and no float rounding
    // can turn a typed size into a different one.
    let overflow = || ParseUnitError::Overflow(input.to_string());
    if int_part.len() > 30 || frac_part.len() > 30 {
        return Err(overflow());
    }
    let int_value: u128 = if int_part.is_empty() {
        0
    } else {
        int_part.parse().map_err(|_| overflow())?
    };
    let mut total = int_value
        .checked_mul(u128::from(multiplier))
        .ok_or_else(overflow)?;
    if !frac_part.is_empty() {
        let frac_value: u128 = frac_part.parse().map_err(|_| overflow())?;
        let scale = 10u128.pow(frac_part.len() as u32);
        let scaled = frac_value
            .checked_mul(u128::from(multiplier))
            .ok_or_else(overflow)?;
        // A fraction of a unit is rounded to the nearest byte (23.58GiB is what a driver
        // prints); a fraction of a single byte is refused.
        if multiplier == 1 && scaled % scale != 0 {
            return Err(ParseUnitError::Fractional(input.to_string()));
        }
        let rounded = (scaled + scale / 2) / scale;
        total = total.checked_add(rounded).ok_or_else(overflow)?;
    }
    u64::try_from(total).map_err(|_| overflow())
}

/// Formats a byte count base 1024 with two decimals: `512 B`, `1.50 KiB`, `14.48 GiB`; a value
/// of 1000 or more of a unit is given in the next (`0.99 GiB`).
pub fn format_bytes(bytes: u64) -> String {
    const NAMES: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut index = 0;
    // At 1000 of a unit, the next one up: `0.99 GiB`, never `1018.00 MiB`.
    while value >= 1000.0 && index + 1 < NAMES.len() {
        value /= 1024.0;
        index += 1;
    }
    format!("{value:.2} {}", NAMES[index])
}

/// A parameter count as model cards write it: `494.0 M`, `8.0 B`, `1.03 T`.
pub fn format_params(n: u64) -> String {
    let v = n as f64;
    if v >= 1e12 {
        format!("{:.2} T", v / 1e12)
    } else if v >= 1e9 {
        format!("{:.1} B", v / 1e9)
    } else {
        format!("{:.1} M", v / 1e6)
    }
}

/// Formats a signed byte difference, e.g. `-1.20 GiB`.
pub fn format_signed_bytes(bytes: i128) -> String {
    let magnitude = u64::try_from(bytes.unsigned_abs()).unwrap_or(u64::MAX);
    if bytes < 0 {
        format!("-{}", format_bytes(magnitude))
    } else {
        format_bytes(magnitude)
    }
}

/// Parses a number of tokens as context lengths are written: `4096`, or with `k` (1,024
/// tokens: `32k` is 32,768, `128K` 131,072, the powers of two models are trained at) or `m`
/// (1,048,576).
pub fn parse_tokens(input: &str) -> Result<u64, ParseUnitError> {
    let text = input.trim();
    let bad = || ParseUnitError::MalformedTokens(input.to_string());
    let (digits, scale) = match text.char_indices().last() {
        Some((i, 'k' | 'K')) => (&text[..i], 1u64 << 10),
        Some((i, 'm' | 'M')) => (&text[..i], 1 << 20),
        _ => (text, 1),
    };
    if digits.is_empty() || digits.len() > 20 || !digits.chars().all(|c| c.is_ascii_digit()) {
        return Err(bad());
    }
    let overflow = || ParseUnitError::Overflow(input.to_string());
    // All digits: the parse fails only past 2^64.
    let n: u64 = digits.parse().map_err(|_| overflow())?;
    n.checked_mul(scale).ok_or_else(overflow)
}

/// Parses a duration: `10s`, `500ms`, `2m`, `1h`, `1.5s`, or a bare number of seconds.
pub fn parse_duration(input: &str) -> Result<Duration, ParseUnitError> {
    let text = input.trim();
    let bad = || ParseUnitError::MalformedDuration(input.to_string());
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    if number.is_empty() || number.starts_with('.') || number.ends_with('.') {
        return Err(bad());
    }
    let value: f64 = number.parse().map_err(|_| bad())?;
    let seconds = match unit.trim() {
        "" | "s" => value,
        "ms" => value / 1_000.0,
        "us" | "µs" => value / 1_000_000.0,
        "m" | "min" => value * 60.0,
        "h" => value * 3_600.0,
        _ => return Err(bad()),
    };
    if !seconds.is_finite() || seconds > 1e9 {
        return Err(bad());
    }
    Ok(Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    #[test]
    fn tokens_take_k_as_1024() {
        assert_eq!(super::parse_tokens("4096"), Ok(4096));
        assert_eq!(super::parse_tokens("32k"), Ok(32_768));
        assert_eq!(super::parse_tokens(" 128K "), Ok(131_072));
        assert_eq!(super::parse_tokens("1m"), Ok(1 << 20));
        for bad in ["", "k", "32kb", "1.5k", "-4", "32 k", "0x10"] {
            assert_eq!(
                super::parse_tokens(bad),
                Err(ParseUnitError::MalformedTokens(bad.into())),
                "{bad}"
            );
        }
        assert!(matches!(
            super::parse_tokens("99999999999999999999k"),
            Err(ParseUnitError::Overflow(_))
        ));
    }

    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_plain_and_unit_sizes() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("512MiB"), Ok(512 << 20));
        assert_eq!(parse_bytes("28GiB"), Ok(28 << 30));
        assert_eq!(parse_bytes("1.5GB"), Ok(1_500_000_000));
        assert_eq!(parse_bytes("1.5KiB"), Ok(1536));
        assert_eq!(parse_bytes("80 gb"), Ok(80_000_000_000));
        assert_eq!(parse_bytes("0"), Ok(0));
        assert_eq!(parse_bytes(".5KiB"), Ok(512));
    }

    #[test]
    fn rounds_a_fraction_of_a_unit_to_the_nearest_byte() {
        // 23.58 × 2^30 = 25,318,832,209.92.
        assert_eq!(parse_bytes("23.58GiB"), Ok(25_318_832_210));
        assert_eq!(parse_bytes("1.0001KiB"), Ok(1024));
        assert_eq!(parse_bytes("0.0005KiB"), Ok(1));
        assert!(matches!(
            parse_bytes("0.1B"),
            Err(ParseUnitError::Fractional(_))
        ));
    }

    #[test]
    fn rejects_bad_sizes() {
        assert!(matches!(parse_bytes(""), Err(ParseUnitError::Empty)));
        assert!(matches!(
            parse_bytes("-1"),
            Err(ParseUnitError::Malformed(_))
        ));
        assert!(matches!(
            parse_bytes("1.5"),
            Err(ParseUnitError::Fractional(_))
        ));
        assert!(matches!(
            parse_bytes("12XB"),
            Err(ParseUnitError::UnknownUnit { .. })
        ));
        assert!(matches!(
            parse_bytes("1..5GB"),
            Err(ParseUnitError::Malformed(_))
        ));
        assert!(matches!(
            parse_bytes("5."),
            Err(ParseUnitError::Malformed(_))
        ));
        assert!(matches!(
            parse_bytes("GiB"),
            Err(ParseUnitError::Malformed(_))
        ));
        assert!(matches!(
            parse_bytes("20000PiB"),
            Err(ParseUnitError::Overflow(_))
        ));
        assert!(matches!(
            parse_bytes("99999999999999999999999999999999999999"),
            Err(ParseUnitError::Overflow(_))
        ));
    }

    #[test]
    fn formats_base_1024() {
        assert_eq!(format_bytes(0), "0 B");
        assert_eq!(format_bytes(1023), "1023 B");
        assert_eq!(format_bytes(1536), "1.50 KiB");
        assert_eq!(format_bytes(14_483_464_192), "13.49 GiB");
        assert_eq!(format_bytes(15_552_000_000), "14.48 GiB");
        assert_eq!(format_bytes(u64::MAX), "16.00 EiB");
        // Never four digits before the point: 1018 MiB is 0.99 GiB.
        assert_eq!(format_bytes(1018 << 20), "0.99 GiB");
        assert_eq!(format_bytes(999 << 20), "999.00 MiB");
        assert_eq!(format_params(494_032_768), "494.0 M");
        assert_eq!(format_params(8_030_261_248), "8.0 B");
        assert_eq!(format_params(1_026_400_000_000), "1.03 T");
        assert_eq!(format_signed_bytes(-1536), "-1.50 KiB");
    }

    #[test]
    fn parses_durations() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("1e400").is_err());
    }

    proptest! {
        #[test]
        fn tokens_never_panic_and_k_is_1024(s in "\\PC{0,24}", n in 0u64..(1 << 40)) {
            let _ = parse_tokens(&s);
            prop_assert_eq!(parse_tokens(&format!("{n}k")), Ok(n * 1024));
            prop_assert_eq!(parse_tokens(&n.to_string()), Ok(n));
        }

        #[test]
        fn parse_never_panics(s in "\\PC*") {
            let _ = parse_bytes(&s);
            let _ = parse_duration(&s);
        }

        #[test]
        fn integers_round_trip(n in any::<u64>()) {
            prop_assert_eq!(parse_bytes(&n.to_string()), Ok(n));
        }

        #[test]
        fn binary_units_scale(n in 0u64..(1 << 20), unit in 0usize..4) {
            let (name, mult) = [("KiB", 1u64 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("TiB", 1 << 40)][unit];
            prop_assert_eq!(parse_bytes(&format!("{n}{name}")), Ok(n * mult));
        }
    }
}
