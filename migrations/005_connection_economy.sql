-- pgleader schema, version 5: a constant number of connections per node, whatever
-- the number of scopes.
--
-- Followers no longer keep a connection blocked on each scope's lock. A node now
-- keeps three sessions (leadership, guard, watch; see the election package doc):
--
--   * nodes.beacon_key: an advisory key the node's leadership session holds for as
--     long as it lives. It is freed exactly when the session's scope locks are
--     (the backend releases all its locks at once when it ends), so a node blocked
--     on a peer's beacon learns of that peer's crash, freeze (idle_session_timeout)
--     or terminated session within a millisecond. Nodes watch each other's beacons
--     in a ring (ring_next), so each node watches exactly one peer.
--   * claim_batch: try and claim many scopes in one round trip (one commit), and
--     announce a lost peer (NOTIFY leader_change, event node_lost) to the nodes
--     that were not watching it. It never waits: a scope whose row is locked by
--     fenced writers of the previous term reports busy and is retried.
--   * release_batch: release many scopes in one round trip.
--   * node_heartbeat: heartbeat of led scopes as before; for followed scopes only
--     the ones that changed (epoch differs from the follower's, or no live holder)
--     are returned; and the node's ring successor.
--
-- The version-4 functions stay, so an engine of the previous version keeps working
-- against this schema during a rolling upgrade.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.schema_version() RETURNS int
LANGUAGE sql IMMUTABLE AS $$ SELECT 5 $$;
-- +goose StatementEnd

-- Every heartbeat rewrites each led scope's row (last_heartbeat): at a thousand
-- scopes, two thousand row versions a second. Room on every page lets those be HOT
-- updates that page pruning reclaims (no index entries, no bloat); the versions of
-- the last few seconds stay until the oldest snapshot moves on (a watch statement
-- holds one for at most its slice, see the election package). New pages only: an
-- existing table is rewritten by VACUUM FULL pgleader.leader_state.
ALTER TABLE pgleader.leader_state SET (fillfactor = 20, autovacuum_vacuum_scale_factor = 0,
                                      autovacuum_vacuum_threshold = 5000);

ALTER TABLE pgleader.nodes ADD COLUMN IF NOT EXISTS beacon_key bigint;
ALTER TABLE pgleader.nodes ADD COLUMN IF NOT EXISTS guard_key bigint;

-- ring_next: the live node after p_node in node_id order (wrapping around), with
-- its beacon key. Live: not stopped, and its beacon is held right now. Empty when
-- p_node is alone.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.ring_next(p_node text)
RETURNS TABLE (node_id text, beacon_key bigint)
LANGUAGE sql STABLE AS $$
  SELECT n.node_id, n.beacon_key
    FROM pgleader.nodes n
   WHERE n.node_id <> p_node AND n.stopped_at IS NULL AND n.beacon_key IS NOT NULL
     AND EXISTS (SELECT 1 FROM pgleader.advisory_locks() l
                  WHERE l.key = n.beacon_key AND l.mode = 'ExclusiveLock')
   ORDER BY n.node_id <= p_node, n.node_id
   LIMIT 1
$$;
-- +goose StatementEnd

-- lock_map: every exclusive advisory lock of this database as a jsonb object whose
-- keys are 'pid:key', for lookups (?) in O(log n). pg_lock_status() is estimated at
-- one row, so a join against it becomes a nested loop over the whole lock table for
-- every probing row: at a thousand scopes that is a million comparisons per call.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.lock_map() RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT coalesce(jsonb_object_agg(l.pid::text || ':' || l.key::text, true), '{}')
    FROM pgleader.advisory_locks() l WHERE l.mode = 'ExclusiveLock'
$$;
-- +goose StatementEnd

-- claim_batch: take the advisory lock of each scope without waiting and claim every
-- scope won, as pgleader.claim does for one (S1: each epoch bumps by one, committed
-- with synchronous_commit = on; S2 by construction: this very call took the locks on
-- the calling backend; S3: the rows are locked FOR UPDATE, which fenced writers of
-- the previous term, holding FOR KEY SHARE, block). It works on sets, a handful of
-- statements per batch whatever its size. Differences from claim:
--   * never waits: a row locked by fenced writers gives busy = true (lock given
--     back), for the caller to retry shortly;
--   * pg_locks is read once (which guards are still held);
--   * p_announce, when not NULL, names a node whose leadership session ended: a
--     leader_change notification (event node_lost) tells every node, so that the
--     followers of scopes this caller does not campaign for claim them at once.
-- Rows: one per scope. acquired = false: holder is the current holder while its
-- backend holds the lock (NULL otherwise), epoch the current epoch.
-- If anything fails, every lock the batch took is given back before the error
-- propagates (session locks survive a rollback).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.claim_batch(
    p_node text, p_hostname text, p_guard_key bigint,
    p_interval_ms int, p_timeout_ms int, p_trust_ms int, p_lease_ms int,
    p_scopes text[], p_keys bigint[], p_announce text DEFAULT NULL)
RETURNS TABLE (scope text, acquired boolean, busy boolean, epoch bigint, holder text,
               prev_holder text, prev_epoch bigint, prev_closed boolean,
               prev_guard_key bigint, prev_guard_held boolean, prev_trust_ms int,
               prev_reason text, wait_guards bigint[])
LANGUAGE plpgsql AS $$
DECLARE
  v_taken   bigint[] := '{}';  -- keys this batch locked
  v_cands   bigint[];          -- guards of the holders on record and of the unresolved chain
  v_held    bigint[];          -- those held at the start of the batch
  v_locks   jsonb;             -- 'pid:key' of every exclusive advisory lock, for lookups
  v_locked  text[];            -- won scopes whose rows are ours
  v_busy    bigint[];
  v_bad     text;
  v_won     text[];
BEGIN
  PERFORM set_config('synchronous_commit', 'on', true);
  IF cardinality(p_scopes) IS DISTINCT FROM cardinality(p_keys) THEN
    RAISE EXCEPTION 'pgleader: claim_batch needs one key per scope (% scopes, % keys)',
      cardinality(p_scopes), cardinality(p_keys);
  END IF;
  -- Which guards (of holders on record and of the unresolved chain) are held now.
  -- Read before any lock of the batch is taken: a guard seen held here and
  -- released meanwhile is waited on for nothing; a guard seen free stays free
  -- (guard keys are random per session, never taken again).
  -- (Two steps: pg_lock_status is estimated at one row, and a join against it
  -- degenerates into a nested loop over the whole lock table.)
  SELECT coalesce(array_agg(DISTINCT g) FILTER (WHERE g IS NOT NULL), '{}') INTO v_cands
    FROM (SELECT s.holder_guard_key AS g FROM pgleader.leader_state s WHERE s.scope = ANY (p_scopes)
          UNION ALL
          SELECT unnest(s.unresolved_guards) FROM pgleader.leader_state s WHERE s.scope = ANY (p_scopes)) c;
  SELECT coalesce(array_agg(DISTINCT l.key), '{}') INTO v_held
    FROM pgleader.advisory_locks() l
   WHERE l.mode = 'ExclusiveLock' AND l.key = ANY (v_cands);
  BEGIN
    SELECT coalesce(array_agg(u.k), '{}') INTO v_taken
      FROM unnest(p_keys) AS u(k) WHERE pg_try_advisory_lock(u.k);
    -- Rows are created only by the lock holder, so two batches never race on one.
    INSERT INTO pgleader.leader_state AS s (scope, lock_key)
    SELECT u.s, u.k FROM unnest(p_scopes, p_keys) AS u(s, k) WHERE u.k = ANY (v_taken)
    ON CONFLICT ON CONSTRAINT leader_state_pkey DO NOTHING;
    SELECT min(u.s) INTO v_bad
      FROM unnest(p_scopes, p_keys) AS u(s, k) JOIN pgleader.leader_state s ON s.scope = u.s
     WHERE u.k = ANY (v_taken) AND s.lock_key <> u.k;
    IF v_bad IS NOT NULL THEN
      RAISE EXCEPTION USING ERRCODE = 'PLF03',
        MESSAGE = format('pgleader: scope %L uses another lock key in pgleader.leader_state than this node computed',
                         v_bad);
    END IF;
    SELECT coalesce(array_agg(x.scope), '{}') INTO v_locked
      FROM (SELECT s.scope FROM pgleader.leader_state s
             WHERE s.scope = ANY (p_scopes) AND s.lock_key = ANY (v_taken)
               FOR UPDATE SKIP LOCKED) x;
    -- Won, but the row is held by the previous term's fenced writers: give it back.
    SELECT coalesce(array_agg(u.k), '{}') INTO v_busy
      FROM unnest(p_scopes, p_keys) AS u(s, k) WHERE u.k = ANY (v_taken) AND u.s <> ALL (v_locked);
    PERFORM pg_advisory_unlock(k) FROM unnest(v_busy) k;
    v_taken := ARRAY(SELECT k FROM unnest(v_taken) k WHERE k <> ALL (v_busy));

    RETURN QUERY
    WITH calc AS MATERIALIZED (
      SELECT s.scope, s.epoch AS old_epoch, s.holder AS old_holder, s.holder_guard_key AS old_guard,
             s.last_heartbeat AS old_hb, s.released_at AS old_released,
             (s.holder IS NOT NULL AND s.released_at IS NULL) AS was_open,
             s.holder_guard_key = ANY (v_held) AS guard_held,
             ARRAY(SELECT DISTINCT g FROM unnest(s.unresolved_guards ||
                     CASE WHEN s.holder IS NOT NULL AND s.released_at IS NULL AND s.holder_guard_key IS NOT NULL
                          THEN ARRAY[s.holder_guard_key] ELSE '{}'::bigint[] END) g
                   WHERE g = ANY (v_held) ORDER BY g) AS wait,
             greatest(s.unresolved_trust_ms,
                      CASE WHEN s.holder IS NOT NULL AND s.released_at IS NULL AND s.holder_guard_key IS NOT NULL
                           THEN coalesce(s.trust_window_ms, 0) ELSE 0 END) AS trust,
             CASE WHEN s.holder IS NULL OR s.released_at IS NOT NULL THEN NULL
                  WHEN s.last_heartbeat < clock_timestamp() - make_interval(secs => coalesce(s.session_lease_ms, 0) / 1000.0)
                    THEN 'heartbeat_timeout'
                  WHEN NOT coalesce(s.holder_guard_key = ANY (v_held), false) THEN 'crashed'
                  ELSE 'lost_connection' END AS reason,
             clock_timestamp() AS at
        FROM pgleader.leader_state s
       WHERE s.scope = ANY (v_locked)
    ), upd AS (
      UPDATE pgleader.leader_state s SET
          epoch = c.old_epoch + 1, holder = p_node, holder_pid = pg_backend_pid(),
          holder_guard_key = p_guard_key, acquired_at = c.at, released_at = NULL,
          last_heartbeat = c.at, heartbeat_interval_ms = p_interval_ms,
          unresolved_guards = c.wait,
          unresolved_trust_ms = CASE WHEN cardinality(c.wait) = 0 THEN 0 ELSE c.trust END,
          heartbeat_timeout_ms = p_timeout_ms, trust_window_ms = p_trust_ms,
          session_lease_ms = p_lease_ms, resign_requested_epoch = NULL, resign_requested_by = NULL
        FROM calc c WHERE s.scope = c.scope
      RETURNING s.scope
    ), closed AS (
      -- Every term left open (also ones an operator bypassed by editing the epoch).
      UPDATE pgleader.terms t SET released_at = c.at, release_reason = c.reason
        FROM calc c WHERE c.was_open AND t.scope = c.scope AND t.released_at IS NULL
      RETURNING t.scope
    ), opened AS (
      INSERT INTO pgleader.terms (scope, epoch, holder, hostname, holder_pid, acquired_at, handover_gap)
      SELECT c.scope, c.old_epoch + 1, p_node, p_hostname, pg_backend_pid(), c.at,
             c.at - CASE WHEN c.was_open THEN c.old_hb ELSE c.old_released END
        FROM calc c
      RETURNING 1
    ), audited AS (
      INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
      SELECT a.scope, a.node_id, a.epoch, a.kind, a.detail FROM (
        SELECT c.scope, c.old_holder AS node_id, c.old_epoch AS epoch, 'term_closed_by_successor' AS kind,
               jsonb_build_object('reason', c.reason, 'successor', p_node, 'last_heartbeat', c.old_hb) AS detail,
               1 AS ord
          FROM calc c WHERE c.was_open
        UNION ALL
        SELECT c.scope, p_node, c.old_epoch + 1, 'elected',
               jsonb_build_object('prev_holder', c.old_holder, 'prev_epoch', c.old_epoch,
                                  'prev_closed', NOT c.was_open, 'backend_pid', pg_backend_pid()),
               2
          FROM calc c) a
      ORDER BY a.scope, a.ord
      RETURNING 1
    )
    SELECT c.scope, true, false, c.old_epoch + 1, p_node, c.old_holder, c.old_epoch, NOT c.was_open,
           c.old_guard, c.was_open AND coalesce(c.guard_held, false),
           CASE WHEN cardinality(c.wait) = 0 THEN 0 ELSE c.trust END, c.reason, c.wait
      FROM calc c JOIN upd ON upd.scope = c.scope;
    -- (The data-modifying parts above run to completion whatever the outer query reads.)
    PERFORM pg_notify('leader_change', json_build_object(
                'scope', s.scope, 'epoch', s.epoch, 'holder', p_node, 'event', 'elected')::text)
       FROM pgleader.leader_state s WHERE s.scope = ANY (v_locked) ORDER BY s.scope;

    SELECT coalesce(array_agg(x), '{}') INTO v_won FROM unnest(v_locked) x;
    IF cardinality(v_won) > 0 THEN
      UPDATE pgleader.nodes n
         SET leads = ARRAY(SELECT DISTINCT x FROM unnest(n.leads || v_won) x ORDER BY x)
       WHERE n.node_id = p_node;
    END IF;

    RETURN QUERY
    SELECT u.s, false, true, NULL::bigint, NULL::text, NULL::text, NULL::bigint, NULL::boolean,
           NULL::bigint, NULL::boolean, NULL::int, NULL::text, NULL::bigint[]
      FROM unnest(p_scopes, p_keys) AS u(s, k) WHERE u.k = ANY (v_busy);

    -- Scopes held elsewhere: the epoch on record, and the holder while its backend
    -- holds the lock (NULL while the record is stale or a claim is in flight).
    IF EXISTS (SELECT 1 FROM unnest(p_keys) k WHERE k <> ALL (v_taken) AND k <> ALL (v_busy)) THEN
      v_locks := pgleader.lock_map(); -- only when some scope is held elsewhere: a read of pg_locks
    END IF;
    RETURN QUERY
      SELECT u.s, false, false, s.epoch,
             CASE WHEN s.holder_pid IS NOT NULL AND s.released_at IS NULL
                   AND v_locks ? (s.holder_pid::text || ':' || s.lock_key::text)
                  THEN s.holder END,
             NULL::text, NULL::bigint, NULL::boolean, NULL::bigint, NULL::boolean, NULL::int,
             NULL::text, NULL::bigint[]
        FROM unnest(p_scopes, p_keys) AS u(s, k)
        LEFT JOIN pgleader.leader_state s ON s.scope = u.s
       WHERE u.k <> ALL (v_taken) AND u.k <> ALL (v_busy);
    IF p_announce IS NOT NULL THEN
      PERFORM pg_notify('leader_change', json_build_object(
          'holder', p_announce, 'event', 'node_lost', 'by', p_node)::text);
    END IF;
  EXCEPTION WHEN OTHERS THEN
    PERFORM pg_advisory_unlock(k) FROM unnest(v_taken) k;
    RAISE;
  END;
END $$;
-- +goose StatementEnd

-- unlock_held_many: give back every instance of the exclusive advisory locks on
-- p_keys that this session holds (locks stack); returns how many. Reconciles a
-- claim batch that failed in a way its own handler could not catch. One read of
-- pg_locks per round, a round per stacked level.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.unlock_held_many(p_keys bigint[]) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
  n    int := 0;
  held bigint[];
BEGIN
  LOOP
    SELECT coalesce(array_agg(l.key), '{}') INTO held FROM pgleader.advisory_locks() l
     WHERE l.pid = pg_backend_pid() AND l.mode = 'ExclusiveLock' AND l.key = ANY (p_keys);
    EXIT WHEN cardinality(held) = 0;
    PERFORM pg_advisory_unlock(k) FROM unnest(held) k;
    n := n + cardinality(held);
  END LOOP;
  RETURN n;
END $$;
-- +goose StatementEnd

-- release_batch: release many terms of the calling node in one round trip, as
-- pgleader.release does for one (clean close, NOTIFY released, unlock). Never waits
-- on a row: a term whose row is locked by its own fenced writers reports busy and
-- keeps its lock, for the caller to retry. ok = false: not (or no longer) this
-- session's term; its lock, if this session holds it, is given back anyway.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.release_batch(p_node text, p_scopes text[], p_epochs bigint[],
                                                  p_reasons text[])
