//! Memory pressure levels (seed 000).

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
