-- PIN/OTP attempts per credential (custody_core::auth::second_factor): failures since the last
-- success, the end of a lockout, and the attempts being verified. Kept in the store, and updated
-- before any attempt is verified, so parallel guesses (or several instances) cannot get past the
-- lockout together. Times are Unix milliseconds.

CREATE TABLE second_factor_attempts (
    credential_id   TEXT    PRIMARY KEY REFERENCES credentials (id),
    failures        INTEGER NOT NULL CHECK (failures >= 0),
    locked_until    INTEGER,
    in_flight       INTEGER NOT NULL CHECK (in_flight >= 0),
    in_flight_until INTEGER
) STRICT, WITHOUT ROWID;
