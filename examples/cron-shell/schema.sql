-- The nightly job's table: one row per report written.
CREATE TABLE IF NOT EXISTS nightly_reports (
    id       bigserial PRIMARY KEY,
    scope    text NOT NULL,
    run_key  text NOT NULL,        -- the day, as pgleader run names it (PGLEADER_RUN_KEY)
    epoch    bigint NOT NULL,      -- the term that wrote it (PGLEADER_EPOCH)
    node     text NOT NULL,        -- the host (PGLEADER_NODE_ID)
    sessions bigint NOT NULL,      -- what the report sums up
    at       timestamptz NOT NULL DEFAULT clock_timestamp()
);
