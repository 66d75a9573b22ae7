-- /admin/withdrawals lists every tenant's withdrawals newest first.
CREATE INDEX withdrawals_newest_first ON withdrawals (created_at DESC, id DESC);
