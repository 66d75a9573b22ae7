-- Operator alerts and the kill-switch / maintenance controls.

CREATE TABLE alerts (
    id             TEXT    PRIMARY KEY,
    kind           TEXT    NOT NULL,
    severity       TEXT    NOT NULL CHECK (severity IN ('warning', 'critical')),
    message        TEXT    NOT NULL,
    reference_type TEXT,
    reference_id   TEXT,
    created_at     INTEGER NOT NULL,
    resolved_at    INTEGER
) STRICT;
CREATE INDEX alerts_by_time ON alerts (created_at);

CREATE TABLE controls (
    control_key TEXT    PRIMARY KEY,
    enabled     INTEGER NOT NULL CHECK (enabled IN (0, 1)),
    reason      TEXT    NOT NULL,
    updated_by  TEXT    NOT NULL,
    updated_at  INTEGER NOT NULL
) STRICT;
