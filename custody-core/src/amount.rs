//! The one money type. A private `u128` so every constructor checks its input; only checked
//! arithmetic; parsed from and written to the decimal `*_units` strings of the contract.
//! Floats never touch it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An amount of an asset in its smallest unit (wei, sun, ...). Never negative.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Amount(u128);

/// Why a `*_units` string was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AmountParseError {
    #[error("must not be empty")]
    Empty,
    #[error("must contain only the digits 0-9 (no sign, no decimal point, no spaces)")]
    NotDigits,
    #[error("is too large (the maximum is 2^128 - 1)")]
    Overflow,
}

impl Amount {
    pub const ZERO: Amount = Amount(0);
    pub const MAX: Amount = Amount(u128::MAX);

    pub const fn from_units(units: u128) -> Self {
        Amount(units)
    }

    pub const fn units(self) -> u128 {
        self.0
    }

    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }

    pub fn checked_add(self, other: Amount) -> Option<Amount> {
        self.0.checked_add(other.0).map(Amount)
    }

    pub fn checked_sub(self, other: Amount) -> Option<Amount> {
        self.0.checked_sub(other.0).map(Amount)
    }

    /// `self * numerator / denominator`, rounded down, without intermediate overflow for any
    /// `numerator <= denominator <= u64::MAX` (fee and slippage ratios).
    pub fn mul_div_floor(self, numerator: u64, denominator: u64) -> Option<Amount> {
        if denominator == 0 {
            return None;
        }
        let (n, d) = (u128::from(numerator), u128::from(denominator));
        let q = self.0 / d;
        let r = self.0 % d;
        // (q*d + r) * n / d = q*n + r*n/d; r < d <= 2^64 and n <= 2^64 so r*n fits in u128.
        q.checked_mul(n)?.checked_add(r * n / d).map(Amount)
    }

    /// Parses a `*_units` string: `^[0-9]+$`, at most `u128::MAX`. Leading zeros are accepted on
    /// input (they match the contract's pattern) and never written on output.
    pub fn parse_units(s: &str) -> Result<Amount, AmountParseError> {
        if s.is_empty() {
            return Err(AmountParseError::Empty);
        }
        let mut value: u128 = 0;
        for b in s.bytes() {
            if !b.is_ascii_digit() {
                return Err(AmountParseError::NotDigits);
            }
            value = value
                .checked_mul(10)
                .and_then(|v| v.checked_add(u128::from(b - b'0')))
                .ok_or(AmountParseError::Overflow)?;
        }
        Ok(Amount(value))
    }
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Debug for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Amount({})", self.0)
    }
}

impl FromStr for Amount {
    type Err = AmountParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Amount::parse_units(s)
    }
}

impl Serialize for Amount {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Amount {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        Amount::parse_units(&s).map_err(|e| serde::de::Error::custom(format!("amount {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_and_prints_without_leading_zeros() {
        assert_eq!(Amount::parse_units("000120").unwrap().to_string(), "120");
        assert_eq!(Amount::parse_units("0").unwrap(), Amount::ZERO);
        assert_eq!(
            Amount::parse_units("340282366920938463463374607431768211455").unwrap(),
            Amount::MAX
        );
    }

    #[test]
    fn rejects_what_the_pattern_rejects() {
        for bad in [
            "", "-1", "+1", "1.0", "1e3", " 1", "1 ", "0x10", "١٢", "1_000",
        ] {
            assert!(Amount::parse_units(bad).is_err(), "{bad:?} must be refused");
        }
        assert_eq!(
            Amount::parse_units("340282366920938463463374607431768211456"),
            Err(AmountParseError::Overflow)
        );
    }

    #[test]
    fn arithmetic_is_checked() {
        assert_eq!(Amount::MAX.checked_add(Amount::from_units(1)), None);
        assert_eq!(Amount::ZERO.checked_sub(Amount::from_units(1)), None);
        assert_eq!(
            Amount::from_units(1000).mul_div_floor(50, 10_000),
            Some(Amount::from_units(5))
        );
        assert_eq!(
            Amount::MAX.mul_div_floor(10_000, 10_000),
            Some(Amount::MAX),
            "no intermediate overflow"
        );
    }

    proptest! {
        #[test]
        fn round_trips(v in any::<u128>()) {
            let a = Amount::from_units(v);
            prop_assert_eq!(Amount::parse_units(&a.to_string()), Ok(a));
            let json = serde_json::to_string(&a).unwrap();
            prop_assert_eq!(serde_json::from_str::<Amount>(&json).unwrap(), a);
        }

        #[test]
        fn leading_zeros_are_dropped(zeros in 1usize..5, v in any::<u64>()) {
            let s = format!("{}{}", "0".repeat(zeros), v);
            prop_assert_eq!(Amount::parse_units(&s).unwrap().to_string(), v.to_string());
        }

        #[test]
        fn rejects_any_string_outside_the_pattern(s in "\\PC*") {
            let matches_pattern = !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
            if !matches_pattern {
                prop_assert!(Amount::parse_units(&s).is_err());
            }
        }

        #[test]
        fn rejects_a_non_digit_anywhere(prefix in "[0-9]{0,10}", bad in "[^0-9]", suffix in "[0-9]{0,10}") {
            let s = format!("{prefix}{bad}{suffix}");
            prop_assert_eq!(Amount::parse_units(&s), Err(AmountParseError::NotDigits));
        }

        #[test]
        fn mul_div_matches_wide_reference(v in any::<u128>(), n in any::<u32>(), d in 1u32..) {
            let n = u64::from(n.min(d));
            let d = u64::from(d);
            // Reference: 256-bit long multiplication via two u128 halves.
            let expected = {
                let (hi, lo) = (v >> 64, v & u128::from(u64::MAX));
                let lo_p = lo * u128::from(n);
                let hi_p = hi * u128::from(n);
                // value = hi_p * 2^64 + lo_p; divide by d using the same decomposition.
                let hi_q = hi_p / u128::from(d);
                let hi_r = hi_p % u128::from(d);
                let mid = (hi_r << 64) + lo_p;
                (hi_q << 64) + mid / u128::from(d)
            };
            prop_assert_eq!(Amount::from_units(v).mul_div_floor(n, d).map(|a| a.units()), Some(expected));
        }
    }
}
