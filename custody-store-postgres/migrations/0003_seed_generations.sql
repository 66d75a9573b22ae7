-- Seeds imported by a wallet migration to a new seed (custody_core::wallet::seeds; SQLite's
-- 0018). Generation 0 is seed.json; each row serves every account from `first_account` on
-- (accounts only grow), its mnemonic sealed with the data dir's key like seed.json's.
CREATE TABLE seed_generations (
    generation      BIGINT PRIMARY KEY CHECK (generation >= 1),
    first_account   BIGINT NOT NULL UNIQUE,
    sealed_mnemonic BYTEA  NOT NULL,
    fingerprint     TEXT COLLATE "C" NOT NULL UNIQUE,
    created_at      BIGINT NOT NULL
);
