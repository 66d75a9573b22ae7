//! RFC 6238 TOTP: HMAC-SHA1, 30 s steps, 6 digits, one step of drift either way.

use hmac::{Hmac, Mac};
use sha1::Sha1;
use subtle::ConstantTimeEq;

pub const STEP_S: i64 = 30;
pub const DIGITS: u32 = 6;

/// The code for a given time step (RFC 4226 dynamic truncation).
pub fn code_at_step(key: &[u8], step: i64, digits: u32) -> String {
    let mut mac = Hmac::<Sha1>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(&step.to_be_bytes());
    let h = mac.finalize().into_bytes();
    let offset = usize::from(h[19] & 0x0f);
    let bin = (u32::from(h[offset] & 0x7f) << 24)
        | (u32::from(h[offset + 1]) << 16)
        | (u32::from(h[offset + 2]) << 8)
        | u32::from(h[offset + 3]);
    let code = bin % 10u32.pow(digits);
    format!("{code:0width$}", width = digits as usize)
}

/// The step a presented code matches at `now_s` (±1 step), if any. The caller must then record
/// the step so the same code is not accepted twice.
pub fn matching_step(key: &[u8], code: &str, now_s: i64) -> Option<i64> {
    if code.len() != DIGITS as usize || !code.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let current = now_s.div_euclid(STEP_S);
    [current - 1, current, current + 1]
        .into_iter()
        .find(|&step| {
            bool::from(
                code_at_step(key, step, DIGITS)
                    .as_bytes()
                    .ct_eq(code.as_bytes()),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 6238 appendix B, SHA-1 rows (8 digits).
    #[test]
    fn rfc6238_vectors() {
        let key = b"12345678901234567890";
        for (t, want) in [
            (59i64, "94287082"),
            (1_111_111_109, "07081804"),
            (1_111_111_111, "14050471"),
            (1_234_567_890, "89005924"),
            (2_000_000_000, "69279037"),
            (20_000_000_000, "65353130"),
        ] {
            assert_eq!(code_at_step(key, t / 30, 8), want, "t={t}");
        }
    }

    #[test]
    fn accepts_one_step_of_drift_only() {
        let key = b"12345678901234567890";
        let now = 1_234_567_890;
        let code = code_at_step(key, now / 30 - 1, 6);
        assert_eq!(matching_step(key, &code, now), Some(now / 30 - 1));
        let old = code_at_step(key, now / 30 - 2, 6);
        assert_eq!(matching_step(key, &old, now), None);
        assert_eq!(matching_step(key, "12345", now), None);
    }
}
