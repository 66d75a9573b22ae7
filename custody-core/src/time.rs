//! Instants as Unix milliseconds, written as RFC 3339 UTC. The core never reads a clock; it is
//! handed `now` through the `Clock` port.

use std::fmt;

use serde::{Serialize, Serializer};

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(i64);

impl Timestamp {
    pub const fn from_unix_millis(ms: i64) -> Self {
        Timestamp(ms)
    }

    pub const fn unix_millis(self) -> i64 {
        self.0
    }

    pub const fn unix_seconds(self) -> i64 {
        self.0.div_euclid(1000)
    }

    pub const fn plus_millis(self, ms: i64) -> Self {
        Timestamp(self.0.saturating_add(ms))
    }

    pub const fn plus_seconds(self, s: i64) -> Self {
        self.plus_millis(s.saturating_mul(1000))
    }

    /// RFC 3339 in UTC with millisecond precision, e.g. `2026-11-22T02:11:14.123Z`.
    pub fn to_rfc3339(self) -> String {
        self.rfc3339().as_str().to_owned()
    }

    /// The RFC 3339 text in a fixed buffer: every answer and webhook writes its timestamps, and
    /// `format!` of seven padded fields cost more than the rest of a wallet's rendering. An
    /// instant outside years 0000–9999 (which no record holds) writes the epoch, as one the
    /// `time` crate cannot represent always did.
    fn rfc3339(self) -> Rfc3339 {
        let nanos = i128::from(self.0) * 1_000_000;
        let Ok(t) = time::OffsetDateTime::from_unix_timestamp_nanos(nanos) else {
            return Rfc3339::EPOCH;
        };
        let Some(year) = u32::try_from(t.year()).ok().filter(|y| *y <= 9999) else {
            return Rfc3339::EPOCH;
        };
        let mut out = *b"0000-00-00T00:00:00.000Z";
        let mut put = |at: usize, width: usize, mut v: u32| {
            for i in (0..width).rev() {
                out[at + i] = b'0' + u8::try_from(v % 10).unwrap_or(0);
                v /= 10;
            }
        };
        put(0, 4, year);
        put(5, 2, u32::from(u8::from(t.month())));
        put(8, 2, u32::from(t.day()));
        put(11, 2, u32::from(t.hour()));
        put(14, 2, u32::from(t.minute()));
        put(17, 2, u32::from(t.second()));
        put(20, 3, u32::from(t.millisecond()));
        Rfc3339(out)
    }
}

/// A timestamp's RFC 3339 text, ASCII digits and separators only.
struct Rfc3339([u8; 24]);

impl Rfc3339 {
    const EPOCH: Rfc3339 = Rfc3339(*b"1970-01-01T00:00:00.000Z");

    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).unwrap_or("1970-01-01T00:00:00.000Z")
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.rfc3339().as_str())
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.rfc3339().as_str())
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.rfc3339().as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_rfc3339_utc() {
        assert_eq!(
            Timestamp::from_unix_millis(0).to_rfc3339(),
            "1970-01-01T00:00:00.000Z"
        );
        assert_eq!(
            Timestamp::from_unix_millis(1_795_313_474_123).to_rfc3339(),
            "2026-11-22T02:11:14.123Z"
        );
        assert_eq!(
            Timestamp::from_unix_millis(253_402_300_799_999).to_rfc3339(),
            "9999-12-31T23:59:59.999Z"
        );
        assert_eq!(
            Timestamp::from_unix_millis(-62_167_219_200_000).to_rfc3339(),
            "0000-01-01T00:00:00.000Z"
        );
        // Outside years 0000–9999: the epoch (past 9999 the `time` crate cannot represent the
        // instant, as before; no record holds a year before 0).
        for ms in [253_402_300_800_000, -62_167_219_200_001, i64::MAX, i64::MIN] {
            assert_eq!(
                Timestamp::from_unix_millis(ms).to_rfc3339(),
                "1970-01-01T00:00:00.000Z",
                "{ms}"
            );
        }
    }

    /// The same text as the `time` crate's own RFC 3339 formatting, for any instant a record
    /// can hold (years 1970–9999), and as JSON.
    #[test]
    fn agrees_with_the_time_crate() {
        use proptest::prelude::*;
        proptest!(|(ms in 0i64..253_402_300_800_000)| {
            let t = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
                .unwrap();
            let reference = t
                .format(&time::macros::format_description!(
                    "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
                ))
                .unwrap();
            let ours = Timestamp::from_unix_millis(ms);
            prop_assert_eq!(&ours.to_rfc3339(), &reference);
            prop_assert_eq!(
                serde_json::to_string(&ours).unwrap(),
                format!("\"{reference}\"")
            );
        });
    }
}