RETURNS TABLE (scope text, ok boolean, busy boolean)
LANGUAGE plpgsql AS $$
DECLARE
  i       int;
  st      pgleader.leader_state;
  v_ours  boolean;
  v_now   timestamptz;
  v_done  text[] := '{}';
BEGIN
  PERFORM set_config('synchronous_commit', 'on', true);
  FOR i IN 1 .. coalesce(cardinality(p_scopes), 0) LOOP
    SELECT * INTO st FROM pgleader.leader_state s WHERE s.scope = p_scopes[i] FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
      IF EXISTS (SELECT 1 FROM pgleader.leader_state s WHERE s.scope = p_scopes[i]) THEN
        RETURN QUERY SELECT p_scopes[i], false, true;
      ELSE
        RETURN QUERY SELECT p_scopes[i], false, false;
      END IF;
      CONTINUE;
    END IF;
    v_now := clock_timestamp();
    v_ours := st.epoch = p_epochs[i] AND st.holder = p_node AND st.released_at IS NULL
              AND st.holder_pid = pg_backend_pid();
    IF v_ours THEN
      UPDATE pgleader.terms t SET released_at = v_now, release_reason = p_reasons[i]
       WHERE t.scope = st.scope AND t.epoch = st.epoch AND t.released_at IS NULL;
      UPDATE pgleader.leader_state s SET holder = NULL, holder_pid = NULL,
             holder_guard_key = NULL, released_at = v_now,
             unresolved_guards = '{}', unresolved_trust_ms = 0
       WHERE s.scope = st.scope;
      INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
      VALUES (st.scope, p_node, st.epoch, 'released', jsonb_build_object('reason', p_reasons[i]));
      PERFORM pg_notify('leader_change', json_build_object(
          'scope', st.scope, 'epoch', st.epoch, 'holder', p_node, 'event', 'released',
          'reason', p_reasons[i])::text);
      IF NOT pg_advisory_unlock(st.lock_key) THEN
        RAISE EXCEPTION USING ERRCODE = 'PLF02',
          MESSAGE = format('pgleader: backend %s does not hold advisory lock %s of scope %L',
                           pg_backend_pid(), st.lock_key, st.scope);
      END IF;
      v_done := v_done || st.scope;
    ELSIF pgleader.lock_held(st.lock_key, pg_backend_pid()) THEN
      PERFORM pg_advisory_unlock(st.lock_key);
    END IF;
    RETURN QUERY SELECT st.scope, v_ours, false;
  END LOOP;
  IF cardinality(v_done) > 0 THEN
    UPDATE pgleader.nodes n SET leads = ARRAY(SELECT x FROM unnest(n.leads) x WHERE x <> ALL (v_done) ORDER BY x)
     WHERE n.node_id = p_node;
  END IF;
