-- pgleader schema, baseline at version 12: the tables, their data and the
-- publication, as versions 1 to 12 left them. The functions, the trigger
-- definitions and the views live in functions/ and views/, one file each, and
-- `pgleader migrate` applies them after the numbered files (Up in package
-- migrate); the privileges follow (pgleader.apply_privileges()).
--
-- A fresh database gets this file; a database at version 12 skips it (goose
-- records versions 1 to 12 there); a database below version 12 is refused: it
-- upgrades through the release that introduced version 12 first (the upgrade
-- policy, README).
--
-- Names here are a contract relied on by the collector, the dashboard and
-- external checks (docs/design.md): add columns freely, rename nothing. Column
-- order is the order in which versions 1 to 12 added them, so that a fresh
-- install and an upgraded database have the same schema (TestFreshInstallEqualsUpgrade).
--
-- Safety lives in the database, not only in the Go client:
--   S1  the epoch of a scope increases by exactly one per grant (a claim, under
--       FOR UPDATE) and the claim commits with synchronous_commit = on;
--   S2  a claim verifies that the *calling backend* holds the scope's advisory
--       lock; writing the table directly does not make anyone leader;
--   S3  fence() locks the scope's row inside the caller's transaction: a claim
--       waits for it, and a write that arrives after a bump fails with PLF01.

-- +goose Up
CREATE SCHEMA IF NOT EXISTS pgleader;

-- One row per scope: its current term. fillfactor 20 keeps heartbeat updates HOT.
CREATE TABLE IF NOT EXISTS pgleader.leader_state (
    scope                  text PRIMARY KEY CHECK (scope <> '' AND octet_length(scope) <= 200),
    lock_key               bigint NOT NULL UNIQUE,
    epoch                  bigint NOT NULL DEFAULT 0 CHECK (epoch >= 0),
    holder                 text,        -- node_id of the current holder; NULL when released
    holder_pid             int,         -- backend pid of the holder's leadership session
    holder_guard_key       bigint,      -- advisory key the holder's process keeps while alive
    unresolved_guards      bigint[] NOT NULL DEFAULT '{}',
    unresolved_trust_ms    int NOT NULL DEFAULT 0, -- the largest trust window among them
    acquired_at            timestamptz,
    released_at            timestamptz, -- set by a clean release; NULL while a term is open
    last_heartbeat         timestamptz,
    heartbeat_interval_ms  int,
    heartbeat_timeout_ms   int,
    trust_window_ms        int,
    session_lease_ms       int,
    resign_requested_epoch bigint,
    resign_requested_by    text,
    resign_requested_role  text,
    handover_to            text,
    handover_epoch         bigint,
    handover_deadline      timestamptz,
    handover_by            text,
    last_holder            text,        -- the holder of the last clean release
    cooldown_until         timestamptz, -- until when last_holder does not campaign again
    deferred_since         timestamptz,
    retired_at             timestamptz,
    retired_by             text,
    mode                   text NOT NULL DEFAULT 'lock' CONSTRAINT leader_state_mode_check CHECK (mode IN ('lock', 'lease')),
    lease_seq              bigint NOT NULL DEFAULT 0,
    failback_not_before    timestamptz
) WITH (fillfactor = 20, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);

-- One row per node ever registered.
CREATE TABLE IF NOT EXISTS pgleader.nodes (
    node_id               text PRIMARY KEY,
    hostname              text NOT NULL,
    os_pid                int NOT NULL,
    version               text NOT NULL,
    started_at            timestamptz NOT NULL DEFAULT now(),
    last_seen             timestamptz NOT NULL DEFAULT now(),
    stopped_at            timestamptz,
    backend_pid           int,                          -- leadership session backend
    scopes                text[] NOT NULL DEFAULT '{}', -- scopes it is a candidate for
    leads                 text[] NOT NULL DEFAULT '{}', -- scopes it currently leads
    heartbeat_interval_ms int,
    trust_window_ms       int,
    session_lease_ms      int,
    beacon_key            bigint,
    guard_key             bigint,
    login_role            text,                         -- session_user that registered it
    priority              int NOT NULL DEFAULT 1 CONSTRAINT nodes_priority_check CHECK (priority >= 0),
    resign_cooldown_ms    int,
    mode                  text NOT NULL DEFAULT 'lock' CONSTRAINT nodes_mode_check CHECK (mode IN ('lock', 'lease')),
    lease_token           bigint,                       -- a secret: no role but the owner reads it
    registered_at         timestamptz,
    failback_after_ms     int,
    CONSTRAINT nodes_failback_check CHECK (failback_after_ms IS NULL OR (failback_after_ms > 0 AND priority >= 1))
);
CREATE INDEX IF NOT EXISTS nodes_last_seen_idx ON pgleader.nodes (last_seen);

