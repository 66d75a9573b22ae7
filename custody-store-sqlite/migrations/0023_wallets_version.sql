-- Changes whenever what a stored wallet reads as can change, by any process (`custody wallets
-- migrate` included): its row updated or removed, an entry of its address log changed or
-- removed, or one inserted already retired (a retired address is one of its previous
-- addresses). Readers keep the wallets they read with this number, read in the same snapshot,
-- and answer from memory while a snapshot finds it unchanged (`crate::wallet_cache`). A new
-- wallet, and the current address logged with it, leave it alone: nothing kept is stale by them.
CREATE TABLE wallets_version (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    n INTEGER NOT NULL
);
INSERT INTO wallets_version (id, n) VALUES (1, 0);
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
