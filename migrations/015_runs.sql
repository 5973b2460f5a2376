-- pgleader schema, version 15: runs of `pgleader run --once-per`.
--
-- A scheduled job that must run once per period, on whichever host's cron wins,
-- records each run here under the scope's fence: run_begin (functions/run_begin.sql)
-- answers whether a run of the current period already completed, on any host,
-- and records this one as started; run_end records its exit code. A run that
-- failed or never ended (its host died) does not complete the period: the next
-- host may run it again.

-- +goose Up
CREATE TABLE IF NOT EXISTS pgleader.runs (
    id         bigserial PRIMARY KEY,
    scope      text NOT NULL,
    run_key    text NOT NULL,         -- the period ("2026-11-27T00:00:00Z/24h") or the caller's key
    epoch      bigint NOT NULL,       -- the term that ran it
    holder     text NOT NULL,         -- that term's holder, as leader_state says (never the caller)
    started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    ended_at   timestamptz,
    exit_code  int,                   -- NULL while running, or when its host died
    UNIQUE (scope, run_key, epoch)
);
CREATE INDEX IF NOT EXISTS runs_scope_key_idx ON pgleader.runs (scope, run_key) WHERE exit_code = 0;

-- What a node supervises (pgleader run): the command's name (never its
-- arguments), the child's pid and state, restarts. NULL for a plain node.
-- Written by node_supervisor (functions/node_supervisor.sql) from the node's own
-- login; read by status, top and the exporter.
ALTER TABLE pgleader.nodes ADD COLUMN IF NOT EXISTS supervisor jsonb;
