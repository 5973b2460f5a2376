-- The submission manager's tables.
CREATE TABLE IF NOT EXISTS submissions (
    id          bigserial PRIMARY KEY,
    payload     text NOT NULL,
    accepted_by text NOT NULL,                 -- the replica that took it in
    accepted_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    done_at     timestamptz,
    done_epoch  bigint,                         -- the term that executed it
    done_by     text
);
CREATE INDEX IF NOT EXISTS submissions_pending ON submissions (id) WHERE done_at IS NULL;
-- One row per execution: exactly one per submission, if all is well.
CREATE TABLE IF NOT EXISTS executions (
    submission_id bigint NOT NULL,
    epoch         bigint NOT NULL,
    node          text NOT NULL,
    at            timestamptz NOT NULL DEFAULT clock_timestamp()
);
