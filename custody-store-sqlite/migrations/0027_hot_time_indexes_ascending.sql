-- The admin listings' indexes on the two tables every internal transfer writes, built
-- ascending. A new row has the largest (created_at, id) (ids are UUIDv7), so in a descending
-- index it lands on the leftmost leaf, and each split there leaves half-full pages behind (half
-- the index's pages were empty space, against about a tenth for an ascending index filled at its
-- right edge), so a group commit wrote more of its pages. SQLite scans an index backwards for
-- ORDER BY created_at DESC, id DESC, so the listings' plans are unchanged (no sort). The audit,
-- alerts and reconciliations tables keep their descending indexes: they are written rarely.
DROP INDEX outbox_newest_first;
CREATE INDEX outbox_by_time ON outbox (created_at, id);
DROP INDEX ledger_transactions_newest_first;
CREATE INDEX ledger_transactions_by_time ON ledger_transactions (created_at, id);
