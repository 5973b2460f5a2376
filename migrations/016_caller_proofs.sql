-- pgleader schema, version 16: every SECURITY DEFINER function proves who calls it.
--
-- A successor whose claim finds a scope's row held by the fenced transactions of
-- an ended term records it here (claim_scopes, lease_claim_scopes): which node,
-- for which term, since when. end_fenced acts only for that node, only for that
-- term, and only once the record is a trust window old and committed before the
-- call began: the database, not the caller, says how long the claim has been
-- busy. The collector reads it to name a stalled failover's true cause.

-- +goose Up
CREATE TABLE IF NOT EXISTS pgleader.fence_waits (
    scope   text PRIMARY KEY,
    node_id text NOT NULL,                         -- the claimer whose claim found the row busy
    epoch   bigint NOT NULL,                       -- the ended term whose fenced transactions hold the row
    since   timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- await_release's proof (a registered node of the caller's login) is one probe.
CREATE INDEX IF NOT EXISTS nodes_login_role_idx ON pgleader.nodes (login_role) WHERE stopped_at IS NULL;
