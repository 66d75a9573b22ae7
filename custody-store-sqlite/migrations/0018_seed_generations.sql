-- Seeds imported by a wallet migration to a new seed (custody_core::wallet::seeds). Generation
-- 0 is seed.json; each row here serves every account from `first_account` on (accounts only
-- grow), its mnemonic sealed with the data dir's key like seed.json's.
CREATE TABLE seed_generations (
    generation      INTEGER PRIMARY KEY CHECK (generation >= 1),
    first_account   INTEGER NOT NULL UNIQUE,
    sealed_mnemonic BLOB    NOT NULL,
    fingerprint     TEXT    NOT NULL UNIQUE,
    created_at      INTEGER NOT NULL
) STRICT;