END $$;
-- +goose StatementEnd

-- node_heartbeat: the version-4 heartbeat (led scopes confirmed only while the
-- calling backend holds their locks, S2; resign requests; nodes.leads kept exact),
-- with the followed scopes reported sparingly and the ring successor:
--   kind 'led'    one row per led scope: ok, resign;
--   kind 'follow' only the followed scopes whose epoch differs from p_known (the
--                 epoch the follower last saw) or that have no live holder;
--   kind 'ring'   at most one row: the node to watch (holder = its node_id,
--                 epoch = its beacon key).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.node_heartbeat(p_node text, p_scopes text[], p_epochs bigint[],
                                                   p_follow text[], p_known bigint[],
                                                   p_settled text[] DEFAULT '{}')
RETURNS TABLE (kind text, scope text, ok boolean, epoch bigint, holder text, resign boolean)
LANGUAGE plpgsql AS $$
DECLARE
  v_leads text[];
  v_locks jsonb := pgleader.lock_map(); -- one read of pg_locks, looked up by 'pid:key'
  v_me    text := pg_backend_pid()::text || ':';
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  UPDATE pgleader.nodes n SET last_seen = now(), backend_pid = pg_backend_pid()
   WHERE n.node_id = p_node;
  RETURN QUERY
  WITH want AS (
    SELECT w.scope, w.epoch FROM unnest(p_scopes, p_epochs) AS w(scope, epoch)
  ), upd AS (
    UPDATE pgleader.leader_state s SET last_heartbeat = now(),
           unresolved_guards = CASE WHEN s.scope = ANY (p_settled) THEN '{}' ELSE s.unresolved_guards END,
           unresolved_trust_ms = CASE WHEN s.scope = ANY (p_settled) THEN 0 ELSE s.unresolved_trust_ms END
      FROM want
     WHERE s.scope = want.scope AND s.epoch = want.epoch AND s.holder = p_node
       AND s.released_at IS NULL
       AND v_locks ? (v_me || s.lock_key::text)
    RETURNING s.scope, s.resign_requested_epoch = want.epoch AS resign
  ), follow AS (
    -- A scope without a row was never claimed (its lock may be squatted): it has
    -- no live holder either.
    SELECT f.scope, coalesce(s.epoch, 0) AS epoch, f.known,
           CASE WHEN s.holder_pid IS NOT NULL AND s.released_at IS NULL
                 AND v_locks ? (s.holder_pid::text || ':' || s.lock_key::text)
                THEN s.holder END AS live
      FROM unnest(p_follow, p_known) AS f(scope, known)
      LEFT JOIN pgleader.leader_state s ON s.scope = f.scope
  )
  SELECT 'led'::text, want.scope, upd.scope IS NOT NULL, want.epoch, p_node, coalesce(upd.resign, false)
    FROM want LEFT JOIN upd ON upd.scope = want.scope
  UNION ALL
  SELECT 'follow'::text, follow.scope, false, follow.epoch, follow.live, false
    FROM follow
   WHERE follow.live IS NULL OR follow.epoch IS DISTINCT FROM follow.known
  UNION ALL
  (SELECT 'ring'::text, NULL::text, true, n.beacon_key, n.node_id, false
     FROM pgleader.nodes n
    WHERE n.node_id <> p_node AND n.stopped_at IS NULL AND n.beacon_key IS NOT NULL
      AND v_locks ? (n.backend_pid::text || ':' || n.beacon_key::text)
    ORDER BY n.node_id <= p_node, n.node_id
    LIMIT 1);
  SELECT coalesce(array_agg(s.scope ORDER BY s.scope), '{}') INTO v_leads
    FROM pgleader.leader_state s
   WHERE s.scope = ANY (p_scopes) AND s.holder = p_node AND s.released_at IS NULL
     AND s.last_heartbeat = now();
  UPDATE pgleader.nodes n SET leads = v_leads
   WHERE n.node_id = p_node AND n.leads IS DISTINCT FROM v_leads;
END $$;
-- +goose StatementEnd
