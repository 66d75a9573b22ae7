-- Two indexes of the outbox that no query needs: the deliverer claims through
-- outbox_due_by_tenant, listings page through outbox_newest_first (which serves a range on
-- created_at in either direction), and the count by status scans outbox_due_by_tenant grouped
-- by tenant. Every event wrote them: two b-trees fewer per event, four per internal transfer
-- (two balance.updated events).
DROP INDEX outbox_due;
DROP INDEX outbox_by_time;
