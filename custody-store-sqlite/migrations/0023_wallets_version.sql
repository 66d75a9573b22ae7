-- Changes whenever what a stored wallet reads as can change, by any process (`custody wallets
-- migrate` included): its row updated or removed, an entry of its address log changed or
-- removed, or one inserted already retired (a retired address is one of its previous
-- addresses). Readers keep the wallets they read with this number, read in the same snapshot,
-- and answer from memory while a snapshot finds it unchanged (`crate::wallet_cache`). A new
-- wallet, and the current address logged with it, leave it alone: nothing kept is stale by them.
-- An insert that clashes with a row it could replace (INSERT OR REPLACE, from any tool: SQLite
-- fires no delete trigger for a REPLACE unless recursive_triggers is on) raises it first.
-- A migration that rebuilds either table must create these triggers again.
CREATE TABLE wallets_version (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    n INTEGER NOT NULL
);
INSERT INTO wallets_version (id, n) VALUES (1, 0);
CREATE TRIGGER wallets_version_wallet_replace BEFORE INSERT ON wallets
WHEN EXISTS (
    SELECT 1 FROM wallets
    WHERE id = NEW.id
       OR (tenant = NEW.tenant AND external_user_id = NEW.external_user_id
           AND network = NEW.network)
       OR (network = NEW.network AND address = NEW.address)
       OR (network = NEW.network AND account = NEW.account AND address_index = NEW.address_index)
)
BEGIN
    UPDATE wallets_version SET n = n + 1 WHERE id = 1;
END;
CREATE TRIGGER wallets_version_address_replace BEFORE INSERT ON wallet_addresses
WHEN EXISTS (
    SELECT 1 FROM wallet_addresses
    WHERE seq = NEW.seq
       OR (network = NEW.network AND address = NEW.address)
       OR (network = NEW.network AND account = NEW.account AND address_index = NEW.address_index)
)
BEGIN
    UPDATE wallets_version SET n = n + 1 WHERE id = 1;
END;
CREATE TRIGGER wallets_version_wallet_update AFTER UPDATE ON wallets
BEGIN
    UPDATE wallets_version SET n = n + 1 WHERE id = 1;
END;
CREATE TRIGGER wallets_version_wallet_delete AFTER DELETE ON wallets
BEGIN
    UPDATE wallets_version SET n = n + 1 WHERE id = 1;
END;
CREATE TRIGGER wallets_version_address_insert AFTER INSERT ON wallet_addresses
WHEN NEW.retired_at IS NOT NULL
BEGIN
    UPDATE wallets_version SET n = n + 1 WHERE id = 1;
END;
CREATE TRIGGER wallets_version_address_update AFTER UPDATE ON wallet_addresses
BEGIN
    UPDATE wallets_version SET n = n + 1 WHERE id = 1;
END;
CREATE TRIGGER wallets_version_address_delete AFTER DELETE ON wallet_addresses
BEGIN
    UPDATE wallets_version SET n = n + 1 WHERE id = 1;
END;
