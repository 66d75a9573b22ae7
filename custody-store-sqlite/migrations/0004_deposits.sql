-- Deposits and the scanner's view of each chain.

CREATE TABLE deposits (
    id                     TEXT    PRIMARY KEY,
    tenant                 TEXT    NOT NULL,
    network                TEXT    NOT NULL,
    asset                  TEXT    NOT NULL,
    external_user_id       TEXT    NOT NULL,
    wallet_id              TEXT    NOT NULL REFERENCES wallets (id),
    address                TEXT    NOT NULL,
    tx_hash                TEXT    NOT NULL,
    -- -1 marks a native transfer, so the identity is one UNIQUE constraint.
    log_key                INTEGER NOT NULL,
    from_address           TEXT    NOT NULL,
    amount                 TEXT    NOT NULL,
    block_number           INTEGER,
    block_hash             TEXT,
    confirmations          INTEGER NOT NULL,
    required_confirmations INTEGER NOT NULL,
    status                 TEXT    NOT NULL CHECK (status IN
                           ('detected', 'confirming', 'confirmed', 'credited', 'orphaned', 'reversed')),
    history                TEXT    NOT NULL,
    credit_tx_id           TEXT,
    created_at             INTEGER NOT NULL,
    updated_at             INTEGER NOT NULL,
    UNIQUE (network, tx_hash, log_key)
) STRICT;
CREATE INDEX deposits_by_tenant ON deposits (tenant, created_at DESC);
CREATE INDEX deposits_open ON deposits (network, status, block_number);
CREATE INDEX deposits_by_user ON deposits (tenant, external_user_id, network, asset, status);

CREATE TABLE chain_blocks (
    network     TEXT    NOT NULL,
    number      INTEGER NOT NULL,
    hash        TEXT    NOT NULL,
    parent_hash TEXT    NOT NULL,
    PRIMARY KEY (network, number)
) STRICT, WITHOUT ROWID;

CREATE TABLE chain_cursors (
    network TEXT    PRIMARY KEY,
    number  INTEGER NOT NULL,
    hash    TEXT    NOT NULL
) STRICT;
