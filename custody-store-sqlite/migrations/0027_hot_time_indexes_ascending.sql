-- The admin listings' indexes on the two tables every internal transfer writes, built
-- ascending. A new row has the largest (created_at, id) (ids are UUIDv7), so in a descending
-- index it lands on the leftmost leaf: SQLite splits that leaf through its general balancing,
-- which leaves half-full pages and rewrites siblings, where an ascending index appends to its
-- rightmost leaf through the quick path. SQLite scans an index backwards for ORDER BY
-- created_at DESC, id DESC, so the listings' plans are unchanged (no sort). The audit, alerts and
-- reconciliations tables keep their descending indexes: they are written rarely.
DROP INDEX outbox_newest_first;
CREATE INDEX outbox_by_time ON outbox (created_at, id);
DROP INDEX ledger_transactions_newest_first;
CREATE INDEX ledger_transactions_by_time ON ledger_transactions (created_at, id);
