-- Rate-limit windows shared by every instance on this database (decisions §16: a credential's
-- limit holds across instances). One row per credential and 60 s window, counted with one
-- atomic upsert per request; windows before the previous one are deleted as time moves on.
CREATE TABLE rate_windows (
    credential_id TEXT COLLATE "C" NOT NULL,
    window_number BIGINT NOT NULL,
    used          BIGINT NOT NULL CHECK (used >= 0),
    PRIMARY KEY (credential_id, window_number)
);
