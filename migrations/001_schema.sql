-- pgleader schema, version 1.
--
-- Plain SQL: `pgleader migrate` applies it (through goose, whose annotations below are
-- ordinary comments), and a host application can apply it with its own tool or
-- `psql -f`. It is idempotent, so the two paths may be mixed.
-- Names in this file are a contract relied on by the collector, the dashboard and
-- external checks (see docs/design.md): add columns freely, rename nothing.
--
-- Safety lives here, not only in the Go client:
--   S1  the epoch of a scope increases by exactly one per grant (claim, under FOR UPDATE),
--       and the claim commits with synchronous_commit = on, so it never regresses.
--   S2  claim and heartbeat verify through pg_locks that the *calling backend* holds the
--       scope's advisory lock; writing the table directly does not make anyone leader.
--   S3  fence() takes FOR KEY SHARE on the scope's row inside the caller's transaction:
--       a claim (FOR UPDATE) waits for it, and a write that arrives after a bump fails
--       with SQLSTATE PLF01. FOR KEY SHARE does not conflict with the heartbeat's
--       non-key UPDATE, so long application transactions never delay heartbeats.

-- +goose Up
CREATE SCHEMA IF NOT EXISTS pgleader;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.schema_version() RETURNS int
LANGUAGE sql IMMUTABLE AS $$ SELECT 1 $$;
-- +goose StatementEnd

-- The advisory-lock key of a scope: the first 8 bytes of sha256(scope) as a signed
-- bigint. A DBA can reproduce it: SELECT pgleader.lock_key('billing');
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.lock_key(p_scope text) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT AS $$
  SELECT ('x' || substr(encode(sha256(convert_to(p_scope, 'UTF8')), 'hex'), 1, 16))::bit(64)::bigint
$$;
-- +goose StatementEnd

-- Whether a session holds an advisory lock on key (in this database). With p_pid NULL:
-- any session; otherwise that backend. A bigint key appears in pg_locks split into
-- classid (high 32 bits) and objid (low 32 bits) with objsubid = 1.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.lock_held(p_key bigint, p_pid int, p_mode text DEFAULT 'ExclusiveLock')
RETURNS boolean LANGUAGE sql STABLE AS $$
  SELECT EXISTS (
    SELECT 1 FROM pg_catalog.pg_locks l
    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
      AND l.mode = p_mode
      AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())
      AND ((l.classid::bigint << 32) | l.objid::bigint) = p_key
      AND (p_pid IS NULL OR l.pid = p_pid))
$$;
-- +goose StatementEnd

-- Every granted advisory lock (bigint keys) in this database: one read of pg_locks,
-- which snapshots the whole lock table (≈0.2 ms): the hot paths read it once.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.advisory_locks()
RETURNS TABLE (pid int, key bigint, mode text) LANGUAGE sql STABLE AS $$
  SELECT l.pid, (l.classid::bigint << 32) | l.objid::bigint, l.mode
    FROM pg_catalog.pg_locks l
   WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
     AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())
$$;
-- +goose StatementEnd

CREATE TABLE IF NOT EXISTS pgleader.leader_state (
    scope                 text PRIMARY KEY
                          CHECK (scope <> '' AND octet_length(scope) <= 200),
    lock_key              bigint NOT NULL UNIQUE,
    epoch                 bigint NOT NULL DEFAULT 0 CHECK (epoch >= 0),
    holder                text,        -- node_id of the current holder; NULL when released
    holder_pid            int,         -- backend pid of the holder's leadership session
    holder_guard_key      bigint,      -- advisory key the holder's process keeps while alive
    -- Guards of earlier holders whose gates may still be open: every holder whose term
    -- ended uncleanly, carried forward until some successor opened its gate after
    -- waiting them out (then cleared by its heartbeat) or released cleanly.
    unresolved_guards     bigint[] NOT NULL DEFAULT '{}',
    unresolved_trust_ms   int NOT NULL DEFAULT 0, -- the largest trust window among them
    acquired_at           timestamptz,
    released_at           timestamptz, -- set by a clean release; NULL while a term is open
    last_heartbeat        timestamptz,
    -- Timing the holder runs with, so observers judge staleness without guessing.
    heartbeat_interval_ms int,
    heartbeat_timeout_ms  int,
    trust_window_ms       int,
    session_lease_ms      int
);

