//! Strict reading of request input: JSON bodies (syntax errors are 400, everything else a 422
//! with one detail per field) and query strings (unknown parameters are 422).

use std::cell::RefCell;
use std::fmt;

use custody_core::error::{ErrorCode, FieldIssue, Refusal};
use custody_core::Amount;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

fn malformed(message: impl Into<String>) -> Refusal {
    Refusal::new(ErrorCode::MalformedJson, message)
}

/// Parses a body that must be a JSON object (decisions §17). Every body is parsed here.
///
/// Refused as 400 `MALFORMED_JSON`: invalid JSON, bytes that are not UTF-8, anything but
/// whitespace after the value, and a key repeated in one object at any depth (parsers that keep
/// different copies of a key would read one request two ways). A number too large for a double
/// (`1e400`) is valid JSON that serde_json cannot hold: it is a 422 naming where it was, like any
/// number where a string of digits is expected.
pub fn json_object(body: &[u8]) -> Result<Map<String, Value>, Refusal> {
    match parse_strict(body)? {
        Value::Object(map) => Ok(map),
        _ => Err(Refusal::validation("body", "must be a JSON object")),
    }
}

/// One pass of serde_json's parser over `body`, building the value through [`Strict`] so a
/// repeated key is seen when it is read, then `end()` for trailing bytes.
fn parse_strict(body: &[u8]) -> Result<Value, Refusal> {
    let position = RefCell::new(Position::default());
    let mut de = serde_json::Deserializer::from_slice(body);
    let parsed = Strict(&position)
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v));
    let err = match parsed {
        Ok(v) => return Ok(v),
        Err(e) => e,
    };
    let position = position.into_inner();
    if let Some(key) = position.repeated {
        return Err(malformed(format!(
            "the request body repeats the key {key:?} in one object"
        )));
    }
    if is_number_out_of_range(&err) {
        let field = if position.path.is_empty() {
            "body".to_owned()
        } else {
            let names: Vec<String> = position.path.iter().map(Segment::to_string).collect();
            names.join(".")
        };
        return Err(Refusal::validation(
            field,
            "is a number out of range; amounts are strings of digits",
        ));
    }
    Err(malformed("the request body is not valid JSON"))
}

/// serde_json reports a number beyond f64 as a syntax error; its wording is the only marker
/// (pinned by a test below).
fn is_number_out_of_range(err: &serde_json::Error) -> bool {
    err.is_syntax() && err.to_string().starts_with("number out of range")
}

/// Where the parser is (object keys and array indexes from the root) and the repeated key that
/// stopped it, if that is what did.
#[derive(Default)]
struct Position {
    path: Vec<Segment>,
    repeated: Option<String>,
}

enum Segment {
    Key(String),
    Index(usize),
}

impl fmt::Display for Segment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Segment::Key(k) => f.write_str(k),
            Segment::Index(i) => write!(f, "{i}"),
        }
    }
}

