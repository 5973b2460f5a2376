-- pgleader schema, version 8: targeted handover, candidate priority, scope
-- lifecycle.
--
--   * nodes.priority (default 1; 0 = never leads): when a scope is free, a claim is
--     deferred while a live, waiting candidate of higher priority campaigns for it
--     (claim_batch answers deferred_to), so the highest-priority candidate wins
--     every time, not by race. A deferral is bounded: once it has lasted three of
--     that candidate's heartbeat intervals (it heartbeats, so it sees the free
--     scope within one), the claim goes through.
--   * request_handover(scope, to, timeout, via): an operator asks the leader to
--     hand the scope to a chosen node (or the best live candidate). It is
--     refused, changing nothing, when the target is unknown, not running, not a
--     candidate, of priority 0, already leading, or cooling down after resigning.
--     The leader learns it from its heartbeat (and at once from the notification),
--     drains, and releases as handed_over; the scope stays reserved for the target
--     until the request's deadline, while the target is alive.
--   * leader_state.retired_at: pgleader scope retire (retire_scope) takes a scope
--     no live node campaigns for out of the views and alerts, keeping its history;
--     a node that campaigns for it again revives it.
--   * last_holder and cooldown_until record a clean release, so that a deferral
--     never waits for a node that just resigned the scope.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.schema_version() RETURNS int
LANGUAGE sql IMMUTABLE AS $$ SELECT 8 $$;
-- +goose StatementEnd

ALTER TABLE pgleader.nodes ADD COLUMN IF NOT EXISTS priority int NOT NULL DEFAULT 1;
ALTER TABLE pgleader.nodes ADD COLUMN IF NOT EXISTS resign_cooldown_ms int;
ALTER TABLE pgleader.leader_state ADD COLUMN IF NOT EXISTS handover_to text;
ALTER TABLE pgleader.leader_state ADD COLUMN IF NOT EXISTS handover_epoch bigint;
ALTER TABLE pgleader.leader_state ADD COLUMN IF NOT EXISTS handover_deadline timestamptz;
ALTER TABLE pgleader.leader_state ADD COLUMN IF NOT EXISTS handover_by text;
ALTER TABLE pgleader.leader_state ADD COLUMN IF NOT EXISTS last_holder text;
ALTER TABLE pgleader.leader_state ADD COLUMN IF NOT EXISTS cooldown_until timestamptz;
ALTER TABLE pgleader.leader_state ADD COLUMN IF NOT EXISTS deferred_since timestamptz;
ALTER TABLE pgleader.leader_state ADD COLUMN IF NOT EXISTS retired_at timestamptz;
ALTER TABLE pgleader.leader_state ADD COLUMN IF NOT EXISTS retired_by text;
ALTER TABLE pgleader.terms ADD COLUMN IF NOT EXISTS handed_to text;

-- +goose StatementBegin
DO $$
BEGIN
  ALTER TABLE pgleader.nodes DROP CONSTRAINT IF EXISTS nodes_priority_check;
  ALTER TABLE pgleader.nodes ADD CONSTRAINT nodes_priority_check CHECK (priority >= 0);
  ALTER TABLE pgleader.terms DROP CONSTRAINT IF EXISTS terms_release_reason_check;
  ALTER TABLE pgleader.terms ADD CONSTRAINT terms_release_reason_check CHECK (release_reason IN
      ('resigned', 'shutdown', 'handed_over', 'lost_connection', 'heartbeat_timeout', 'evicted', 'crashed'));
END $$;
-- +goose StatementEnd

-- live_nodes: the running nodes (registered, not stopped, their leadership
-- session alive: its beacon lock held), with what claims and handovers weigh.
-- p_locks is lock_map() (one read of pg_locks, shared with the caller).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.live_nodes(p_locks jsonb)
RETURNS TABLE (node_id text, priority int, scopes text[], heartbeat_interval_ms int, last_seen timestamptz)
LANGUAGE sql STABLE AS $$
  SELECT n.node_id, n.priority, n.scopes, n.heartbeat_interval_ms, n.last_seen
    FROM pgleader.nodes n
   WHERE n.stopped_at IS NULL AND n.beacon_key IS NOT NULL AND n.backend_pid IS NOT NULL
     AND p_locks ? (n.backend_pid::text || ':' || n.beacon_key::text)
$$;
-- +goose StatementEnd

