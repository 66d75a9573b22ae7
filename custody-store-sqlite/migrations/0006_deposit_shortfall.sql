-- What a user owes after a reorganization reversed a deposit they had already spent (units of
-- the deposit's asset, TEXT like every amount). '0' for every deposit written before.

ALTER TABLE deposits ADD COLUMN shortfall TEXT NOT NULL DEFAULT '0';
CREATE INDEX deposits_owing ON deposits (tenant, external_user_id, network, asset)
    WHERE shortfall <> '0';