-- Every term of every scope: the leadership history.
CREATE TABLE IF NOT EXISTS pgleader.terms (
    id             bigserial PRIMARY KEY,
    scope          text NOT NULL,
    epoch          bigint NOT NULL,
    holder         text NOT NULL,
    hostname       text,
    holder_pid     int,
    acquired_at    timestamptz NOT NULL,
    released_at    timestamptz,
    release_reason text CONSTRAINT terms_release_reason_check CHECK (release_reason IN
        ('resigned', 'shutdown', 'handed_over', 'lost_connection', 'heartbeat_timeout', 'evicted', 'crashed')),
    handover_gap   interval,   -- acquired_at minus the predecessor's release (or last heartbeat)
    handed_to      text,
    UNIQUE (scope, epoch)
);
CREATE INDEX IF NOT EXISTS terms_scope_acquired_idx ON pgleader.terms (scope, acquired_at);

-- Append-only (trigger audit_append_only): who did what, attributed by the server.
CREATE TABLE IF NOT EXISTS pgleader.audit (
    id           bigserial PRIMARY KEY,
    at           timestamptz NOT NULL DEFAULT clock_timestamp(),
    scope        text,
    node_id      text,
    epoch        bigint,
    kind         text NOT NULL,
    detail       jsonb NOT NULL DEFAULT '{}',
    session_role text DEFAULT session_user,
    client_addr  inet DEFAULT inet_client_addr()
);
CREATE INDEX IF NOT EXISTS audit_at_idx ON pgleader.audit (at);
CREATE INDEX IF NOT EXISTS audit_scope_at_idx ON pgleader.audit (scope, at);

-- The fenced workload's writes (`pgleader node --work-interval`): a contract.
CREATE TABLE IF NOT EXISTS pgleader.demo_actions (
    id         bigserial PRIMARY KEY,
    scope      text NOT NULL,
    epoch      bigint NOT NULL,
    node_id    text NOT NULL,
    request_id text UNIQUE,  -- node-chosen id, so a checker can match acknowledgements
    at         timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS demo_actions_scope_epoch_idx ON pgleader.demo_actions (scope, epoch);

-- The epoch floor of each WAL timeline: a promoted standby never grants an epoch
-- at or below one the old primary may have granted.
CREATE TABLE IF NOT EXISTS pgleader.timelines (
    timeline       bigint PRIMARY KEY,
    epoch_floor    bigint NOT NULL,
    first_claim_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    first_claim_by text,
    max_epoch_seen bigint
);

-- The four roles' names, fixed at the first migration (settings
-- pgleader.role_owner, …: `pgleader migrate --roles`).
CREATE TABLE IF NOT EXISTS pgleader.roles (
    kind      text PRIMARY KEY CHECK (kind IN ('owner', 'node', 'reader', 'operator')),
    role_name name NOT NULL UNIQUE
);
INSERT INTO pgleader.roles (kind, role_name)
SELECT k, coalesce(nullif(current_setting('pgleader.role_' || k, true), ''), 'pgleader_' || k)::name
  FROM unnest(ARRAY['owner', 'node', 'reader', 'operator']) AS k
ON CONFLICT (kind) DO NOTHING;

-- Lock keys the database allows other than the derived one (pgleader scope key).
CREATE TABLE IF NOT EXISTS pgleader.scope_keys (
    scope    text PRIMARY KEY CHECK (scope <> '' AND octet_length(scope) <= 200),
    lock_key bigint NOT NULL UNIQUE,
    set_by   text NOT NULL DEFAULT session_user,
    set_at   timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Which login roles may campaign for a scope or a prefix (pgleader scope bind).
CREATE TABLE IF NOT EXISTS pgleader.scope_bindings (
    kind     text NOT NULL CHECK (kind IN ('scope', 'prefix')),
    name     text NOT NULL CHECK (name <> '' AND octet_length(name) <= 200),
    roles    text[] NOT NULL CHECK (cardinality(roles) > 0),
    bound_by text NOT NULL DEFAULT session_user,
    bound_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (kind, name)
);

-- The publication the collector's logical-replication source reads
-- (collector/logical): created when missing; one made by hand is completed with
-- the tables it lacks, nothing removed. A catalog entry only: it costs nothing
-- until a replication slot reads through it.
-- +goose StatementBegin
DO $$
DECLARE
  v_table text;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_publication WHERE pubname = 'pgleader_events') THEN
    CREATE PUBLICATION pgleader_events
      FOR TABLE pgleader.leader_state, pgleader.terms, pgleader.audit;
    RETURN;
  END IF;
  IF (SELECT puballtables FROM pg_catalog.pg_publication WHERE pubname = 'pgleader_events') THEN
    RETURN;
  END IF;
  FOREACH v_table IN ARRAY ARRAY['leader_state', 'terms', 'audit'] LOOP
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_publication_tables
                    WHERE pubname = 'pgleader_events'
                      AND schemaname = 'pgleader' AND tablename = v_table) THEN
      EXECUTE format('ALTER PUBLICATION pgleader_events ADD TABLE %I.%I', 'pgleader', v_table);
    END IF;
  END LOOP;
END $$;
-- +goose StatementEnd