-- register_node, version 8: as version 7, plus the node's priority and resign
-- cooldown; a scope it campaigns for that was retired is revived (audited).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.register_node(
    p_node text, p_hostname text, p_os_pid int, p_version text, p_scopes text[],
    p_interval_ms int, p_trust_ms int, p_lease_ms int, p_beacon_key bigint, p_guard_key bigint,
    p_priority int, p_cooldown_ms int)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgleader, pg_temp AS $$
BEGIN
  IF p_priority IS NULL OR p_priority < 0 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('pgleader: priority %s: must be 0 or more', p_priority);
  END IF;
  PERFORM pgleader.register_node(p_node, p_hostname, p_os_pid, p_version, p_scopes,
                                 p_interval_ms, p_trust_ms, p_lease_ms, p_beacon_key, p_guard_key);
  UPDATE pgleader.nodes n SET priority = p_priority, resign_cooldown_ms = p_cooldown_ms
   WHERE n.node_id = p_node AND n.backend_pid = pg_backend_pid();
  WITH revived AS (
    UPDATE pgleader.leader_state s SET retired_at = NULL, retired_by = NULL
     WHERE s.scope = ANY (p_scopes) AND s.retired_at IS NOT NULL
    RETURNING s.scope, s.epoch
  )
  INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
  SELECT r.scope, p_node, r.epoch, 'scope_revived', jsonb_build_object('by', p_node) FROM revived r;
END $$;
-- +goose StatementEnd

-- claim_batch, version 8: as version 6, plus who may claim a free scope:
--   * a scope reserved by a handover (handover_to, before handover_deadline, the
--     target alive) goes to its target only;
--   * otherwise a claim is deferred while a live candidate of higher priority,
--     not cooling down after resigning the scope, campaigns for it: for at most
--     three of that candidate's heartbeat intervals from the first deferral
--     (deferred_since), after which the claim goes through;
--   * a node of priority 0 never wins a claim.
-- A deferred scope answers acquired = false, busy = false and, in prev_holder,
-- the node it waits for (its lock is given back): prev_holder is otherwise empty
-- on a row not acquired, and the row type stays version 6's, so that the earlier
-- files still apply over this one. A won claim clears the handover, the deferral
-- and retirement. pg_locks is still read once.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.claim_batch(
    p_node text, p_hostname text, p_guard_key bigint,
    p_interval_ms int, p_timeout_ms int, p_trust_ms int, p_lease_ms int,
    p_scopes text[], p_keys bigint[], p_announce text DEFAULT NULL)
RETURNS TABLE (scope text, acquired boolean, busy boolean, epoch bigint, holder text,
               prev_holder text, prev_epoch bigint, prev_closed boolean,
               prev_guard_key bigint, prev_guard_held boolean, prev_trust_ms int,
               prev_reason text, wait_guards bigint[])
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgleader, pg_temp AS $$
DECLARE
  v_taken   bigint[] := '{}';  -- keys this batch locked
  v_cands   bigint[];          -- guards of the holders on record and of the unresolved chain
  v_held    bigint[];          -- those held at the start of the batch
  v_locks   jsonb;             -- 'pid:key' of every exclusive advisory lock, for lookups
  v_keys    bigint[];          -- every exclusively held advisory key
  v_locked  text[];            -- won scopes whose rows are ours
  v_busy    bigint[];
  v_bad     text;
  v_won     text[];
  v_prio    int;
  v_defer   jsonb := '{}';     -- scope → the node it is deferred to
  v_floor   bigint := pgleader.epoch_floor(); -- raises on a standby: a standby never grants
