-- Nonces are allocated when a transaction's first attempt is signed (set once, from NULL), so
-- a payment that waits holds none; `after_id` orders a sender's transactions that must go out
-- in sequence (a router approval before its swap).
ALTER TABLE outgoing_txs ADD COLUMN after_id TEXT;

-- Every attempt's hash belongs to one outgoing transaction of its network: two payments that
-- came out as the same bytes (TRON builds from chain facts) must never both count one
-- inclusion as theirs.
CREATE TABLE outgoing_attempt_hashes (
    network     TEXT NOT NULL,
    hash        TEXT NOT NULL,
    outgoing_id TEXT NOT NULL,
    PRIMARY KEY (network, hash)
) STRICT, WITHOUT ROWID;

INSERT INTO outgoing_attempt_hashes (network, hash, outgoing_id)
    SELECT o.network, json_extract(a.value, '$.hash'), o.id
    FROM outgoing_txs AS o, json_each(o.attempts) AS a
    WHERE true
    ON CONFLICT DO NOTHING;
