-- The nonce fence (custody_core::auth::nonce_set; SQLite's 0019). Instances sharing this
-- database record every nonce before answering and keep no fence of their own; the table is
-- here so the store keeps the whole repository contract (a data dir moved from the embedded
-- store keeps its meaning). One row.
CREATE TABLE nonce_fence (
    id     BIGINT  PRIMARY KEY CHECK (id = 1),
    low_s  BIGINT  NOT NULL,
    high_s BIGINT  NOT NULL,
    clean  BOOLEAN NOT NULL
);