BEGIN
  PERFORM set_config('synchronous_commit', 'on', true);
  PERFORM pgleader.note_timeline(p_node);
  IF cardinality(p_scopes) IS DISTINCT FROM cardinality(p_keys) THEN
    RAISE EXCEPTION 'pgleader: claim_batch needs one key per scope (% scopes, % keys)',
      cardinality(p_scopes), cardinality(p_keys);
  END IF;
  SELECT n.priority INTO v_prio FROM pgleader.nodes n WHERE n.node_id = p_node AND n.backend_pid = pg_backend_pid();
  v_prio := coalesce(v_prio, 1);
  -- One read of pg_locks (before any lock of the batch is taken): which guards of
  -- holders on record and of the unresolved chain are held, and which nodes live.
  -- A guard seen held here and released meanwhile is waited on for nothing; a
  -- guard seen free stays free (guard keys are random per session).
  SELECT coalesce(jsonb_object_agg(l.pid::text || ':' || l.key::text, true), '{}'),
         coalesce(array_agg(DISTINCT l.key), '{}')
    INTO v_locks, v_keys
    FROM pgleader.advisory_locks() l WHERE l.mode = 'ExclusiveLock';
  SELECT coalesce(array_agg(DISTINCT g) FILTER (WHERE g IS NOT NULL), '{}') INTO v_cands
    FROM (SELECT s.holder_guard_key AS g FROM pgleader.leader_state s WHERE s.scope = ANY (p_scopes)
          UNION ALL
          SELECT unnest(s.unresolved_guards) FROM pgleader.leader_state s WHERE s.scope = ANY (p_scopes)) c;
  v_held := ARRAY(SELECT k FROM unnest(v_cands) k WHERE k = ANY (v_keys));
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

    -- Who else should have the free scopes: the handover target, else a higher
    -- priority candidate, for as long as the deferral lasts.
    IF cardinality(v_locked) > 0 THEN
      SELECT coalesce(jsonb_object_agg(d.scope, d.node), '{}') INTO v_defer FROM (
        SELECT s.scope,
               CASE
                 WHEN v_prio = 0 THEN ''
                 WHEN s.handover_to IS NOT NULL AND s.handover_to <> p_node AND s.handover_deadline > clock_timestamp()
                      AND EXISTS (SELECT 1 FROM pgleader.live_nodes(v_locks) ln
                                   WHERE ln.node_id = s.handover_to AND s.scope = ANY (ln.scopes))
                   THEN s.handover_to
                 ELSE (SELECT ln.node_id FROM pgleader.live_nodes(v_locks) ln
                        WHERE ln.priority > v_prio AND s.scope = ANY (ln.scopes) AND ln.node_id <> p_node
                          AND NOT coalesce(ln.node_id = s.last_holder AND s.cooldown_until > clock_timestamp(), false)
                          AND (s.deferred_since IS NULL OR s.deferred_since
                               + make_interval(secs => 3 * coalesce(ln.heartbeat_interval_ms, 500) / 1000.0) > clock_timestamp())
                        ORDER BY ln.priority DESC, ln.node_id LIMIT 1)
               END AS node
          FROM pgleader.leader_state s WHERE s.scope = ANY (v_locked)) d
       WHERE d.node IS NOT NULL;
      IF v_defer <> '{}' THEN
        UPDATE pgleader.leader_state s SET deferred_since = coalesce(s.deferred_since, clock_timestamp())
         WHERE s.scope = ANY (v_locked) AND v_defer ? s.scope AND v_defer->>s.scope <> '';
        v_busy := v_busy || ARRAY(SELECT s.lock_key FROM pgleader.leader_state s
                                   WHERE s.scope = ANY (v_locked) AND v_defer ? s.scope);
        v_locked := ARRAY(SELECT x FROM unnest(v_locked) x WHERE NOT v_defer ? x);
      END IF;
    END IF;
    PERFORM pg_advisory_unlock(k) FROM unnest(v_busy) k;
    v_taken := ARRAY(SELECT k FROM unnest(v_taken) k WHERE k <> ALL (v_busy));

    RETURN QUERY
    WITH calc AS MATERIALIZED (
      SELECT s.scope, greatest(s.epoch, v_floor) AS old_epoch, s.epoch AS stored_epoch, s.holder AS old_holder, s.holder_guard_key AS old_guard,
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
             s.handover_to = p_node AS handed, s.last_holder AS handed_from,
             s.retired_at IS NOT NULL AS was_retired,
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
          session_lease_ms = p_lease_ms, resign_requested_epoch = NULL, resign_requested_by = NULL,
          handover_to = NULL, handover_epoch = NULL, handover_deadline = NULL, handover_by = NULL,
          deferred_since = NULL, retired_at = NULL, retired_by = NULL
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
        SELECT c.scope, p_node, c.old_epoch, 'scope_revived', jsonb_build_object('by', p_node), 2
          FROM calc c WHERE c.was_retired
        UNION ALL
        SELECT c.scope, p_node, c.old_epoch + 1, 'elected',
               jsonb_strip_nulls(jsonb_build_object('prev_holder', c.old_holder, 'prev_epoch', c.old_epoch,
                                  'prev_closed', NOT c.was_open, 'backend_pid', pg_backend_pid(),
                                  'epoch_floor', CASE WHEN c.stored_epoch < v_floor THEN v_floor END,
                                  'handed_over_by', CASE WHEN c.handed THEN c.handed_from END,
                                  'priority', v_prio)),
               3
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

    -- Busy (the previous term's fenced writers hold the row) or deferred.
    RETURN QUERY
    SELECT u.s, false, NOT v_defer ? u.s, NULL::bigint, NULL::text, nullif(v_defer->>u.s, ''), NULL::bigint, NULL::boolean,
           NULL::bigint, NULL::boolean, NULL::int, NULL::text, NULL::bigint[]
      FROM unnest(p_scopes, p_keys) AS u(s, k) WHERE u.k = ANY (v_busy);

    -- Scopes held elsewhere: the epoch on record, and the holder while its backend
    -- holds the lock (NULL while the record is stale or a claim is in flight).
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

-- release_batch, version 8: as version 5, plus: a release of the term a handover
-- was requested for records its target (terms.handed_to) and keeps the scope
-- reserved for it (the announcement names it: "to"); a clean release (resigned,
-- handed_over) records the releasing node and its cooldown, so that no deferral
-- waits for it.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.release_batch(p_node text, p_scopes text[], p_epochs bigint[],
                                                  p_reasons text[])
RETURNS TABLE (scope text, ok boolean, busy boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgleader, pg_temp AS $$
DECLARE
  i          int;
  st         pgleader.leader_state;
  v_ours     boolean;
  v_now      timestamptz;
  v_done     text[] := '{}';
  v_to       text;
  v_cooldown int;
BEGIN
  PERFORM set_config('synchronous_commit', 'on', true);
  SELECT n.resign_cooldown_ms INTO v_cooldown FROM pgleader.nodes n
   WHERE n.node_id = p_node AND n.backend_pid = pg_backend_pid();
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
      v_to := CASE WHEN st.handover_epoch = st.epoch AND st.handover_deadline > v_now THEN st.handover_to END;
      UPDATE pgleader.terms t SET released_at = v_now, release_reason = p_reasons[i], handed_to = v_to
       WHERE t.scope = st.scope AND t.epoch = st.epoch AND t.released_at IS NULL;
      UPDATE pgleader.leader_state s SET holder = NULL, holder_pid = NULL,
             holder_guard_key = NULL, released_at = v_now,
             unresolved_guards = '{}', unresolved_trust_ms = 0,
             last_holder = p_node,
             cooldown_until = CASE WHEN p_reasons[i] IN ('resigned', 'handed_over')
                                   THEN v_now + make_interval(secs => coalesce(v_cooldown, 0) / 1000.0) END,
             handover_to = v_to, handover_epoch = CASE WHEN v_to IS NOT NULL THEN st.handover_epoch END,
             handover_deadline = CASE WHEN v_to IS NOT NULL THEN st.handover_deadline END,
             handover_by = CASE WHEN v_to IS NOT NULL THEN st.handover_by END
       WHERE s.scope = st.scope;
      INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
      VALUES (st.scope, p_node, st.epoch, 'released',
              jsonb_strip_nulls(jsonb_build_object('reason', p_reasons[i], 'to', v_to)));
      PERFORM pg_notify('leader_change', json_strip_nulls(json_build_object(
          'scope', st.scope, 'epoch', st.epoch, 'holder', p_node, 'event', 'released',
          'reason', p_reasons[i], 'to', v_to))::text);
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

-- node_heartbeat, version 8: as version 7, plus handovers: for a led scope an
-- operator asked to hand over (request_handover), resign is true and holder is
-- the target (a led row's holder is otherwise NULL; the row type stays version
-- 5's, so that the earlier files still apply over this one); the node then
-- drains and releases it as handed_over.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.node_heartbeat(p_node text, p_scopes text[], p_epochs bigint[],
                                                   p_follow text[], p_known bigint[],
                                                   p_settled text[] DEFAULT '{}')
RETURNS TABLE (kind text, scope text, ok boolean, epoch bigint, holder text, resign boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgleader, pg_temp AS $$
DECLARE
  v_leads text[];
  v_locks jsonb := pgleader.lock_map(); -- one read of pg_locks, looked up by 'pid:key'
  v_me    text := pg_backend_pid()::text || ':';
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  UPDATE pgleader.nodes n SET last_seen = now()
   WHERE n.node_id = p_node AND n.backend_pid = pg_backend_pid();
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
    RETURNING s.scope,
              s.resign_requested_epoch = want.epoch
                OR (s.handover_epoch = want.epoch AND s.handover_deadline > now()) AS resign,
              CASE WHEN s.handover_epoch = want.epoch AND s.handover_deadline > now() THEN s.handover_to END AS handover
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
  SELECT 'led'::text, want.scope, upd.scope IS NOT NULL, want.epoch, upd.handover, coalesce(upd.resign, false)
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
   WHERE n.node_id = p_node AND n.backend_pid = pg_backend_pid() AND n.leads IS DISTINCT FROM v_leads;
END $$;
-- +goose StatementEnd

-- request_handover: ask the leader of p_scope to hand it over to p_to (NULL: the
-- best live candidate — highest priority, then most recently seen, then node id),
-- within p_timeout_ms. Refused with PLF07 and a message naming the problem,
-- changing nothing, when the scope is unknown or retired, or the target is
-- unknown, not running, not a candidate of the scope, of priority 0, the leader
-- already, or cooling down after resigning the scope. Audited with the session's
-- login role. Returns the epoch the request is for (the current term; 0 when the
-- scope has no leader), the leader, and the target. A scope without a live leader
-- is reserved for the target, which is told to claim it at once.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.request_handover(p_scope text, p_to text, p_timeout_ms int, p_via text)
RETURNS TABLE (epoch bigint, holder text, target text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgleader, pg_temp AS $$
DECLARE
  st      pgleader.leader_state;
  n       pgleader.nodes;
  v_locks jsonb := pgleader.lock_map();
  v_live  boolean;
  v_hold  text;
  v_to    text := p_to;
BEGIN
  IF p_timeout_ms IS NULL OR p_timeout_ms <= 0 THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF07', MESSAGE = format('pgleader: handover timeout %s ms: must be positive', p_timeout_ms);
  END IF;
  SELECT * INTO st FROM pgleader.leader_state s WHERE s.scope = p_scope FOR NO KEY UPDATE;
  IF NOT FOUND AND NOT EXISTS (SELECT 1 FROM pgleader.nodes x WHERE p_scope = ANY (x.scopes)) THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF07', MESSAGE = format('pgleader: scope %L is unknown: no node campaigns for it and none ever led it', p_scope);
  END IF;
  IF st.retired_at IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF07', MESSAGE = format('pgleader: scope %L is retired: no node campaigns for it', p_scope);
  END IF;
  v_hold := CASE WHEN st.holder_pid IS NOT NULL AND st.released_at IS NULL
                  AND v_locks ? (st.holder_pid::text || ':' || st.lock_key::text) THEN st.holder END;
  IF v_to IS NULL THEN
    SELECT ln.node_id INTO v_to FROM pgleader.live_nodes(v_locks) ln
     WHERE p_scope = ANY (ln.scopes) AND ln.priority > 0 AND ln.node_id IS DISTINCT FROM v_hold
       AND NOT coalesce(ln.node_id = st.last_holder AND st.cooldown_until > clock_timestamp(), false)
     ORDER BY ln.priority DESC, ln.last_seen DESC, ln.node_id LIMIT 1;
    IF v_to IS NULL THEN
      RAISE EXCEPTION USING ERRCODE = 'PLF07',
        MESSAGE = format('pgleader: no other live candidate of priority above 0 campaigns for scope %L (a candidate cooling down after resigning it does not count)', p_scope);
    END IF;
  END IF;
  SELECT * INTO n FROM pgleader.nodes x WHERE x.node_id = v_to;
  IF NOT FOUND THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF07', MESSAGE = format('pgleader: node %L is unknown (never registered)', v_to);
  END IF;
  v_live := EXISTS (SELECT 1 FROM pgleader.live_nodes(v_locks) ln WHERE ln.node_id = v_to);
  IF NOT v_live THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF07',
      MESSAGE = format('pgleader: node %L is not running (%s)', v_to,
                       CASE WHEN n.stopped_at IS NOT NULL THEN 'stopped at ' || n.stopped_at ELSE 'last seen ' || n.last_seen END);
  END IF;
  IF NOT p_scope = ANY (n.scopes) THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF07', MESSAGE = format('pgleader: node %L is not a candidate for scope %L (it campaigns for %s)',
                                                              v_to, p_scope, array_to_string(n.scopes, ', '));
  END IF;
  IF n.priority = 0 THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF07', MESSAGE = format('pgleader: node %L has priority 0: it never leads', v_to);
  END IF;
  IF v_to = v_hold THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF07', MESSAGE = format('pgleader: node %L leads scope %L already (epoch %s)', v_to, p_scope, st.epoch);
  END IF;
  IF v_to = st.last_holder AND st.cooldown_until > clock_timestamp() THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF07',
      MESSAGE = format('pgleader: node %L resigned scope %L and cools down until %s', v_to, p_scope, st.cooldown_until);
  END IF;
  IF st.scope IS NULL THEN
    INSERT INTO pgleader.leader_state (scope, lock_key) VALUES (p_scope, pgleader.lock_key(p_scope))
    ON CONFLICT (scope) DO NOTHING;
  END IF;
  UPDATE pgleader.leader_state s SET handover_to = v_to,
         handover_epoch = CASE WHEN v_hold IS NOT NULL THEN s.epoch END,
         handover_deadline = clock_timestamp() + make_interval(secs => p_timeout_ms / 1000.0),
         handover_by = session_user
   WHERE s.scope = p_scope;
  INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
  VALUES (p_scope, v_hold, coalesce(st.epoch, 0), 'handover_requested',
          jsonb_build_object('to', v_to, 'by', session_user, 'via', p_via, 'timeout_ms', p_timeout_ms,
                             'application_name', current_setting('application_name')));
  IF v_hold IS NOT NULL THEN
    PERFORM pg_notify('leader_change', json_build_object(
        'scope', p_scope, 'epoch', st.epoch, 'holder', v_hold, 'event', 'handover_requested', 'to', v_to)::text);
  ELSE
    PERFORM pg_notify('leader_change', json_build_object(
        'scope', p_scope, 'epoch', coalesce(st.epoch, 0), 'event', 'released', 'to', v_to)::text);
  END IF;
  RETURN QUERY SELECT coalesce(st.epoch, 0), v_hold, v_to;
END $$;
-- +goose StatementEnd

-- cancel_handover: withdraw a handover to p_to that has not been completed (the
-- command that asked gave up). When the scope has no live leader, the followers
-- are told to claim it. Returns whether a request was withdrawn.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.cancel_handover(p_scope text, p_to text, p_via text)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgleader, pg_temp AS $$
DECLARE
  v_epoch bigint;
  v_free  boolean;
BEGIN
  UPDATE pgleader.leader_state s SET handover_to = NULL, handover_epoch = NULL,
         handover_deadline = NULL, handover_by = NULL
   WHERE s.scope = p_scope AND s.handover_to = p_to
  RETURNING s.epoch, s.holder IS NULL OR s.released_at IS NOT NULL INTO v_epoch, v_free;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
  VALUES (p_scope, NULL, v_epoch, 'handover_cancelled',
          jsonb_build_object('to', p_to, 'by', session_user, 'via', p_via));
  IF v_free THEN
    PERFORM pg_notify('leader_change', json_build_object(
        'scope', p_scope, 'epoch', v_epoch, 'event', 'released')::text);
  END IF;
  RETURN true;
END $$;
-- +goose StatementEnd

-- retire_scope: take a scope that no live node campaigns for out of the views and
-- alerts (its history stays). Refused with PLF08 while a running node campaigns
-- for it. A node that campaigns for it again revives it (register_node, claim).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.retire_scope(p_scope text, p_via text)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgleader, pg_temp AS $$
DECLARE
  v_locks jsonb := pgleader.lock_map();
  v_nodes text;
  v_epoch bigint;
BEGIN
  SELECT string_agg(ln.node_id, ', ' ORDER BY ln.node_id) INTO v_nodes
    FROM pgleader.live_nodes(v_locks) ln WHERE p_scope = ANY (ln.scopes);
  IF v_nodes IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF08',
      MESSAGE = format('pgleader: scope %L cannot be retired: running nodes campaign for it (%s); stop them or remove the scope from their configuration first', p_scope, v_nodes);
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pgleader.leader_state s WHERE s.scope = p_scope)
     AND NOT EXISTS (SELECT 1 FROM pgleader.nodes x WHERE p_scope = ANY (x.scopes)) THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF08', MESSAGE = format('pgleader: scope %L is unknown: no node campaigns for it and none ever led it', p_scope);
  END IF;
  INSERT INTO pgleader.leader_state (scope, lock_key) VALUES (p_scope, pgleader.lock_key(p_scope))
  ON CONFLICT (scope) DO NOTHING;
  UPDATE pgleader.leader_state s SET retired_at = clock_timestamp(), retired_by = session_user,
         handover_to = NULL, handover_epoch = NULL, handover_deadline = NULL, handover_by = NULL
   WHERE s.scope = p_scope AND s.retired_at IS NULL
  RETURNING s.epoch INTO v_epoch;
  IF NOT FOUND THEN
    RETURN false; -- retired already
  END IF;
  INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
  VALUES (p_scope, NULL, v_epoch, 'scope_retired',
          jsonb_build_object('by', session_user, 'via', p_via, 'application_name', current_setting('application_name')));
  PERFORM pg_notify('leader_change', json_build_object('scope', p_scope, 'event', 'retired')::text);
  RETURN true;
END $$;
-- +goose StatementEnd

-- privilege_lists: the functions that run as the owner (SECURITY DEFINER: they
-- write, or call what a DBA may revoke from PUBLIC, the advisory-lock functions),
-- and those each role may execute. Version 8: the operator's request_handover,
-- cancel_handover and retire_scope.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.privilege_lists(
    OUT definer text[], OUT node text[], OUT reader text[], OUT operator text[])
LANGUAGE sql IMMUTABLE AS $$
  SELECT ARRAY['claim_batch', 'release_batch', 'node_heartbeat', 'unlock_held_many',
               'await_release', 'ring_next', 'register_node', 'node_stopped', 'session_lock',
               'fence', 'fence_rejected', 'request_resign', 'record_eviction', 'interference',
               'request_handover', 'cancel_handover', 'retire_scope'],
         ARRAY['schema_version', 'lock_key', 'claim_batch', 'release_batch', 'node_heartbeat',
               'unlock_held_many', 'await_release', 'ring_next', 'register_node', 'node_stopped',
               'session_lock', 'fence', 'fence_rejected', 'epoch_floor', 'wal_timeline',
               'interference'],
         ARRAY['schema_version', 'lock_key', 'lock_held', 'advisory_locks', 'lock_map',
               'wal_timeline', 'epoch_floor', 'interference'],
         ARRAY['request_resign', 'record_eviction', 'request_handover', 'cancel_handover', 'retire_scope']
$$;
-- +goose StatementEnd

-- apply_privileges, version 8: as version 7, with the lists of functions read from
-- privilege_lists(), so that a later version that adds functions replaces that
-- small function only. Makes the schema's ownership and grants what
-- docs/security.md lists, for the roles named in pgleader.roles. Idempotent; every migration from
-- version 7 on ends by calling it. Runs with the migrating role's rights.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.apply_privileges() RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pgleader, pg_temp AS $$
DECLARE
  r        record;
  v_owner  name;
  v_node   name;
  v_reader name;
  v_oper   name;
  v_can    boolean;
  -- Which functions run as the owner, and which each role may run: the lists of
  -- the schema's version (privilege_lists, replaced by each version that adds
  -- functions).
  v_definer text[];
  v_node_fn text[];
  v_read_fn text[];
  v_oper_fn text[];
BEGIN
  SELECT l.definer, l.node, l.reader, l.operator INTO v_definer, v_node_fn, v_read_fn, v_oper_fn
    FROM pgleader.privilege_lists() l;
  SELECT role_name INTO v_owner FROM pgleader.roles WHERE kind = 'owner';
  SELECT role_name INTO v_node FROM pgleader.roles WHERE kind = 'node';
  SELECT role_name INTO v_reader FROM pgleader.roles WHERE kind = 'reader';
  SELECT role_name INTO v_oper FROM pgleader.roles WHERE kind = 'operator';
  SELECT u.rolsuper OR u.rolcreaterole INTO v_can FROM pg_catalog.pg_roles u WHERE u.rolname = current_user;

  FOR r IN SELECT x AS name FROM unnest(ARRAY[v_owner, v_node, v_reader, v_oper]) x
            WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles g WHERE g.rolname = x) LOOP
    IF NOT v_can THEN
      RAISE EXCEPTION USING ERRCODE = '42501',
        MESSAGE = format('pgleader: role %I does not exist, and %I may not create roles', r.name, current_user),
        HINT = format('have a DBA run: CREATE ROLE %I NOLOGIN; GRANT %I TO %I; (all four roles: docs/security.md), or migrate once as a role with CREATEROLE',
                      r.name, v_owner, current_user);
    END IF;
    -- Roles are shared by every database of the cluster: another database's
    -- migration may create the same role at the same time.
    BEGIN
      EXECUTE format('CREATE ROLE %I NOLOGIN', r.name);
    EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
    END;
  END LOOP;
  IF NOT pg_catalog.pg_has_role(current_user, v_owner, 'MEMBER') THEN
    BEGIN
      EXECUTE format('GRANT %I TO %I', v_owner, current_user);
    EXCEPTION WHEN unique_violation THEN NULL;
    END;
  END IF;
  IF NOT pg_catalog.pg_has_role(v_oper, v_reader, 'MEMBER') THEN
    BEGIN
      EXECUTE format('GRANT %I TO %I', v_reader, v_oper);
    EXCEPTION WHEN unique_violation THEN NULL;
    END;
  END IF;
  -- interference() reports the client address of a squatter's session.
  IF NOT pg_catalog.pg_has_role(v_owner, 'pg_read_all_stats', 'MEMBER') THEN
    BEGIN
      EXECUTE format('GRANT pg_read_all_stats TO %I', v_owner);
    EXCEPTION WHEN unique_violation THEN NULL;
              WHEN insufficient_privilege THEN
      RAISE NOTICE 'pgleader: % may not grant pg_read_all_stats to %: squatters will be named without their client address', current_user, v_owner;
    END;
  END IF;

  -- Ownership: the schema and everything in it (the publication of the logical
  -- source stays with whoever created it: a publication's owner needs CREATE on the
  -- database).
  EXECUTE format('ALTER SCHEMA pgleader OWNER TO %I', v_owner);
  FOR r IN SELECT c.oid::regclass AS obj, c.relkind FROM pg_catalog.pg_class c
            WHERE c.relnamespace = 'pgleader'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
              AND c.relowner <> (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = v_owner) LOOP
    IF r.relkind = 'S' THEN
      -- a sequence owned by a column follows its table
      CONTINUE WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_depend d WHERE d.classid = 'pg_class'::regclass
                             AND d.objid = r.obj::oid AND d.deptype IN ('a', 'i'));
      EXECUTE format('ALTER SEQUENCE %s OWNER TO %I', r.obj, v_owner);
    ELSE
      EXECUTE format('ALTER TABLE %s OWNER TO %I', r.obj, v_owner);
    END IF;
  END LOOP;
  FOR r IN SELECT p.oid::regprocedure AS fn, p.proname, p.prosecdef, p.proconfig FROM pg_catalog.pg_proc p
            WHERE p.pronamespace = 'pgleader'::regnamespace LOOP
    EXECUTE format('ALTER FUNCTION %s OWNER TO %I', r.fn, v_owner);
    IF r.proconfig IS NULL OR NOT ('search_path=pg_catalog, pgleader, pg_temp' = ANY (r.proconfig)) THEN
      EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, pgleader, pg_temp', r.fn);
    END IF;
    IF (r.proname = ANY (v_definer)) <> r.prosecdef THEN
      EXECUTE format('ALTER FUNCTION %s %s', r.fn,
                     CASE WHEN r.proname = ANY (v_definer) THEN 'SECURITY DEFINER' ELSE 'SECURITY INVOKER' END);
    END IF;
  END LOOP;

  -- Grants: nothing to PUBLIC; each role exactly its list (re-applied from
  -- scratch, so a grant removed from the list is taken back).
  FOR r IN SELECT x AS name FROM unnest(ARRAY['public', v_node, v_reader, v_oper]) x LOOP
    EXECUTE format('REVOKE ALL ON SCHEMA pgleader FROM %s', CASE WHEN r.name = 'public' THEN 'PUBLIC' ELSE quote_ident(r.name) END);
    EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA pgleader FROM %s', CASE WHEN r.name = 'public' THEN 'PUBLIC' ELSE quote_ident(r.name) END);
    EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA pgleader FROM %s', CASE WHEN r.name = 'public' THEN 'PUBLIC' ELSE quote_ident(r.name) END);
    EXECUTE format('REVOKE ALL ON ALL FUNCTIONS IN SCHEMA pgleader FROM %s', CASE WHEN r.name = 'public' THEN 'PUBLIC' ELSE quote_ident(r.name) END);
  END LOOP;
  EXECUTE format('GRANT USAGE ON SCHEMA pgleader TO %I, %I, %I', v_node, v_reader, v_oper);
  EXECUTE format('GRANT SELECT ON ALL TABLES IN SCHEMA pgleader TO %I', v_reader);
  FOR r IN SELECT p.oid::regprocedure AS fn, p.proname FROM pg_catalog.pg_proc p
            WHERE p.pronamespace = 'pgleader'::regnamespace LOOP
    IF r.proname = ANY (v_node_fn) THEN
      EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', r.fn, v_node);
    END IF;
    IF r.proname = ANY (v_read_fn) THEN
      EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', r.fn, v_reader);
    END IF;
    IF r.proname = ANY (v_oper_fn) THEN
      EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', r.fn, v_oper);
    END IF;
  END LOOP;
END $$;
-- +goose StatementEnd

SELECT pgleader.apply_privileges();