CREATE TABLE IF NOT EXISTS pgleader.nodes (
    node_id               text PRIMARY KEY,
    hostname              text NOT NULL,
    os_pid                int NOT NULL,
    version               text NOT NULL,
    started_at            timestamptz NOT NULL DEFAULT now(),
    last_seen             timestamptz NOT NULL DEFAULT now(),
    stopped_at            timestamptz,
    backend_pid           int,                        -- leadership session backend
    scopes                text[] NOT NULL DEFAULT '{}', -- scopes it is a candidate for
    leads                 text[] NOT NULL DEFAULT '{}', -- scopes it currently leads
    heartbeat_interval_ms int,
    trust_window_ms       int,
    session_lease_ms      int
);
CREATE INDEX IF NOT EXISTS nodes_last_seen_idx ON pgleader.nodes (last_seen);

CREATE TABLE IF NOT EXISTS pgleader.terms (
    id             bigserial PRIMARY KEY,
    scope          text NOT NULL,
    epoch          bigint NOT NULL,
    holder         text NOT NULL,
    hostname       text,
    holder_pid     int,
    acquired_at    timestamptz NOT NULL,
    released_at    timestamptz,
    release_reason text CHECK (release_reason IN
        ('resigned', 'shutdown', 'lost_connection', 'heartbeat_timeout', 'evicted', 'crashed')),
    handover_gap   interval,   -- acquired_at minus the predecessor's release (or last heartbeat)
    UNIQUE (scope, epoch)
);
-- "Who led scope X between 14:00 and 15:00":
--   WHERE scope = X AND acquired_at < '15:00' AND coalesce(released_at, 'infinity') > '14:00'
CREATE INDEX IF NOT EXISTS terms_scope_acquired_idx ON pgleader.terms (scope, acquired_at);

