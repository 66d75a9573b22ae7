-- Withdrawal quotes (single use) and withdrawals. Costs and the quoted rate are JSON of
-- `*_units` strings; amounts are TEXT.

CREATE TABLE withdrawal_quotes (
    id                  TEXT    PRIMARY KEY,
    tenant              TEXT    NOT NULL,
    external_user_id    TEXT    NOT NULL,
    network             TEXT    NOT NULL,
    asset               TEXT    NOT NULL,
    destination_address TEXT    NOT NULL,
    amount              TEXT    NOT NULL,
    costs               TEXT    NOT NULL,
    network_native      TEXT    NOT NULL,
    rate                TEXT    NOT NULL,
    created_at          INTEGER NOT NULL,
    expires_at          INTEGER NOT NULL,
    used_at             INTEGER
) STRICT;

CREATE TABLE withdrawals (
    id                        TEXT    PRIMARY KEY,
    tenant                    TEXT    NOT NULL,
    -- One withdrawal per quote, by constraint.
    quote_id                  TEXT    NOT NULL UNIQUE REFERENCES withdrawal_quotes (id),
    external_user_id          TEXT    NOT NULL,
    network                   TEXT    NOT NULL,
    asset                     TEXT    NOT NULL,
    destination_address       TEXT    NOT NULL,
    amount                    TEXT    NOT NULL,
    costs                     TEXT    NOT NULL,
    rate                      TEXT    NOT NULL,
    status                    TEXT    NOT NULL CHECK (status IN
                              ('reserved', 'broadcasted', 'confirmed', 'failed')),
    hold_id                   TEXT    NOT NULL,
    outgoing_id               TEXT    NOT NULL,
    tx_hash                   TEXT,
    block_number              INTEGER,
    confirmations             INTEGER NOT NULL,
    actual_network_cost_units TEXT,
    failure_reason            TEXT,
    history                   TEXT    NOT NULL,
    created_at                INTEGER NOT NULL,
    updated_at                INTEGER NOT NULL
) STRICT;
CREATE INDEX withdrawals_by_tenant ON withdrawals (tenant, created_at DESC);
