-- An alert an operator has acknowledged (POST /admin/alerts/{id}/ack) no longer counts as open;
-- who and when stay on the row, the reason is in the audit record.
ALTER TABLE alerts ADD COLUMN acknowledged_at INTEGER;
ALTER TABLE alerts ADD COLUMN acknowledged_by TEXT;
-- The open count of the dashboard and of every request to it.
CREATE INDEX alerts_open ON alerts (created_at) WHERE acknowledged_at IS NULL;

-- Admin listings page by a keyset on (created_at, id) descending (decisions §14): these tables
-- had an index on created_at alone, which leaves the tie-break on id to a sort.
CREATE INDEX audit_newest_first ON audit (created_at DESC, id DESC);
CREATE INDEX alerts_newest_first ON alerts (created_at DESC, id DESC);
CREATE INDEX outbox_newest_first ON outbox (created_at DESC, id DESC);
CREATE INDEX reconciliations_newest_first ON reconciliations (created_at DESC, id DESC);
CREATE INDEX ledger_transactions_newest_first ON ledger_transactions (created_at DESC, id DESC);
