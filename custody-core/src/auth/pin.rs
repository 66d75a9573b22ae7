//! PINs are stored as Argon2id hashes and checked in constant time by the argon2 crate.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;

pub const PIN_CHARS_MIN: usize = 4;
pub const PIN_CHARS_MAX: usize = 64;

/// Hashes `pin` with a 16-byte random `salt`.
pub fn hash_pin(pin: &str, salt: &[u8; 16]) -> Result<String, String> {
    let n = pin.chars().count();
    if !(PIN_CHARS_MIN..=PIN_CHARS_MAX).contains(&n) {
        return Err(format!(
            "a PIN must be {PIN_CHARS_MIN} to {PIN_CHARS_MAX} characters"
        ));
    }
    let salt = SaltString::encode_b64(salt).map_err(|e| e.to_string())?;
    Argon2::default()
        .hash_password(pin.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| e.to_string())
}

pub fn verify_pin(pin: &str, phc: &str) -> bool {
    PasswordHash::new(phc)
        .map(|h| {
            Argon2::default()
                .verify_password(pin.as_bytes(), &h)
                .is_ok()
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verifies_only_the_right_pin() {
        let h = hash_pin("2468", &[7u8; 16]).unwrap();
        assert!(h.starts_with("$argon2id$"));
        assert!(verify_pin("2468", &h));
        assert!(!verify_pin("2469", &h));
        assert!(hash_pin("12", &[0u8; 16]).is_err());
    }
}
