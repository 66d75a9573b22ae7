-- Outgoing transactions of the engine (custody_core::outgoing) and the nonce allocator of EVM
-- senders. What a transaction is (purpose, sender, payment, nonce) is fixed at insert; its
-- attempts (exact signed bytes and hashes) and history only grow, as JSON.

CREATE TABLE outgoing_txs (
    id             TEXT    PRIMARY KEY,
    network        TEXT    NOT NULL,
    purpose        TEXT    NOT NULL,
    reference_id   TEXT    NOT NULL,
    from_address   TEXT    NOT NULL,
    from_account   INTEGER NOT NULL,
    from_index     INTEGER NOT NULL,
    payment        TEXT    NOT NULL,
    nonce          INTEGER,
    status         TEXT    NOT NULL CHECK (status IN
                   ('built', 'signed', 'sent', 'included', 'final', 'failed')),
    attempts       TEXT    NOT NULL,
    included       TEXT,
    failure_reason TEXT,
    history        TEXT    NOT NULL,
    next_check_at  INTEGER NOT NULL,
    leased_until   INTEGER,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    -- One payment per record that pays: a second one for the same withdrawal cannot exist.
    UNIQUE (purpose, reference_id),
    -- A nonce is used by one transaction of its sender (NULL on TRON: no nonces).
    UNIQUE (network, from_address, nonce)
) STRICT;
CREATE INDEX outgoing_due ON outgoing_txs (network, status, next_check_at);
CREATE INDEX outgoing_by_sender ON outgoing_txs (network, from_address, status);

CREATE TABLE outgoing_nonces (
    network    TEXT    NOT NULL,
    address    TEXT    NOT NULL,
    next_nonce INTEGER NOT NULL CHECK (next_nonce >= 0),
    PRIMARY KEY (network, address)
) STRICT, WITHOUT ROWID;
