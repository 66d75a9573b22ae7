-- Hot wallet rotation (custody_core::wallet::hot). Each rotation records the network's new hot
-- wallet (an account of the global allocator, under the newest seed) as `active` and the one it
-- replaces as `retired`; a network without a row uses generation 0's hot wallet. Accounts are
-- taken from `tenant_accounts` under a label no tenant id can be ('hot-wallet:<NETWORK>:<id>'),
-- so that the allocator never hands a hot wallet's account to a tenant.
CREATE TABLE hot_wallets (
    network    TEXT    NOT NULL,
    address    TEXT    NOT NULL,
    account    INTEGER NOT NULL CHECK (account >= 0),
    idx        INTEGER NOT NULL CHECK (idx >= 0),
    status     TEXT    NOT NULL CHECK (status = 'active' OR status = 'retired'),
    rotated_by TEXT    NOT NULL,
    reason     TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    retired_at INTEGER,
    PRIMARY KEY (network, address)
) STRICT;
-- One active hot wallet per network: two rotations racing cannot both win.
CREATE UNIQUE INDEX hot_wallets_one_active ON hot_wallets (network) WHERE status = 'active';

-- A drain of a retired hot wallet is a treasury funding that pays no sweep: `sweep_id` becomes
-- optional. SQLite cannot drop a NOT NULL in place, so the table is copied (no table refers to
-- it).
CREATE TABLE treasury_fundings_0028 (
    id          TEXT    PRIMARY KEY,
    network     TEXT    NOT NULL,
    sweep_id    TEXT    REFERENCES sweeps (id),
    status      TEXT    NOT NULL CHECK (status IN
                ('planned', 'broadcasted', 'confirmed', 'failed')),
    body        TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
) STRICT;
INSERT INTO treasury_fundings_0028 (id, network, sweep_id, status, body, created_at, updated_at)
    SELECT id, network, sweep_id, status, body, created_at, updated_at FROM treasury_fundings;
DROP TABLE treasury_fundings;
ALTER TABLE treasury_fundings_0028 RENAME TO treasury_fundings;
CREATE INDEX treasury_fundings_newest_first ON treasury_fundings (created_at DESC, id DESC);
CREATE INDEX treasury_fundings_by_network ON treasury_fundings (network, status);
