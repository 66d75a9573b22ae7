//! Strict reading of request input: JSON bodies (syntax errors are 400, everything else a 422
//! with one detail per field) and query strings (unknown parameters are 422).

use custody_core::error::{ErrorCode, FieldIssue, Refusal};
use custody_core::Amount;
use serde_json::{Map, Value};

/// Parses a body that must be a JSON object.
pub fn json_object(body: &[u8]) -> Result<Map<String, Value>, Refusal> {
    let value: Value = serde_json::from_slice(body).map_err(|_| {
        Refusal::new(
            ErrorCode::MalformedJson,
            "the request body is not valid JSON",
        )
    })?;
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(Refusal::validation("body", "must be a JSON object")),
    }
}

/// Collects every problem of one input before answering, so a partner fixes all at once.
#[derive(Debug, Default)]
pub struct Fields {
    issues: Vec<FieldIssue>,
}

impl Fields {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn issue(&mut self, field: &str, issue: impl Into<String>) {
        self.issues.push(FieldIssue {
            field: field.to_owned(),
            issue: issue.into(),
        });
    }

    /// Flags every property not in `allowed`.
    pub fn no_unknown(&mut self, map: &Map<String, Value>, allowed: &[&str]) {
        for key in map.keys() {
            if !allowed.contains(&key.as_str()) {
                self.issue(key, "unknown property");
            }
        }
    }

    /// A required string of 1..=max_chars characters.
    pub fn string(
        &mut self,
        map: &Map<String, Value>,
        field: &str,
        max_chars: usize,
    ) -> Option<String> {
        match map.get(field) {
            None | Some(Value::Null) => {
                self.issue(field, "is required");
                None
            }
            Some(Value::String(s)) => {
                let n = s.chars().count();
                if n == 0 || n > max_chars {
                    self.issue(field, format!("must be 1 to {max_chars} characters"));
                    None
                } else if s.chars().any(char::is_control) {
                    self.issue(field, "must not contain control characters");
                    None
                } else {
                    Some(s.clone())
                }
            }
            Some(_) => {
                self.issue(field, "must be a string");
                None
            }
        }
    }

    /// A required `*_units` string.
    pub fn units(&mut self, map: &Map<String, Value>, field: &str) -> Option<Amount> {
        match map.get(field) {
            None | Some(Value::Null) => {
                self.issue(field, "is required");
                None
            }
            Some(Value::String(s)) => match Amount::parse_units(s) {
                Ok(a) => Some(a),
                Err(e) => {
                    self.issue(field, format!("must be an integer string of digits: {e}"));
                    None
                }
            },
            Some(_) => {
                self.issue(field, "must be a string of digits, not a number");
                None
            }
        }
    }

    /// An optional integer within `range`.
    pub fn opt_int(
        &mut self,
        map: &Map<String, Value>,
        field: &str,
        range: std::ops::RangeInclusive<u64>,
    ) -> Option<u64> {
        match map.get(field) {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) => match n.as_u64().filter(|v| range.contains(v)) {
                Some(v) => Some(v),
                None => {
                    self.issue(
                        field,
                        format!(
                            "must be an integer from {} to {}",
                            range.start(),
                            range.end()
                        ),
                    );
                    None
                }
            },
            Some(_) => {
                self.issue(field, "must be an integer");
                None
            }
        }
    }

    pub fn bool(&mut self, map: &Map<String, Value>, field: &str) -> Option<bool> {
        match map.get(field) {
            Some(Value::Bool(b)) => Some(*b),
            None | Some(Value::Null) => {
                self.issue(field, "is required");
                None
            }
            Some(_) => {
                self.issue(field, "must be a boolean");
                None
            }
        }
    }

    /// Ends validation: `Ok` when nothing was flagged.
    pub fn finish(self) -> Result<(), Refusal> {
        if self.issues.is_empty() {
            Ok(())
        } else {
            let mut r = Refusal::new(ErrorCode::ValidationFailed, "the request is not valid");
            r.details = self.issues;
            Err(r)
        }
    }
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Decodes one `application/x-www-form-urlencoded` component.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hi = hex_val(*bytes.get(i + 1)?)?;
                let lo = hex_val(*bytes.get(i + 2)?)?;
                out.push(hi * 16 + lo);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// Parses a query string, refusing parameters not in `allowed`, repeated ones and bad encoding.
pub fn query(raw: Option<&str>, allowed: &[&str]) -> Result<Vec<(String, String)>, Refusal> {
    let mut fields = Fields::new();
    let mut out: Vec<(String, String)> = Vec::new();
    for pair in raw.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let (Some(k), Some(v)) = (percent_decode(k), percent_decode(v)) else {
            fields.issue("query", "is not valid percent-encoding");
            continue;
        };
        if !allowed.contains(&k.as_str()) {
            fields.issue(&k, "unknown query parameter");
        } else if out.iter().any(|(seen, _)| *seen == k) {
            fields.issue(&k, "is given more than once");
        } else {
            out.push((k, v));
        }
    }
    fields.finish()?;
    Ok(out)
}

pub fn query_value<'a>(q: &'a [(String, String)], name: &str) -> Option<&'a str> {
    q.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// The `limit` of a listing: 1..=100, default 50.
pub fn limit(q: &[(String, String)]) -> Result<usize, Refusal> {
    match query_value(q, "limit") {
        None => Ok(50),
        Some(v) => v
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=100).contains(n) && !v.starts_with('+'))
            .ok_or_else(|| Refusal::validation("limit", "must be an integer from 1 to 100")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_rules() {
        assert_eq!(
            query(Some("network=BSC"), &["network"]).unwrap()[0].1,
            "BSC"
        );
        assert_eq!(query(Some("a%20b=c+d"), &["a b"]).unwrap()[0].1, "c d");
        assert!(query(Some("other=1"), &["network"]).is_err());
        assert!(query(Some("network=BSC&network=TRON"), &["network"]).is_err());
        assert!(query(Some("network=%zz"), &["network"]).is_err());
        assert_eq!(limit(&[]).unwrap(), 50);
        assert!(limit(&[("limit".into(), "0".into())]).is_err());
        assert!(limit(&[("limit".into(), "101".into())]).is_err());
    }

    #[test]
    fn json_rules() {
        assert_eq!(
            json_object(b"{").unwrap_err().code,
            ErrorCode::MalformedJson
        );
        assert_eq!(
            json_object(b"[]").unwrap_err().code,
            ErrorCode::ValidationFailed
        );
        let map = json_object(br#"{"a":"x","b":1,"zzz":true}"#).unwrap();
        let mut f = Fields::new();
        f.no_unknown(&map, &["a", "b"]);
        f.string(&map, "b", 10);
        let err = f.finish().unwrap_err();
        assert_eq!(err.details.len(), 2);
        assert_eq!(err.details[0].field, "zzz");
    }
}
