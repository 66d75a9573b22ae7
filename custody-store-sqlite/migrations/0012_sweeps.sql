-- Sweeps and treasury fundings (custody_core::sweep). The record is kept whole as JSON in
-- `body`; the columns the queries and constraints need are beside it.

CREATE TABLE sweeps (
    id          TEXT    PRIMARY KEY,
    network     TEXT    NOT NULL,
    address     TEXT    NOT NULL,
    status      TEXT    NOT NULL CHECK (status IN
                ('planned', 'funding', 'broadcasted', 'confirmed', 'failed')),
    has_transfer INTEGER NOT NULL CHECK (has_transfer IN (0, 1)),
    body        TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
) STRICT;
-- One open sweep per deposit address: a native sweep empties the address, so it must never
-- race a token sweep that needs the address's gas; two planners cannot both sweep it.
CREATE UNIQUE INDEX sweeps_one_open ON sweeps (network, address)
    WHERE status IN ('planned', 'funding', 'broadcasted');
CREATE INDEX sweeps_newest_first ON sweeps (created_at DESC, id DESC);
CREATE INDEX sweeps_by_network ON sweeps (network, status);

CREATE TABLE treasury_fundings (
    id          TEXT    PRIMARY KEY,
    network     TEXT    NOT NULL,
    sweep_id    TEXT    NOT NULL REFERENCES sweeps (id),
    status      TEXT    NOT NULL CHECK (status IN
                ('planned', 'broadcasted', 'confirmed', 'failed')),
    body        TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX treasury_fundings_newest_first ON treasury_fundings (created_at DESC, id DESC);
CREATE INDEX treasury_fundings_by_network ON treasury_fundings (network, status);
