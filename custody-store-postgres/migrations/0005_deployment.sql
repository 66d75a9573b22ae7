-- The one deployment this database belongs to: the fingerprint of the master seed that derives
-- its addresses (custody-cli seeds::fingerprint, the BSC address at m/44'/60'/0'/0/0). At most
-- one row (id = 1), written once by whichever `init` or command first opens the database; every
-- command then refuses a data dir whose seed has another fingerprint, since two seeds would
-- derive different addresses from the same counters.
CREATE TABLE deployment (
    id               SMALLINT PRIMARY KEY CHECK (id = 1),
    seed_fingerprint TEXT COLLATE "C" NOT NULL,
    bound_at         BIGINT NOT NULL
);
