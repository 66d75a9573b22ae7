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
        let nanos = i128::from(self.0) * 1_000_000;
        match time::OffsetDateTime::from_unix_timestamp_nanos(nanos) {
            Ok(t) => format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
                t.year(),
                u8::from(t.month()),
                t.day(),
                t.hour(),
                t.minute(),
                t.second(),
                t.millisecond()
            ),
            Err(_) => String::from("1970-01-01T00:00:00.000Z"),
        }
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_rfc3339())
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_rfc3339())
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
    }
}