/// Builds a `serde_json::Value` like serde_json's own visitor, but refuses a repeated key
/// instead of keeping the last copy, and keeps the path of what it reads: on an error the
/// path is left where the error happened.
#[derive(Clone, Copy)]
struct Strict<'a>(&'a RefCell<Position>);

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        // serde_json never yields a non-finite double; refuse one rather than invent a value.
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("not a finite number"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        loop {
            self.0.borrow_mut().path.push(Segment::Index(items.len()));
            let item = seq.next_element_seed(self)?;
            self.0.borrow_mut().path.pop();
            match item {
                Some(v) => items.push(v),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            if map.contains_key(&key) {
                self.0.borrow_mut().repeated = Some(key);
                return Err(de::Error::custom("a key is repeated"));
            }
            // The key waits on the path while its value is read (no copy), then comes back.
            self.0.borrow_mut().path.push(Segment::Key(key));
            let value = access.next_value_seed(self)?;
            let Some(Segment::Key(key)) = self.0.borrow_mut().path.pop() else {
                // Nested values leave the path as they found it; fail closed if not.
                return Err(de::Error::custom("the parser lost its place"));
            };
            map.insert(key, value);
        }
        Ok(Value::Object(map))
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

    /// An optional integer within `range`. As in JSON Schema (which the OpenAPI document
    /// speaks), `2452.0` is the integer 2452; `null` is no integer: leave the field out to get
    /// its default (decisions §17).
    pub fn opt_int(
        &mut self,
        map: &Map<String, Value>,
        field: &str,
        range: std::ops::RangeInclusive<u64>,
    ) -> Option<u64> {
        // Exactness is checked first: a whole, non-negative double below 2^53 converts without
        // loss, and any range this is used with lies far below that.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let integral = |n: &Number| {
            n.as_u64().or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && (0.0..9_007_199_254_740_992.0).contains(f))
                    .map(|f| f as u64)
            })
        };
        match map.get(field) {
            None => None,
            Some(Value::Number(n)) => match integral(n).filter(|v| range.contains(v)) {
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

/// `starting_after` of an admin listing: the id (a UUID) of the last row of the previous page.
/// Whether it names a row is the store's answer ([`unknown_cursor`]).
pub fn starting_after(q: &[(String, String)]) -> Result<Option<uuid::Uuid>, Refusal> {
    match query_value(q, "starting_after") {
        None => Ok(None),
        Some(v) => uuid::Uuid::parse_str(v)
            .ok()
            // One spelling only (the hyphenated form every row shows), as for path ids.
            .filter(|id| id.hyphenated().to_string() == v.to_ascii_lowercase())
            .map(Some)
            .ok_or_else(|| Refusal::validation("starting_after", "must be the id of a listed row")),
    }
}

/// The refusal of a `starting_after` that names no row of the listing.
pub fn unknown_cursor() -> Refusal {
    Refusal::validation("starting_after", "names no row of this listing")
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

    #[test]
    fn an_optional_integer_is_a_json_schema_integer_and_never_null() {
        let map = json_object(br#"{"a":2452.0,"b":null,"c":1.5,"d":7,"e":-0.0}"#).unwrap();
        let mut f = Fields::new();
        assert_eq!(f.opt_int(&map, "a", 1..=10_000), Some(2452));
        assert_eq!(f.opt_int(&map, "d", 1..=10_000), Some(7));
        assert_eq!(f.opt_int(&map, "missing", 1..=10_000), None);
        f.finish().unwrap();
        for field in ["b", "c", "e"] {
            let mut f = Fields::new();
            assert_eq!(f.opt_int(&map, field, 1..=10_000), None);
            assert_eq!(f.finish().unwrap_err().details[0].field, field);
        }
    }

    fn code_of(body: &[u8]) -> ErrorCode {
        json_object(body).unwrap_err().code
    }

    #[test]
    fn a_repeated_key_anywhere_is_malformed() {
        for body in [
            &br#"{"amount_units":"1","amount_units":"900000"}"#[..],
            br#"{"a":{"b":1,"c":{"d":true,"d":true}}}"#,
            br#"{"a":[1,{"b":1},{"b":1,"b":2}]}"#,
            br#"{"enabled":true,"en\u0061bled":false}"#,
            br#"[{"a":1,"a":1}]"#,
        ] {
            assert_eq!(
                code_of(body),
                ErrorCode::MalformedJson,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        let r = json_object(br#"{"x":1,"x":2}"#).unwrap_err();
        assert!(r.message.contains("\"x\""), "{}", r.message);
        // The same key in sibling objects is not a repetition.
        let map = json_object(br#"{"a":{"k":1},"b":{"k":2},"c":[{"k":3},{"k":4}]}"#).unwrap();
        assert_eq!(map["c"][1]["k"], 4);
        // serde_json's depth limit holds through the seed: deep nesting is refused, not a crash.
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(5_000), "]".repeat(5_000));
        assert_eq!(code_of(deep.as_bytes()), ErrorCode::MalformedJson);
    }

    #[test]
    fn only_whitespace_may_follow_and_the_bytes_must_be_utf8() {
        assert!(json_object(b" \t\r\n{\"a\":1} \t\r\n").is_ok());
        for body in [
            &b"{\"a\":1}{}"[..],
            b"{\"a\":1} x",
            b"{\"a\":1}\x00",
            b"{\"a\":\"caf\xe9\"}",
            b"{\"a\":\"\xed\xa0\x80\"}",
            b"{\"a\":\"\\ud800\"}",
            b"\xef\xbb\xbf{}",
            b"",
        ] {
            assert_eq!(
                code_of(body),
                ErrorCode::MalformedJson,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn a_number_out_of_range_is_a_validation_failure_where_it_stands() {
        let huge = format!("{{\"n\":1{}}}", "0".repeat(400));
        for (body, field) in [
            (r#"{"amount_units":1e400}"#.to_owned(), "amount_units"),
            (r#"{"amount_units":-1e400}"#.to_owned(), "amount_units"),
            (huge, "n"),
            (r#"{"a":{"b":[0,1e999]}}"#.to_owned(), "a.b.1"),
            ("1e400".to_owned(), "body"),
        ] {
            let r = json_object(body.as_bytes()).unwrap_err();
            assert_eq!(r.code, ErrorCode::ValidationFailed, "{body}");
            assert_eq!(r.details[0].field, field, "{body}");
        }
        // The marker this relies on: serde_json's wording for the error.
        let err = serde_json::from_slice::<Value>(b"1e400").unwrap_err();
        assert!(is_number_out_of_range(&err), "{err}");
        // Numbers that fit keep their value, as serde_json reads them.
        let map =
            json_object(br#"{"a":1,"b":-2,"c":1.5,"d":18446744073709551615,"e":null}"#).unwrap();
        let plain: Value =
            serde_json::from_slice(br#"{"a":1,"b":-2,"c":1.5,"d":18446744073709551615,"e":null}"#)
                .unwrap();
        assert_eq!(Value::Object(map), plain);
    }
}
