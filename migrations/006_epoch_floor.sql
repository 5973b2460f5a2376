-- pgleader schema, version 6: epochs stay monotone across a primary failover.
--
-- A standby promoted after it missed the last commits of its primary (asynchronous
-- replication, or a synchronous commit whose wait for the standby was cancelled:
-- committed locally, maybe never replicated) has lost the last epoch bumps. Nodes
-- were told they held those epochs, and resources outside the database may remember
-- them; granting them again breaks fencing (S1).
--
-- The fix needs no clock and no coordination: every promotion moves the server to a
-- new WAL timeline, higher than any timeline the old primary wrote on. Each
-- timeline owns a range of epochs,
--
--     timeline t:  epochs above epoch_floor(t) = (t − 1) · 2^40
--
-- and a claim bumps from greatest(stored epoch, floor of the current timeline). So
-- every epoch granted after a promotion is above every epoch the old primary could
-- have granted (assuming fewer than 2^40 grants of one scope on one timeline), and
-- a server that never failed over (timeline 1, floor 0) grants 1, 2, 3 … as before.
-- The timeline is the one the server inserts WAL on, read from
-- pg_walfile_name(pg_current_wal_lsn()): right after a promotion it is already the
-- new one (pg_control_checkpoint() still shows the old one until the next
-- checkpoint), and on a standby the call fails, so a standby never grants.
--
-- Enforced by the database, not by the engine:
--   * a trigger refuses any change of leader_state.epoch to a value at or below the
--     floor (an engine of an older version, an operator's UPDATE);
--   * fence refuses a token whose epoch is at or below the floor: a term granted
--     before the promotion is over, whatever the replicated row still says;
--   * the first claim on a new timeline records it in pgleader.timelines, audits
--     'epoch_floor_raised' and NOTIFYs leader_change (event 'failover'), which the
--     collector turns into an alert.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.schema_version() RETURNS int
LANGUAGE sql IMMUTABLE AS $$ SELECT 6 $$;
-- +goose StatementEnd

-- wal_timeline: the timeline this primary inserts WAL on. Fails during recovery
-- (SQLSTATE 55000, "recovery is in progress").
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.wal_timeline() RETURNS bigint
LANGUAGE sql VOLATILE AS $$
  SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint
$$;
-- +goose StatementEnd

-- epoch_floor: every epoch granted on this timeline is above it.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.epoch_floor() RETURNS bigint
LANGUAGE sql VOLATILE AS $$ SELECT (pgleader.wal_timeline() - 1) << 40 $$;
-- +goose StatementEnd

-- timelines: the timelines claims were made on, one row each, written by the first
-- claim on it. A row for a timeline above 1 is a failover this database went
-- through (or a point-in-time recovery): the collector alerts on a new one.
CREATE TABLE IF NOT EXISTS pgleader.timelines (
  timeline       bigint PRIMARY KEY,
  epoch_floor    bigint NOT NULL,
  first_claim_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  first_claim_by text,
  -- the highest epoch on record when the timeline was first claimed on: what the
  -- old primary had replicated (bumps after it were lost with it, or never made)
  max_epoch_seen bigint
);

-- note_timeline: record the current timeline if it is new (see timelines).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.note_timeline(p_node text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_tl    bigint := pgleader.wal_timeline();
  v_prev  bigint;
  v_max   bigint;
BEGIN
  IF EXISTS (SELECT 1 FROM pgleader.timelines t WHERE t.timeline = v_tl) THEN
    RETURN;
  END IF;
  SELECT max(t.timeline) INTO v_prev FROM pgleader.timelines t;
  SELECT max(s.epoch) INTO v_max FROM pgleader.leader_state s;
  INSERT INTO pgleader.timelines (timeline, epoch_floor, first_claim_by, max_epoch_seen)
  VALUES (v_tl, (v_tl - 1) << 40, p_node, v_max)
  ON CONFLICT (timeline) DO NOTHING;
  IF NOT FOUND OR v_tl = 1 THEN
    RETURN;
  END IF;
  INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
  VALUES (NULL, p_node, (v_tl - 1) << 40, 'epoch_floor_raised',
          jsonb_build_object('timeline', v_tl, 'previous_timeline', v_prev,
                             'epoch_floor', (v_tl - 1) << 40, 'max_epoch_on_record', v_max));
  PERFORM pg_notify('leader_change', json_build_object(
      'event', 'failover', 'timeline', v_tl, 'epoch', (v_tl - 1) << 40, 'holder', p_node)::text);
END $$;
-- +goose StatementEnd

-- The floor, enforced on every write of an epoch (heartbeats do not set it, so they
-- do not fire this).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.check_epoch_floor() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  v_floor bigint := pgleader.epoch_floor();
BEGIN
  IF NEW.epoch <= v_floor AND NEW.epoch > 0 THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF04',
      MESSAGE = format('pgleader: epoch %s of scope %L is at or below the floor %s of timeline %s (a failover happened; claims must bump from the floor: upgrade the engine to schema version 6)',
                       NEW.epoch, NEW.scope, v_floor, pgleader.wal_timeline());
  END IF;
  RETURN NEW;
END $$;
-- +goose StatementEnd

DROP TRIGGER IF EXISTS epoch_floor ON pgleader.leader_state;
CREATE TRIGGER epoch_floor BEFORE UPDATE OF epoch ON pgleader.leader_state
  FOR EACH ROW WHEN (NEW.epoch IS DISTINCT FROM OLD.epoch) EXECUTE FUNCTION pgleader.check_epoch_floor();

-- fence, version 6: as before, and a token from an earlier timeline (at or below the
-- floor) is refused even while the replicated row still names its term.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.fence(p_scope text, p_epoch bigint, p_holder text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  st      pgleader.leader_state;
  v_floor bigint := pgleader.epoch_floor();
BEGIN
  SELECT * INTO st FROM pgleader.leader_state s WHERE s.scope = p_scope FOR KEY SHARE;
  IF st.session_lease_ms > 0 THEN
    PERFORM set_config('idle_in_transaction_session_timeout', st.session_lease_ms::text, true);
  END IF;
  IF p_epoch <= v_floor THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF01',
      MESSAGE = format('pgleader: fenced: write for scope %L carries epoch %s, granted before the failover to timeline %s (epochs now start above %s)',
                       p_scope, p_epoch, pgleader.wal_timeline(), v_floor);
  END IF;
  IF NOT FOUND OR st.epoch IS DISTINCT FROM p_epoch OR st.released_at IS NOT NULL
     OR st.holder IS NULL OR (p_holder IS NOT NULL AND st.holder IS DISTINCT FROM p_holder) THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF01',
      MESSAGE = format('pgleader: fenced: write for scope %L carries epoch %s, current is %s (holder %s)',
                       p_scope, p_epoch, coalesce(st.epoch::text, 'none'), coalesce(st.holder, 'none'));
  END IF;
END $$;
-- +goose StatementEnd

-- claim_batch, version 6: as version 5, but each won scope bumps from
-- greatest(stored epoch, epoch_floor()), and the first claim on a new timeline
-- records it (note_timeline). The elected audit row names the floor when it lifted
-- the epoch.
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
  v_floor   bigint := pgleader.epoch_floor(); -- raises on a standby: a standby never grants
BEGIN
  PERFORM set_config('synchronous_commit', 'on', true);
  PERFORM pgleader.note_timeline(p_node);
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
                                  'prev_closed', NOT c.was_open, 'backend_pid', pg_backend_pid(),
                                  'epoch_floor', CASE WHEN c.stored_epoch < v_floor THEN v_floor END),
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
-- No Down section (see 001).
