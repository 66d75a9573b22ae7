-- The double-entry ledger and HD wallets. Amounts are decimal TEXT (u128), never INTEGER.

CREATE TABLE ledger_accounts (
    id              TEXT PRIMARY KEY,            -- AccountKey::storage_id()
    debits_posted   TEXT NOT NULL,
    credits_posted  TEXT NOT NULL,
    debits_pending  TEXT NOT NULL,
    credits_pending TEXT NOT NULL
) STRICT, WITHOUT ROWID;

CREATE TABLE ledger_transactions (
    seq            INTEGER PRIMARY KEY AUTOINCREMENT,  -- commit order
    id             TEXT    NOT NULL UNIQUE,
    kind           TEXT    NOT NULL,
    reference_type TEXT    NOT NULL,
    reference_id   TEXT    NOT NULL,
    hold_id        TEXT,
    created_at     INTEGER NOT NULL
) STRICT;
CREATE INDEX ledger_transactions_by_reference ON ledger_transactions (reference_type, reference_id);

CREATE TABLE ledger_entries (
    id                TEXT    PRIMARY KEY,
    tx_seq            INTEGER NOT NULL REFERENCES ledger_transactions (seq),
    idx               INTEGER NOT NULL,
    account_id        TEXT    NOT NULL REFERENCES ledger_accounts (id) DEFERRABLE INITIALLY DEFERRED,
    direction         TEXT    NOT NULL CHECK (direction IN ('debit', 'credit')),
    phase             TEXT    NOT NULL,
    amount            TEXT    NOT NULL,
    balance_after     TEXT,
    -- Set only for rows of a user's history, with the owner copied in for the index.
    history_direction TEXT,
    tenant            TEXT,
    external_user_id  TEXT,
    network           TEXT,
    UNIQUE (tx_seq, idx)
) STRICT;
CREATE INDEX ledger_entries_history
    ON ledger_entries (tenant, external_user_id, network, tx_seq DESC, idx DESC)
    WHERE history_direction IS NOT NULL;

CREATE TABLE ledger_holds (
    id                 TEXT    PRIMARY KEY,
    purpose            TEXT    NOT NULL,
    user_account_id    TEXT    NOT NULL,
    counter_account_id TEXT    NOT NULL,
    amount             TEXT    NOT NULL,
    reference_type     TEXT    NOT NULL,
    reference_id       TEXT    NOT NULL,
    reserve_tx_id      TEXT    NOT NULL,
    created_at         INTEGER NOT NULL,
    state              TEXT    NOT NULL CHECK (state IN ('pending', 'settled', 'released')),
    settled_amount     TEXT,
    finish_tx_id       TEXT,
    finished_at        INTEGER
) STRICT;

CREATE TABLE tenant_accounts (
    tenant     TEXT    PRIMARY KEY,
    account    INTEGER NOT NULL UNIQUE CHECK (account >= 0),
    created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE address_counters (
    tenant     TEXT    NOT NULL,
    network    TEXT    NOT NULL,
    next_index INTEGER NOT NULL,
    PRIMARY KEY (tenant, network)
) STRICT, WITHOUT ROWID;

CREATE TABLE wallets (
    id               TEXT    PRIMARY KEY,
    tenant           TEXT    NOT NULL,
    external_user_id TEXT    NOT NULL,
    network          TEXT    NOT NULL,
    address          TEXT    NOT NULL,
    account          INTEGER NOT NULL,
    address_index    INTEGER NOT NULL,
    created_at       INTEGER NOT NULL,
    UNIQUE (tenant, external_user_id, network),
    UNIQUE (network, address),
    UNIQUE (network, account, address_index)
) STRICT;
