-- Swap quotes (single use), swaps, and the router allowances the hot wallet granted. What a
-- quote or swap is (assets, amounts, route, costs, rate) is fixed at insert and kept as JSON in
-- `body`; a swap's state is in its own columns. Amounts are TEXT.

CREATE TABLE swap_quotes (
    id               TEXT    PRIMARY KEY,
    tenant           TEXT    NOT NULL,
    external_user_id TEXT    NOT NULL,
    body             TEXT    NOT NULL,
    created_at       INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL,
    used_at          INTEGER
) STRICT;

CREATE TABLE swaps (
    id                        TEXT    PRIMARY KEY,
    tenant                    TEXT    NOT NULL,
    -- One swap per quote, by constraint.
    quote_id                  TEXT    NOT NULL UNIQUE REFERENCES swap_quotes (id),
    external_user_id          TEXT    NOT NULL,
    body                      TEXT    NOT NULL,
    status                    TEXT    NOT NULL CHECK (status IN
                              ('reserved', 'broadcasted', 'confirmed', 'failed')),
    tx_hash                   TEXT,
    block_number              INTEGER,
    actual_amount_in          TEXT,
    actual_amount_out         TEXT,
    actual_network_cost_units TEXT,
    failure_reason            TEXT,
    history                   TEXT    NOT NULL,
    created_at                INTEGER NOT NULL,
    updated_at                INTEGER NOT NULL
) STRICT;
CREATE INDEX swaps_newest_first ON swaps (created_at DESC, id DESC);
CREATE INDEX swaps_by_tenant ON swaps (tenant, created_at DESC);

-- Addresses lowercase, so that one allowance has one row whatever the case it was named in.
CREATE TABLE router_allowances (
    network              TEXT NOT NULL,
    owner                TEXT NOT NULL,
    token                TEXT NOT NULL,
    spender              TEXT NOT NULL,
    remaining            TEXT NOT NULL,
    approval_outgoing_id TEXT NOT NULL,
    PRIMARY KEY (network, owner, token, spender)
) STRICT, WITHOUT ROWID;
