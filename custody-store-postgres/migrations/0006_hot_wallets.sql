-- Hot wallet rotation (custody_core::wallet::hot; SQLite's 0028). Each rotation records the
-- network's new hot wallet (an account of the global allocator, under the newest seed) as
-- `active` and the one it replaces as `retired`; a network without a row uses generation 0's
-- hot wallet. Accounts are taken from `tenant_accounts` under a label no tenant id can be
-- ('hot-wallet:<NETWORK>:<id>'), so the allocator never hands a hot wallet's account to a tenant.
CREATE TABLE hot_wallets (
    network    TEXT COLLATE "C" NOT NULL,
    address    TEXT COLLATE "C" NOT NULL,
    account    BIGINT NOT NULL CHECK (account >= 0),
    idx        BIGINT NOT NULL CHECK (idx >= 0),
    status     TEXT COLLATE "C" NOT NULL CHECK (status IN ('active', 'retired')),
    rotated_by TEXT COLLATE "C" NOT NULL,
    reason     TEXT COLLATE "C" NOT NULL,
    created_at BIGINT NOT NULL,
    retired_at BIGINT,
    PRIMARY KEY (network, address)
);
-- One active hot wallet per network: two rotations racing cannot both win.
CREATE UNIQUE INDEX hot_wallets_one_active ON hot_wallets (network) WHERE status = 'active';

-- A drain of a retired hot wallet is a treasury funding that pays no sweep.
ALTER TABLE treasury_fundings ALTER COLUMN sweep_id DROP NOT NULL;
