//! Memory pressure levels (the unified-pool design).

use serde::{Deserialize, Serialize};

/// How close the pool is to its usable limit, by allocated bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryPressure {
    /// Below 60 % of the usable limit.
    Low,
    /// 60 % to 80 %.
    Medium,
    /// 80 % to 95 %.
    High,
    /// Above 95 %: the next requests may fail.
    Critical,
}

/// [`MemoryPressure::from_usage`] for one fixed limit, as three byte thresholds worked out once
/// (the pool asks on every allocate and free).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PressureBands {
    /// First byte count that is Medium.
    medium: u64,
    /// First byte count that is High.
    high: u64,
    /// Last byte count that is High; above it is Critical.
    high_until: u64,
}

impl PressureBands {
    pub(crate) fn new(limit: u64) -> Self {
        if limit == 0 {
            return PressureBands {
                medium: 0,
                high: 0,
                high_until: 0,
            };
        }
        // used·100 < p·limit ⇔ used < ⌈p·limit/100⌉; used·100 ≤ 95·limit ⇔ used ≤ ⌊95·limit/100⌋.
        let at = |p: u128| u64::try_from((p * u128::from(limit)).div_ceil(100)).unwrap_or(u64::MAX);
        PressureBands {
            medium: at(60),
            high: at(80),
            high_until: u64::try_from(95 * u128::from(limit) / 100).unwrap_or(u64::MAX),
        }
    }

    /// The allocated byte counts, `lo..=hi`, at which the level stays `level` (empty, `lo > hi`,
    /// when no count gives it): the pool checks this one range per allocate and free, and works
    /// the level out again only when it is left.
    pub(crate) fn span(&self, level: MemoryPressure) -> (u64, u64) {
        const NONE: (u64, u64) = (1, 0);
        if self.high_until == 0 && self.medium == 0 {
            return match level {
                MemoryPressure::Critical => (0, u64::MAX),
                _ => NONE,
            };
        }
        let (lo, hi) = match level {
            MemoryPressure::Low => (0, self.medium.checked_sub(1)),
            MemoryPressure::Medium => (self.medium, self.high.checked_sub(1)),
            MemoryPressure::High => (self.high, Some(self.high_until)),
            MemoryPressure::Critical => match self.high_until.checked_add(1) {
                Some(lo) => (lo, Some(u64::MAX)),
                None => return NONE,
            },
        };
        hi.map_or(NONE, |hi| (lo, hi))
    }

    pub(crate) fn level(&self, used: u64) -> MemoryPressure {
        if self.high_until == 0 && self.medium == 0 {
            MemoryPressure::Critical
        } else if used < self.medium {
            MemoryPressure::Low
        } else if used < self.high {
            MemoryPressure::Medium
        } else if used <= self.high_until {
            MemoryPressure::High
        } else {
            MemoryPressure::Critical
        }
    }
}

impl MemoryPressure {
    /// The level for `used` bytes out of `limit` (a zero limit is Critical).
    pub fn from_usage(used: u64, limit: u64) -> Self {
        if limit == 0 {
            return MemoryPressure::Critical;
        }
        // Integer thresholds so the boundaries are exact and testable.
        let used = u128::from(used) * 100;
        let limit = u128::from(limit);
        if used < 60 * limit {
            MemoryPressure::Low
        } else if used < 80 * limit {
            MemoryPressure::Medium
        } else if used <= 95 * limit {
            MemoryPressure::High
        } else {
            MemoryPressure::Critical
        }
    }

    /// Lowercase name, as in JSON.
    pub fn name(self) -> &'static str {
        match self {
            MemoryPressure::Low => "low",
            MemoryPressure::Medium => "medium",
            MemoryPressure::High => "high",
            MemoryPressure::Critical => "critical",
        }
    }

    pub(crate) fn to_u8(self) -> u8 {
        self as u8
    }

    pub(crate) fn from_u8(v: u8) -> Self {
        match v {
            0 => MemoryPressure::Low,
            1 => MemoryPressure::Medium,
            2 => MemoryPressure::High,
            _ => MemoryPressure::Critical,
        }
    }
}

impl std::fmt::Display for MemoryPressure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::MemoryPressure::*;
    use super::*;

    #[test]
    fn boundaries() {
        assert_eq!(MemoryPressure::from_usage(0, 100), Low);
        assert_eq!(MemoryPressure::from_usage(59, 100), Low);
        assert_eq!(MemoryPressure::from_usage(60, 100), Medium);
        assert_eq!(MemoryPressure::from_usage(79, 100), Medium);
        assert_eq!(MemoryPressure::from_usage(80, 100), High);
        assert_eq!(MemoryPressure::from_usage(95, 100), High);
        assert_eq!(MemoryPressure::from_usage(96, 100), Critical);
        assert_eq!(MemoryPressure::from_usage(1, 0), Critical);
        assert!(Low < Medium && Medium < High && High < Critical);
    }
}

#[cfg(test)]
mod band_tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn bands_agree_with_from_usage(limit in any::<u64>(), used in any::<u64>(), near in any::<bool>()) {
            let bands = PressureBands::new(limit);
            // Near a boundary as often as anywhere.
            let used = if near {
                let b = [60u128, 80, 95][(used % 3) as usize];
                let edge = u64::try_from(b * u128::from(limit) / 100).unwrap();
                edge.wrapping_add(used % 3).wrapping_sub(1)
            } else {
                used
            };
            let level = MemoryPressure::from_usage(used, limit);
            prop_assert_eq!(bands.level(used), level);
            // The level's span holds `used`, and no other level's does.
            for other in [MemoryPressure::Low, MemoryPressure::Medium, MemoryPressure::High, MemoryPressure::Critical] {
                let (lo, hi) = bands.span(other);
                prop_assert_eq!(lo <= used && used <= hi, other == level, "{:?} {:?}", other, (lo, hi));
            }
        }
    }

    #[test]
    fn small_limits_and_zero() {
        for limit in 0..300u64 {
            let bands = PressureBands::new(limit);
            for used in 0..400u64 {
                assert_eq!(
                    bands.level(used),
                    MemoryPressure::from_usage(used, limit),
                    "{used}/{limit}"
                );
            }
        }
    }
}
