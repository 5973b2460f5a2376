-- The worker's table: one row per fenced write.
CREATE TABLE IF NOT EXISTS worker_writes (
    id    bigserial PRIMARY KEY,
    scope text NOT NULL,
    epoch bigint NOT NULL,     -- the term that wrote it (PGLEADER_EPOCH)
    node  text NOT NULL,       -- PGLEADER_NODE_ID
    pid   int NOT NULL,        -- the worker process
    seq   bigint NOT NULL,     -- its n-th write
    at    timestamptz NOT NULL DEFAULT clock_timestamp()
);
