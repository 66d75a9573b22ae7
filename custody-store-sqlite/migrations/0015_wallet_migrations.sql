-- Wallet migrations (decisions §13). A wallet can move to a new address under a new account;
-- every address a wallet ever had is a row here, so old addresses stay watched, keep finding
-- their wallet and keep their key path. `seq` is the watch-set position: a moved wallet's new
-- address takes a new one, so scanners that remember the last position they saw pick it up.
CREATE TABLE wallet_addresses (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    wallet_id     TEXT    NOT NULL REFERENCES wallets (id),
    network       TEXT    NOT NULL,
    address       TEXT    NOT NULL,
    account       INTEGER NOT NULL,
    address_index INTEGER NOT NULL,
    retired_at    INTEGER,                -- set when a migration replaced it
    UNIQUE (network, address),
    UNIQUE (network, account, address_index)
) STRICT;
CREATE INDEX wallet_addresses_by_wallet ON wallet_addresses (wallet_id, seq);

-- Existing wallets keep their relative order.
INSERT INTO wallet_addresses (wallet_id, network, address, account, address_index)
    SELECT id, network, address, account, address_index FROM wallets ORDER BY rowid;

CREATE TABLE wallet_migrations (
    seq              INTEGER PRIMARY KEY AUTOINCREMENT,  -- storage order, the listing's tie-break
    id               TEXT    NOT NULL UNIQUE,
    tenant           TEXT    NOT NULL,
    wallet_id        TEXT    NOT NULL REFERENCES wallets (id),
    network          TEXT    NOT NULL,
    external_user_id TEXT    NOT NULL,
    old_address      TEXT    NOT NULL,
    old_account      INTEGER NOT NULL,
    old_index        INTEGER NOT NULL,
    new_address      TEXT    NOT NULL,
    new_account      INTEGER NOT NULL,
    new_index        INTEGER NOT NULL,
    reason           TEXT    NOT NULL,
    status           TEXT    NOT NULL CHECK (status IN ('planned', 'sweeping', 'completed', 'failed')),
    history          TEXT    NOT NULL,    -- JSON array of steps
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
) STRICT;
CREATE INDEX wallet_migrations_newest_first ON wallet_migrations (created_at DESC, seq DESC);
CREATE INDEX wallet_migrations_open ON wallet_migrations (network, created_at)
    WHERE status IN ('planned', 'sweeping');
