-- A user's pending deposits (the statuses a balance counts as pending), with the columns a
-- balance read sums and the status its condition reads (or every row is read again from the
-- table): one seek of this index answers every asset of a network, where
-- deposits_by_user took one seek per asset and pending status (nine for three assets, about a
-- tenth of a balances read). Partial, so it holds only the deposits still pending: a deposit
-- leaves it when it is credited or dropped. The condition is written as comparisons, as the
-- statement that reads it repeats it (an IN list would build a temporary b-tree at every run);
-- the store's test checks it names exactly the core's pending statuses.
CREATE INDEX deposits_pending_by_user
    ON deposits (tenant, external_user_id, network, asset, amount, status)
    WHERE status = 'detected' OR status = 'confirming' OR status = 'confirmed';