CREATE TABLE IF NOT EXISTS pgleader.audit (
    id      bigserial PRIMARY KEY,
    at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    scope   text,
    node_id text,
    epoch   bigint,
    kind    text NOT NULL,
    detail  jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS audit_at_idx ON pgleader.audit (at);
CREATE INDEX IF NOT EXISTS audit_scope_at_idx ON pgleader.audit (scope, at);

-- Append-only: rows are never changed or deleted one by one (retention: TRUNCATE or
-- drop old partitions).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.audit_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'pgleader.audit is append-only (% refused)', TG_OP;
END $$;
-- +goose StatementEnd
CREATE OR REPLACE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON pgleader.audit
    FOR EACH ROW EXECUTE FUNCTION pgleader.audit_append_only();

-- The demo's and the safety checks' workload: one fenced write per action.
CREATE TABLE IF NOT EXISTS pgleader.demo_actions (
    id         bigserial PRIMARY KEY,
    scope      text NOT NULL,
    epoch      bigint NOT NULL,
    node_id    text NOT NULL,
    request_id text UNIQUE,  -- node-chosen id, so a checker can match acknowledgements
    at         timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS demo_actions_scope_epoch_idx ON pgleader.demo_actions (scope, epoch);

-- claim: the calling session must already hold the scope's advisory lock (S2). Bumps
-- the epoch (S1), closes a term its predecessor never closed, opens a new term,
-- audits and notifies. Returns what the successor needs to keep gates from
-- overlapping: wait_guards, the guards (of the predecessor and of earlier holders
-- carried forward) still held by processes that may trust a gate, and prev_trust_ms,
-- the largest trust window among them: the successor opens its gate when they are all
-- free or that long after its claim returned.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.claim(
    p_scope text, p_lock_key bigint, p_node text, p_hostname text, p_guard_key bigint,
    p_interval_ms int, p_timeout_ms int, p_trust_ms int, p_lease_ms int)
RETURNS TABLE (epoch bigint, prev_holder text, prev_epoch bigint, prev_closed boolean,
               prev_guard_key bigint, prev_guard_held boolean, prev_trust_ms int,
               prev_reason text, wait_guards bigint[])
LANGUAGE plpgsql AS $$
DECLARE
  st        pgleader.leader_state;
  v_cands   bigint[];
  v_wait    bigint[];
  v_trust   int;
  v_epoch   bigint;
  v_closed  boolean := true;
  v_held    boolean := false;
  v_mine    boolean;
  v_reason  text;
  v_gap     interval;
  v_now     timestamptz;
BEGIN
  -- S1: an acknowledged grant survives a crash of the database.
  PERFORM set_config('synchronous_commit', 'on', true);

  INSERT INTO pgleader.leader_state (scope, lock_key) VALUES (p_scope, p_lock_key)
  ON CONFLICT (scope) DO NOTHING;
  -- FOR UPDATE (not the implicit NO KEY UPDATE of the UPDATE below): waits for every
  -- fenced writer holding FOR KEY SHARE on this row (S3).
  SELECT * INTO st FROM pgleader.leader_state s WHERE s.scope = p_scope FOR UPDATE;

  -- Guards whose holders may still trust a gate: those carried forward, plus the
  -- predecessor's if it never closed its term.
  v_cands := st.unresolved_guards;
  v_trust := st.unresolved_trust_ms;
  IF st.holder IS NOT NULL AND st.released_at IS NULL AND st.holder_guard_key IS NOT NULL THEN
    v_cands := array_append(v_cands, st.holder_guard_key);
    v_trust := greatest(v_trust, coalesce(st.trust_window_ms, 0));
  END IF;
  -- S2, whether the predecessor's guard is still held, and which of the candidate
  -- guards are (a released guard is final: its process closed its gates or died),
  -- in one read of pg_locks.
  SELECT coalesce(bool_or(l.pid = pg_backend_pid() AND l.key = p_lock_key AND l.mode = 'ExclusiveLock'), false),
         coalesce(bool_or(l.key = st.holder_guard_key AND l.mode = 'ExclusiveLock'), false),
         coalesce(array_agg(DISTINCT l.key) FILTER (WHERE l.mode = 'ExclusiveLock' AND l.key = ANY (v_cands)), '{}')
    INTO v_mine, v_held, v_wait
    FROM pgleader.advisory_locks() l;
  IF cardinality(v_wait) = 0 THEN
    v_trust := 0;
  END IF;
  IF NOT v_mine THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF02',
      MESSAGE = format('pgleader: backend %s does not hold advisory lock %s of scope %L',
                       pg_backend_pid(), p_lock_key, p_scope);
  END IF;
  -- The moment of the bump: after the row lock, i.e. after every fenced writer of the
  -- previous term has committed (now() would be this transaction's start, before
  -- that wait).
  v_now := clock_timestamp();
  IF st.lock_key <> p_lock_key THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF03',
      MESSAGE = format('pgleader: scope %L uses lock key %s in pgleader.leader_state, this node computed %s',
                       p_scope, st.lock_key, p_lock_key);
  END IF;

  IF st.holder IS NOT NULL AND st.released_at IS NULL THEN
    -- The predecessor never closed its term: close it for them.
    v_closed := false;
    -- Observability only: a holder silent for its whole lease was frozen or cut
    -- off; one whose guard is gone as well died; otherwise its session was lost.
    v_reason := CASE
      WHEN st.last_heartbeat < v_now - make_interval(secs => coalesce(st.session_lease_ms, 0) / 1000.0)
        THEN 'heartbeat_timeout'
      WHEN NOT v_held THEN 'crashed'
      ELSE 'lost_connection' END;
    -- Every term left open (also ones an operator bypassed by editing the epoch).
    UPDATE pgleader.terms t SET released_at = v_now, release_reason = v_reason
     WHERE t.scope = p_scope AND t.released_at IS NULL;
    INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
    VALUES (p_scope, st.holder, st.epoch, 'term_closed_by_successor',
            jsonb_build_object('reason', v_reason, 'successor', p_node,
                               'last_heartbeat', st.last_heartbeat));
    v_gap := v_now - st.last_heartbeat;
  ELSE
    v_held := false;
    v_gap := v_now - st.released_at;
  END IF;

  v_epoch := st.epoch + 1;
  UPDATE pgleader.leader_state s SET
      epoch = v_epoch, holder = p_node, holder_pid = pg_backend_pid(),
      holder_guard_key = p_guard_key, acquired_at = v_now, released_at = NULL,
      last_heartbeat = v_now, heartbeat_interval_ms = p_interval_ms,
      unresolved_guards = v_wait, unresolved_trust_ms = v_trust,
      heartbeat_timeout_ms = p_timeout_ms, trust_window_ms = p_trust_ms,
      session_lease_ms = p_lease_ms
   WHERE s.scope = p_scope;
  INSERT INTO pgleader.terms (scope, epoch, holder, hostname, holder_pid, acquired_at, handover_gap)
  VALUES (p_scope, v_epoch, p_node, p_hostname, pg_backend_pid(), v_now, v_gap);
  UPDATE pgleader.nodes n SET leads = array_append(array_remove(n.leads, p_scope), p_scope)
   WHERE n.node_id = p_node;
  INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
  VALUES (p_scope, p_node, v_epoch, 'elected',
          jsonb_build_object('prev_holder', st.holder, 'prev_epoch', st.epoch,
                             'prev_closed', v_closed, 'backend_pid', pg_backend_pid()));
  PERFORM pg_notify('leader_change', json_build_object(
      'scope', p_scope, 'epoch', v_epoch, 'holder', p_node, 'event', 'elected')::text);

  RETURN QUERY SELECT v_epoch, st.holder, st.epoch, v_closed, st.holder_guard_key, v_held,
                      v_trust, v_reason, v_wait;
END $$;
-- +goose StatementEnd

-- try_claim: take the scope's advisory lock without waiting and claim it. When another
-- session holds the lock, returns acquired = false with the epoch on record and the
-- holder only while that holder's backend is alive (read FOR KEY SHARE, so a claim
-- in flight is seen once it commits; NULL while the record is stale). If the claim
-- fails after the lock was taken, the lock is given back before the error propagates:
-- session-level locks survive a transaction's rollback. The claim waits at most
-- p_timeout_ms for fenced writers of the previous term (lock_timeout, 55P03).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.try_claim(
    p_scope text, p_lock_key bigint, p_node text, p_hostname text, p_guard_key bigint,
    p_interval_ms int, p_timeout_ms int, p_trust_ms int, p_lease_ms int)
RETURNS TABLE (acquired boolean, epoch bigint, holder text, prev_holder text, prev_epoch bigint,
               prev_closed boolean, prev_guard_key bigint, prev_guard_held boolean,
               prev_trust_ms int, prev_reason text, wait_guards bigint[])
LANGUAGE plpgsql AS $$
BEGIN
  IF NOT pg_try_advisory_lock(p_lock_key) THEN
    RETURN QUERY SELECT false, s.epoch,
                        CASE WHEN s.holder_pid IS NOT NULL AND s.released_at IS NULL
                              AND EXISTS (SELECT 1 FROM pg_stat_get_activity(s.holder_pid))
                             THEN s.holder END,
                        NULL::text, NULL::bigint, NULL::boolean,
                        NULL::bigint, NULL::boolean, NULL::int, NULL::text, NULL::bigint[]
                   FROM pgleader.leader_state s WHERE s.scope = p_scope FOR KEY SHARE;
    IF NOT FOUND THEN
      RETURN QUERY SELECT false, NULL::bigint, NULL::text, NULL::text, NULL::bigint,
                          NULL::boolean, NULL::bigint, NULL::boolean, NULL::int, NULL::text,
                          NULL::bigint[];
    END IF;
    RETURN;
  END IF;
  BEGIN
    -- A fifth of the heartbeat timeout: a claim must not hold the leadership session
    -- so long that heartbeats of other scopes miss their window.
    PERFORM set_config('lock_timeout', greatest(p_timeout_ms / 5, 1)::text, true);
    RETURN QUERY SELECT true, c.epoch, p_node, c.prev_holder, c.prev_epoch, c.prev_closed,
                        c.prev_guard_key, c.prev_guard_held, c.prev_trust_ms, c.prev_reason,
                        c.wait_guards
                   FROM pgleader.claim(p_scope, p_lock_key, p_node, p_hostname, p_guard_key,
                        p_interval_ms, p_timeout_ms, p_trust_ms, p_lease_ms) c;
  EXCEPTION WHEN OTHERS THEN
    PERFORM pg_advisory_unlock(p_lock_key);
    RAISE;
  END;
END $$;
-- +goose StatementEnd

-- heartbeat: one round trip per interval for all scopes a node leads, plus its nodes
-- row. A led scope is confirmed (ok) only if the epoch is unchanged, the node is its
-- holder and the calling backend holds its advisory lock (S2); otherwise ok = false
-- and nothing of that scope is written. For the scopes in p_follow it reports the
-- current epoch and holder (the holder only while its backend holds the lock), so a
-- follower learns of every new leader within one interval without relying on NOTIFY.
-- p_settled names led scopes whose gate has opened after waiting out every unresolved
-- guard: those are cleared.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.heartbeat(p_node text, p_scopes text[], p_epochs bigint[],
                                              p_follow text[] DEFAULT '{}',
                                              p_settled text[] DEFAULT '{}')
RETURNS TABLE (scope text, led boolean, ok boolean, epoch bigint, holder text)
LANGUAGE plpgsql AS $$
BEGIN
  -- A lost heartbeat costs nothing: skip the WAL flush wait.
  PERFORM set_config('synchronous_commit', 'off', true);
  UPDATE pgleader.nodes n SET last_seen = now(), backend_pid = pg_backend_pid()
   WHERE n.node_id = p_node;
  RETURN QUERY
  WITH locks AS MATERIALIZED (
    SELECT l.pid, l.key FROM pgleader.advisory_locks() l WHERE l.mode = 'ExclusiveLock'
  ), want AS (
    SELECT w.scope, w.epoch FROM unnest(p_scopes, p_epochs) AS w(scope, epoch)
  ), upd AS (
    UPDATE pgleader.leader_state s SET last_heartbeat = now(),
           unresolved_guards = CASE WHEN s.scope = ANY (p_settled) THEN '{}' ELSE s.unresolved_guards END,
           unresolved_trust_ms = CASE WHEN s.scope = ANY (p_settled) THEN 0 ELSE s.unresolved_trust_ms END
      FROM want
     WHERE s.scope = want.scope AND s.epoch = want.epoch AND s.holder = p_node
       AND s.released_at IS NULL
       AND EXISTS (SELECT 1 FROM locks WHERE locks.pid = pg_backend_pid() AND locks.key = s.lock_key)
    RETURNING s.scope
  )
  SELECT want.scope, true, EXISTS (SELECT 1 FROM upd WHERE upd.scope = want.scope),
         want.epoch, p_node
    FROM want
  UNION ALL
  SELECT s.scope, false, false, s.epoch,
         CASE WHEN s.holder_pid IS NOT NULL AND s.released_at IS NULL
               AND EXISTS (SELECT 1 FROM locks WHERE locks.pid = s.holder_pid AND locks.key = s.lock_key)
              THEN s.holder END
    FROM pgleader.leader_state s
   WHERE s.scope = ANY (p_follow);
END $$;
-- +goose StatementEnd

-- release: close the caller's term cleanly (reason), then unlock the scope. Returns
-- false (and changes nothing) when the caller is not the holder of that epoch; the
-- advisory lock, if this session holds it, is released either way. The unlock takes
-- effect at once, before commit: a successor's claim waits for this transaction on
-- the row lock and then sees the term closed.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.release(p_scope text, p_epoch bigint, p_node text, p_reason text,
                                            p_lock_timeout_ms int DEFAULT 0)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  st pgleader.leader_state;
  v_ours boolean;
  v_now  timestamptz;
BEGIN
  PERFORM set_config('synchronous_commit', 'on', true);
  -- The row lock waits for this term's own fenced writers; bounded, so the caller
  -- can retry without holding up its other scopes' heartbeats (55P03).
  PERFORM set_config('lock_timeout', greatest(p_lock_timeout_ms, 0)::text, true);
  SELECT * INTO st FROM pgleader.leader_state s WHERE s.scope = p_scope FOR UPDATE;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  v_now := clock_timestamp(); -- after the row lock (see claim)
  -- The claiming backend, still alive, still holds the lock: a session never loses
  -- one without ending. The unlock below confirms it (and undoes all if not).
  v_ours := st.epoch = p_epoch AND st.holder = p_node AND st.released_at IS NULL
            AND st.holder_pid = pg_backend_pid();
  IF v_ours THEN
    UPDATE pgleader.terms t SET released_at = v_now, release_reason = p_reason
     WHERE t.scope = p_scope AND t.epoch = p_epoch AND t.released_at IS NULL;
    -- A clean release follows an opened gate, which waited out every unresolved guard.
    UPDATE pgleader.leader_state s SET holder = NULL, holder_pid = NULL,
           holder_guard_key = NULL, released_at = v_now,
           unresolved_guards = '{}', unresolved_trust_ms = 0
     WHERE s.scope = p_scope;
    UPDATE pgleader.nodes n SET leads = array_remove(n.leads, p_scope)
     WHERE n.node_id = p_node;
    INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
    VALUES (p_scope, p_node, p_epoch, 'released', jsonb_build_object('reason', p_reason));
    PERFORM pg_notify('leader_change', json_build_object(
        'scope', p_scope, 'epoch', p_epoch, 'holder', p_node, 'event', 'released',
        'reason', p_reason)::text);
  END IF;
  IF v_ours THEN
    IF NOT pg_advisory_unlock(st.lock_key) THEN
      RAISE EXCEPTION USING ERRCODE = 'PLF02',
        MESSAGE = format('pgleader: backend %s does not hold advisory lock %s of scope %L',
                         pg_backend_pid(), st.lock_key, p_scope);
    END IF;
  ELSIF pgleader.lock_held(st.lock_key, pg_backend_pid()) THEN
    PERFORM pg_advisory_unlock(st.lock_key); -- not our term, but not our lock either
  END IF;
  RETURN v_ours;
END $$;
-- +goose StatementEnd

-- fence: call inside the transaction that makes a write under leadership (S3). Raises
-- SQLSTATE PLF01 unless p_epoch is the scope's current, open term (and, when p_holder
-- is given, that holder's). The FOR KEY SHARE row lock lasts until commit, so a
-- concurrent claim waits for this transaction and a write after a claim is refused.
-- Because a claim waits for it, a fenced transaction must not outlive a frozen
-- client: fence sets idle_in_transaction_session_timeout to the holder's session
-- lease for the rest of the transaction, so the server ends it exactly as it ends the
-- frozen holder's leadership session.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.fence(p_scope text, p_epoch bigint, p_holder text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  st pgleader.leader_state;
BEGIN
  SELECT * INTO st FROM pgleader.leader_state s WHERE s.scope = p_scope FOR KEY SHARE;
  IF st.session_lease_ms > 0 THEN
    PERFORM set_config('idle_in_transaction_session_timeout', st.session_lease_ms::text, true);
  END IF;
  IF NOT FOUND OR st.epoch IS DISTINCT FROM p_epoch OR st.released_at IS NOT NULL
     OR st.holder IS NULL OR (p_holder IS NOT NULL AND st.holder IS DISTINCT FROM p_holder) THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF01',
      MESSAGE = format('pgleader: fenced: write for scope %L carries epoch %s, current is %s (holder %s)',
                       p_scope, p_epoch, coalesce(st.epoch::text, 'none'), coalesce(st.holder, 'none'));
  END IF;
END $$;
-- +goose StatementEnd

-- await_release: wait up to p_timeout_ms (0: without limit) until no session holds key
-- exclusively. Returns true when it is free, false on timeout. Waiting followers use it
-- on a connection of their own: the wait costs the server nothing and ends within a
-- millisecond of the holder's release or death. A lock_timeout can fire at the very
-- moment the lock is granted (55P03 with the lock held): reconcile through pg_locks.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.await_release(p_key bigint, p_timeout_ms int)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('lock_timeout', greatest(p_timeout_ms, 0)::text, true);
  BEGIN
    PERFORM pg_advisory_lock_shared(p_key);
  EXCEPTION WHEN lock_not_available THEN
    IF NOT pgleader.lock_held(p_key, pg_backend_pid(), 'ShareLock') THEN
      RETURN false;
    END IF;
  END;
  PERFORM pg_advisory_unlock_shared(p_key);
  RETURN true;
END $$;
-- +goose StatementEnd


-- unlock_held: give back every instance of an exclusive advisory lock on p_key this
-- session holds (locks stack); returns how many. Reconciles a claim that failed in a
-- way its own handler could not catch (a cancelled statement, a commit-time error).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.unlock_held(p_key bigint) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
  n int := 0;
BEGIN
  WHILE pgleader.lock_held(p_key, pg_backend_pid()) LOOP
    PERFORM pg_advisory_unlock(p_key);
    n := n + 1;
  END LOOP;
  RETURN n;
END $$;
-- +goose StatementEnd

-- No Down section: a down migration would drop the leadership history, and psql -f
-- would run it right after the Up part. Remove pgleader with DROP SCHEMA pgleader CASCADE.
