//! Simulated time: an integer number of nanoseconds since the start of a run.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// A point in simulated time, or a duration, in integer nanoseconds.
///
/// Integer time keeps runs exactly reproducible: adding durations never
/// accumulates rounding error, and comparisons are total. `u64` nanoseconds
/// cover about 584 years.
///
/// `+` and `-` panic on overflow and underflow in every build profile (a
/// wrapped clock would silently reorder events); use [`SimTime::checked_sub`]
/// or [`SimTime::saturating_sub`] where a negative result is possible.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct SimTime(u64);

impl SimTime {
    /// Time zero, the start of every run.
    pub const ZERO: SimTime = SimTime(0);
    /// The largest representable time.
    pub const MAX: SimTime = SimTime(u64::MAX);

    const NS_PER_US: u64 = 1_000;
    const NS_PER_MS: u64 = 1_000_000;
    const NS_PER_S: u64 = 1_000_000_000;

    /// `ns` nanoseconds.
    pub const fn from_ns(ns: u64) -> Self {
        SimTime(ns)
    }

    /// `us` microseconds. Panics if the result does not fit in `u64` nanoseconds.
    pub const fn from_us(us: u64) -> Self {
        SimTime(Self::mul(us, Self::NS_PER_US))
    }

    /// `ms` milliseconds. Panics if the result does not fit in `u64` nanoseconds.
    pub const fn from_ms(ms: u64) -> Self {
        SimTime(Self::mul(ms, Self::NS_PER_MS))
    }

    /// `s` seconds. Panics if the result does not fit in `u64` nanoseconds.
    pub const fn from_s(s: u64) -> Self {
        SimTime(Self::mul(s, Self::NS_PER_S))
    }

    const fn mul(value: u64, unit: u64) -> u64 {
        match value.checked_mul(unit) {
            Some(ns) => ns,
            None => panic!("SimTime overflow"),
        }
    }

    /// The time as a count of nanoseconds.
    pub const fn as_ns(self) -> u64 {
        self.0
    }

    /// `self - rhs`, or `None` if `rhs` is later than `self`.
    pub const fn checked_sub(self, rhs: SimTime) -> Option<SimTime> {
        match self.0.checked_sub(rhs.0) {
            Some(ns) => Some(SimTime(ns)),
            None => None,
        }
    }

    /// `self + rhs`, clamped at [`SimTime::MAX`] (which means "never").
    pub const fn saturating_add(self, rhs: SimTime) -> SimTime {
        SimTime(self.0.saturating_add(rhs.0))
    }

    /// `self - rhs`, or zero if `rhs` is later.
    pub const fn saturating_sub(self, rhs: SimTime) -> SimTime {
        SimTime(self.0.saturating_sub(rhs.0))
    }
}

impl Add for SimTime {
    type Output = SimTime;
    fn add(self, rhs: SimTime) -> SimTime {
        SimTime(self.0.checked_add(rhs.0).expect("SimTime overflow"))
    }
}

impl AddAssign for SimTime {
    fn add_assign(&mut self, rhs: SimTime) {
        *self = *self + rhs;
    }
}

impl Sub for SimTime {
    type Output = SimTime;
    fn sub(self, rhs: SimTime) -> SimTime {
        SimTime(self.0.checked_sub(rhs.0).expect("SimTime underflow"))
    }
}

impl fmt::Display for SimTime {
    /// Exact, human-readable form in the largest unit that divides the value:
    /// `0s`, `1.5ms` is shown as `1500us`, `30ms`, `2s`, `7ns`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0;
        if ns == 0 {
            return f.write_str("0s");
        }
        let (value, unit) = if ns % Self::NS_PER_S == 0 {
            (ns / Self::NS_PER_S, "s")
        } else if ns % Self::NS_PER_MS == 0 {
            (ns / Self::NS_PER_MS, "ms")
        } else if ns % Self::NS_PER_US == 0 {
            (ns / Self::NS_PER_US, "us")
        } else {
            (ns, "ns")
        };
        write!(f, "{value}{unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_agree() {
        assert_eq!(SimTime::from_ns(1_500_000_000), SimTime::from_ms(1_500));
        assert_eq!(SimTime::from_us(1_000_000), SimTime::from_s(1));
        assert_eq!(SimTime::from_ms(30).as_ns(), 30_000_000);
        assert_eq!(SimTime::from_s(0), SimTime::ZERO);
    }

    #[test]
    fn arithmetic() {
        let a = SimTime::from_ms(30);
        let b = SimTime::from_us(250);
        assert_eq!((a + b).as_ns(), 30_250_000);
        assert_eq!(a + b - b, a);
        let mut c = a;
        c += b;
        assert_eq!(c, a + b);
        assert_eq!(b.checked_sub(a), None);
        assert_eq!(a.checked_sub(b), Some(SimTime::from_us(29_750)));
        assert_eq!(b.saturating_sub(a), SimTime::ZERO);
    }

    #[test]
    #[should_panic(expected = "SimTime underflow")]
    fn sub_underflow_panics() {
        let _ = SimTime::from_ns(1) - SimTime::from_ns(2);
    }

    #[test]
    #[should_panic(expected = "SimTime overflow")]
    fn add_overflow_panics() {
        let _ = SimTime::MAX + SimTime::from_ns(1);
    }

    #[test]
    #[should_panic(expected = "SimTime overflow")]
    fn constructor_overflow_panics() {
        let _ = SimTime::from_s(u64::MAX / 1_000);
    }

    #[test]
    fn ordering_is_by_nanoseconds() {
        assert!(SimTime::from_us(999) < SimTime::from_ms(1));
        assert!(SimTime::from_ns(1_000_001) > SimTime::from_ms(1));
        assert!(SimTime::MAX > SimTime::from_s(500 * 365 * 24 * 3600));
    }

    #[test]
    fn display_uses_largest_exact_unit() {
        assert_eq!(SimTime::ZERO.to_string(), "0s");
        assert_eq!(SimTime::from_ns(7).to_string(), "7ns");
        assert_eq!(SimTime::from_us(3).to_string(), "3us");
        assert_eq!(SimTime::from_us(1_500).to_string(), "1500us");
        assert_eq!(SimTime::from_ms(30).to_string(), "30ms");
        assert_eq!(SimTime::from_s(2).to_string(), "2s");
        assert_eq!(SimTime::from_ns(1_000_000_001).to_string(), "1000000001ns");
    }
}
