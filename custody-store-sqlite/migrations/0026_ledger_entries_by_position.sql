-- Ledger entries are kept in one b-tree keyed by their position, (tx_seq, idx), which appends.
-- Their ids are UUIDv8 hashes of the transaction id and the position (core `entry_id`), so the
-- unique index on id that `id TEXT PRIMARY KEY` made took every entry on a random page: at a
-- group commit of forty transfers, seventy-odd of its ~180 WAL frames were that index's pages.
-- No query looks an entry up by id, and ids need no index to stay unique: the store refuses an
-- id that is not the derived one (core `check_entry_ids`), and transaction ids are unique. The
-- rowid table and its index on (tx_seq, idx) become the one WITHOUT ROWID table; rows arrive
-- in key order and are usually a few hundred bytes (up to about 1 KB with the longest user ids,
-- which SQLite then spills to an overflow page: correct, only slower).
CREATE TABLE ledger_entries_by_position (
    tx_seq            INTEGER NOT NULL REFERENCES ledger_transactions (seq),
    idx               INTEGER NOT NULL,
    id                TEXT    NOT NULL,
    account_id        TEXT    NOT NULL REFERENCES ledger_accounts (id) DEFERRABLE INITIALLY DEFERRED,
    direction         TEXT    NOT NULL CHECK (direction = 'debit' OR direction = 'credit'),
    phase             TEXT    NOT NULL,
    amount            TEXT    NOT NULL,
    balance_after     TEXT,
    -- Set only for rows of a user's history, with the owner copied in for the index.
    history_direction TEXT,
    tenant            TEXT,
    external_user_id  TEXT,
    network           TEXT,
    PRIMARY KEY (tx_seq, idx)
) STRICT, WITHOUT ROWID;
INSERT INTO ledger_entries_by_position (tx_seq, idx, id, account_id, direction, phase, amount,
        balance_after, history_direction, tenant, external_user_id, network)
    SELECT tx_seq, idx, id, account_id, direction, phase, amount,
        balance_after, history_direction, tenant, external_user_id, network
    FROM ledger_entries ORDER BY tx_seq, idx;
DROP TABLE ledger_entries;
ALTER TABLE ledger_entries_by_position RENAME TO ledger_entries;
CREATE INDEX ledger_entries_history
    ON ledger_entries (tenant, external_user_id, network, tx_seq DESC, idx DESC)
    WHERE history_direction IS NOT NULL;
