-- pgleader schema, version 9: lease mode, for deployments that reach PostgreSQL
-- only through a transaction pooler (PgBouncer, Supavisor, RDS Proxy, pgcat),
-- where session advisory locks would leak.
--
-- A scope in lease mode is held by row ownership instead of an advisory lock:
--   * the holder renews its lease with every heartbeat (lease_seq + 1, in one
--     transaction, like any statement through a pooler);
--   * a follower may claim only a scope that is free (released) or whose lease it
--     observed unchanged for a whole lease on its own monotonic clock: it passes
--     the lease_seq it observed, and the claim is a compare-and-swap on it (and,
--     as a second guard, on the lease having expired in the server's time);
--   * the epoch, fence, terms and audit are those of lock mode (S1, S3), and the
--     gate is the engine's (S4); safety across a frozen holder rests on the trust
--     window being shorter than the lease by a margin that covers clock-rate
--     differences (docs/poolers.md).
-- A scope runs in one mode: a claim that would switch a scope's mode while a live
-- candidate of the other mode campaigns for it is refused (PLF09).

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.schema_version() RETURNS int
LANGUAGE sql IMMUTABLE AS $$ SELECT 9 $$;
-- +goose StatementEnd

ALTER TABLE pgleader.leader_state ADD COLUMN IF NOT EXISTS mode text NOT NULL DEFAULT 'lock';
ALTER TABLE pgleader.leader_state ADD COLUMN IF NOT EXISTS lease_seq bigint NOT NULL DEFAULT 0;
ALTER TABLE pgleader.nodes ADD COLUMN IF NOT EXISTS mode text NOT NULL DEFAULT 'lock';
ALTER TABLE pgleader.nodes ADD COLUMN IF NOT EXISTS lease_token bigint;

-- +goose StatementBegin
DO $$
BEGIN
  ALTER TABLE pgleader.leader_state DROP CONSTRAINT IF EXISTS leader_state_mode_check;
  ALTER TABLE pgleader.leader_state ADD CONSTRAINT leader_state_mode_check CHECK (mode IN ('lock', 'lease'));
  ALTER TABLE pgleader.nodes DROP CONSTRAINT IF EXISTS nodes_mode_check;
  ALTER TABLE pgleader.nodes ADD CONSTRAINT nodes_mode_check CHECK (mode IN ('lock', 'lease'));
END $$;
-- +goose StatementEnd

-- live_nodes, version 9: lease-mode nodes are live while they heartbeat (seen
-- within three of their intervals); lock-mode nodes while their beacon is held.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.live_nodes(p_locks jsonb)
RETURNS TABLE (node_id text, priority int, scopes text[], heartbeat_interval_ms int, last_seen timestamptz)
LANGUAGE sql STABLE AS $$
  SELECT n.node_id, n.priority, n.scopes, n.heartbeat_interval_ms, n.last_seen
    FROM pgleader.nodes n
   WHERE n.stopped_at IS NULL
     AND CASE WHEN n.mode = 'lease'
              THEN n.last_seen > clock_timestamp() - make_interval(secs => 3 * coalesce(n.heartbeat_interval_ms, 500) / 1000.0)
              ELSE n.beacon_key IS NOT NULL AND n.backend_pid IS NOT NULL
                   AND p_locks ? (n.backend_pid::text || ':' || n.beacon_key::text) END
$$;
-- +goose StatementEnd

-- check_mode: a claim (an epoch bump) decides the scope's mode — lock when it
-- records a leadership backend (holder_pid), lease otherwise — and may switch it
-- only while no live candidate of the other mode campaigns for the scope.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.check_mode() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pgleader, pg_temp AS $$
DECLARE
  v_mode  text := CASE WHEN NEW.holder_pid IS NOT NULL THEN 'lock' ELSE 'lease' END;
  v_nodes text;
BEGIN
  IF NEW.holder IS NULL THEN
    RETURN NEW; -- not a claim
  END IF;
  IF v_mode <> OLD.mode THEN
    SELECT string_agg(n.node_id, ', ' ORDER BY n.node_id) INTO v_nodes
      FROM pgleader.nodes n JOIN pgleader.live_nodes(pgleader.lock_map()) ln ON ln.node_id = n.node_id
     WHERE n.mode = OLD.mode AND NEW.scope = ANY (n.scopes);
    IF v_nodes IS NOT NULL THEN
      RAISE EXCEPTION USING ERRCODE = 'PLF09',
        MESSAGE = format('pgleader: scope %L runs in %s mode (live candidates: %s); a %s-mode node may not claim it: every candidate of a scope must use the same mode',
                         NEW.scope, OLD.mode, v_nodes, v_mode);
    END IF;
  END IF;
  NEW.mode := v_mode;
  RETURN NEW;
END $$;
-- +goose StatementEnd

DROP TRIGGER IF EXISTS check_mode ON pgleader.leader_state;
CREATE TRIGGER check_mode BEFORE UPDATE OF epoch ON pgleader.leader_state
  FOR EACH ROW WHEN (NEW.epoch IS DISTINCT FROM OLD.epoch) EXECUTE FUNCTION pgleader.check_mode();

-- lease_register: register (or refresh) a lease-mode node. token is random per
-- engine session and binds the node's later calls (heartbeat, claims, releases)
-- to it, as the backend pid does in lock mode. A node id that is live under
-- another login role is refused (PLF06), as in register_node.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.lease_register(
    p_node text, p_hostname text, p_os_pid int, p_version text, p_scopes text[],
    p_interval_ms int, p_trust_ms int, p_lease_ms int, p_token bigint, p_priority int, p_cooldown_ms int)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgleader, pg_temp AS $$
DECLARE
  n pgleader.nodes;
BEGIN
  IF p_priority IS NULL OR p_priority < 0 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('pgleader: priority %s: must be 0 or more', p_priority);
  END IF;
  SELECT * INTO n FROM pgleader.nodes x WHERE x.node_id = p_node FOR UPDATE;
  IF FOUND AND n.login_role IS DISTINCT FROM session_user::text AND n.login_role IS NOT NULL
     AND n.stopped_at IS NULL AND EXISTS (SELECT 1 FROM pgleader.live_nodes(pgleader.lock_map()) ln WHERE ln.node_id = p_node) THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF06',
      MESSAGE = format('pgleader: node %L is running under login role %I; role %I may not register it', p_node, n.login_role, session_user),
      HINT = 'give each process its own node id';
  END IF;
  INSERT INTO pgleader.nodes AS x (node_id, hostname, os_pid, version, backend_pid, scopes,
         heartbeat_interval_ms, trust_window_ms, session_lease_ms, beacon_key, guard_key, login_role,
         priority, resign_cooldown_ms, mode, lease_token)
  VALUES (p_node, p_hostname, p_os_pid, p_version, NULL, p_scopes,
          p_interval_ms, p_trust_ms, p_lease_ms, NULL, NULL, session_user, p_priority, p_cooldown_ms, 'lease', p_token)
  ON CONFLICT (node_id) DO UPDATE SET hostname = EXCLUDED.hostname,
         os_pid = EXCLUDED.os_pid, version = EXCLUDED.version, backend_pid = NULL, scopes = EXCLUDED.scopes,
         heartbeat_interval_ms = EXCLUDED.heartbeat_interval_ms, trust_window_ms = EXCLUDED.trust_window_ms,
         session_lease_ms = EXCLUDED.session_lease_ms, beacon_key = NULL, guard_key = NULL,
         login_role = EXCLUDED.login_role, priority = EXCLUDED.priority,
         resign_cooldown_ms = EXCLUDED.resign_cooldown_ms, mode = 'lease', lease_token = EXCLUDED.lease_token,
         last_seen = now(), stopped_at = NULL, leads = '{}';
  WITH revived AS (
    UPDATE pgleader.leader_state s SET retired_at = NULL, retired_by = NULL
     WHERE s.scope = ANY (p_scopes) AND s.retired_at IS NOT NULL
    RETURNING s.scope, s.epoch
  )
  INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
  SELECT r.scope, p_node, r.epoch, 'scope_revived', jsonb_build_object('by', p_node) FROM revived r;
  PERFORM pg_notify('leader_change', json_build_object('event', 'node_joined', 'holder', p_node)::text);
END $$;
-- +goose StatementEnd

-- lease_heartbeat: one round trip of a lease-mode node (synchronous_commit off,
-- like node_heartbeat):
--   kind 'led'     per led scope: ok when the term is still this node's (the lease
--                  is renewed: lease_seq + 1); resign and handover as in
--                  node_heartbeat;
--   kind 'follow'  per followed scope: its epoch, its holder while a term is open
--                  (NULL when free), and its lease_seq, which the follower watches
--                  for a whole lease before it may claim.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.lease_heartbeat(p_node text, p_token bigint, p_scopes text[], p_epochs bigint[],
                                                    p_follow text[])
RETURNS TABLE (kind text, scope text, ok boolean, epoch bigint, holder text, seq bigint, resign boolean, handover text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgleader, pg_temp AS $$
DECLARE
  v_mine boolean;
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  UPDATE pgleader.nodes n SET last_seen = now()
   WHERE n.node_id = p_node AND n.lease_token = p_token AND n.mode = 'lease'
  RETURNING true INTO v_mine;
  RETURN QUERY
  WITH want AS (
    SELECT w.scope, w.epoch FROM unnest(p_scopes, p_epochs) AS w(scope, epoch)
  ), upd AS (
    UPDATE pgleader.leader_state s SET last_heartbeat = now(), lease_seq = s.lease_seq + 1
      FROM want
     WHERE coalesce(v_mine, false) AND s.scope = want.scope AND s.epoch = want.epoch AND s.holder = p_node
       AND s.released_at IS NULL AND s.mode = 'lease'
    RETURNING s.scope, s.lease_seq,
              s.resign_requested_epoch = want.epoch
                OR (s.handover_epoch = want.epoch AND s.handover_deadline > now()) AS resign,
              CASE WHEN s.handover_epoch = want.epoch AND s.handover_deadline > now() THEN s.handover_to END AS handover
  )
  SELECT 'led'::text, want.scope, upd.scope IS NOT NULL, want.epoch, p_node, upd.lease_seq,
         coalesce(upd.resign, false), upd.handover
    FROM want LEFT JOIN upd ON upd.scope = want.scope
  UNION ALL
  SELECT 'follow'::text, f.scope, false, coalesce(s.epoch, 0),
         CASE WHEN s.holder IS NOT NULL AND s.released_at IS NULL THEN s.holder END,
         coalesce(s.lease_seq, 0), false, NULL::text
    FROM unnest(p_follow) AS f(scope) LEFT JOIN pgleader.leader_state s ON s.scope = f.scope;
  UPDATE pgleader.nodes n SET leads = coalesce(
           (SELECT array_agg(s.scope ORDER BY s.scope) FROM pgleader.leader_state s
             WHERE s.scope = ANY (p_scopes) AND s.holder = p_node AND s.released_at IS NULL AND s.last_heartbeat = now()), '{}')
   WHERE n.node_id = p_node AND n.lease_token = p_token;
END $$;
-- +goose StatementEnd

-- lease_claim_batch: claim, in one transaction, every scope of p_scopes that is
-- free (never claimed, or released) or whose lease expired: its lease_seq is still
-- p_seqs[i] (the follower watched it unchanged for a whole lease on its own
-- clock) and, in the server's time, its last renewal is older than the holder's
-- lease. Never waits: a row locked by fenced writers is busy. Handover
-- reservations and priorities apply as in claim_batch (the node a scope is
-- deferred to in prev_holder of its row not acquired). Rows as claim_batch (the
-- guard columns are NULL: lease mode has no guards; a successor's safety is the
-- lease it waited out).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.lease_claim_batch(
    p_node text, p_token bigint, p_hostname text,
    p_interval_ms int, p_timeout_ms int, p_trust_ms int, p_lease_ms int,
    p_scopes text[], p_seqs bigint[])
RETURNS TABLE (scope text, acquired boolean, busy boolean, epoch bigint, holder text,
               prev_holder text, prev_epoch bigint, prev_closed boolean,
               prev_guard_key bigint, prev_guard_held boolean, prev_trust_ms int,
               prev_reason text, wait_guards bigint[])
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgleader, pg_temp AS $$
DECLARE
  v_prio    int;
  v_locks   jsonb := pgleader.lock_map();
  v_floor   bigint := pgleader.epoch_floor(); -- raises on a standby: a standby never grants
  v_locked  text[];
  v_won     text[];
  v_defer   jsonb := '{}';
BEGIN
  PERFORM set_config('synchronous_commit', 'on', true);
  PERFORM pgleader.note_timeline(p_node);
  IF cardinality(p_scopes) IS DISTINCT FROM cardinality(p_seqs) THEN
    RAISE EXCEPTION 'pgleader: lease_claim_batch needs one observed lease_seq per scope';
  END IF;
  SELECT n.priority INTO v_prio FROM pgleader.nodes n
   WHERE n.node_id = p_node AND n.lease_token = p_token AND n.mode = 'lease';
  IF NOT FOUND THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF02',
      MESSAGE = format('pgleader: node %L is not registered in lease mode with this token', p_node);
  END IF;
  INSERT INTO pgleader.leader_state AS s (scope, lock_key, mode)
  SELECT u.s, pgleader.lock_key(u.s), 'lease' FROM unnest(p_scopes) AS u(s)
  ON CONFLICT ON CONSTRAINT leader_state_pkey DO NOTHING;
  -- The claimable rows (free, or expired as observed) that this batch locks: a
  -- row held by the previous term's fenced writers is skipped (busy). The test
  -- and the lock are one statement, so the test is made again on the row version
  -- the lock finds: a claim another node committed since this statement's
  -- snapshot fails it (the row is no longer free, its lease_seq moved on). Two
  -- statements would let two nodes claim one lease.
  SELECT coalesce(array_agg(x.scope), '{}') INTO v_locked
    FROM (SELECT s.scope FROM pgleader.leader_state s JOIN unnest(p_scopes, p_seqs) AS u(s, q) ON u.s = s.scope
           WHERE s.holder IS NULL OR s.released_at IS NOT NULL
              OR (s.lease_seq = u.q AND s.last_heartbeat
                    + make_interval(secs => coalesce(s.session_lease_ms, p_lease_ms) / 1000.0) < clock_timestamp())
             FOR UPDATE OF s SKIP LOCKED) x;
  -- Reservations and priorities, as in claim_batch.
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
      v_locked := ARRAY(SELECT x FROM unnest(v_locked) x WHERE NOT v_defer ? x);
    END IF;
  END IF;

  RETURN QUERY
  WITH calc AS MATERIALIZED (
    SELECT s.scope, greatest(s.epoch, v_floor) AS old_epoch, s.epoch AS stored_epoch, s.holder AS old_holder,
           s.last_heartbeat AS old_hb, s.released_at AS old_released,
           (s.holder IS NOT NULL AND s.released_at IS NULL) AS was_open,
           CASE WHEN s.holder IS NULL OR s.released_at IS NOT NULL THEN NULL ELSE 'heartbeat_timeout' END AS reason,
           s.handover_to = p_node AS handed, s.last_holder AS handed_from,
           s.retired_at IS NOT NULL AS was_retired,
           clock_timestamp() AS at
      FROM pgleader.leader_state s WHERE s.scope = ANY (v_locked)
  ), upd AS (
    UPDATE pgleader.leader_state s SET
        epoch = c.old_epoch + 1, holder = p_node, holder_pid = NULL, holder_guard_key = NULL,
        acquired_at = c.at, released_at = NULL, last_heartbeat = c.at, lease_seq = s.lease_seq + 1,
        heartbeat_interval_ms = p_interval_ms, unresolved_guards = '{}', unresolved_trust_ms = 0,
        heartbeat_timeout_ms = p_timeout_ms, trust_window_ms = p_trust_ms,
        session_lease_ms = p_lease_ms, resign_requested_epoch = NULL, resign_requested_by = NULL,
        handover_to = NULL, handover_epoch = NULL, handover_deadline = NULL, handover_by = NULL,
        deferred_since = NULL, retired_at = NULL, retired_by = NULL
      FROM calc c WHERE s.scope = c.scope
    RETURNING s.scope
  ), closed AS (
    UPDATE pgleader.terms t SET released_at = c.at, release_reason = c.reason
      FROM calc c WHERE c.was_open AND t.scope = c.scope AND t.released_at IS NULL
    RETURNING t.scope
  ), opened AS (
    INSERT INTO pgleader.terms (scope, epoch, holder, hostname, holder_pid, acquired_at, handover_gap)
    SELECT c.scope, c.old_epoch + 1, p_node, p_hostname, NULL, c.at,
           c.at - CASE WHEN c.was_open THEN c.old_hb ELSE c.old_released END
      FROM calc c
    RETURNING 1
  ), audited AS (
    INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
    SELECT a.scope, a.node_id, a.epoch, a.kind, a.detail FROM (
      SELECT c.scope, c.old_holder AS node_id, c.old_epoch AS epoch, 'term_closed_by_successor' AS kind,
             jsonb_build_object('reason', c.reason, 'successor', p_node, 'last_heartbeat', c.old_hb) AS detail, 1 AS ord
        FROM calc c WHERE c.was_open
      UNION ALL
      SELECT c.scope, p_node, c.old_epoch, 'scope_revived', jsonb_build_object('by', p_node), 2
        FROM calc c WHERE c.was_retired
      UNION ALL
      SELECT c.scope, p_node, c.old_epoch + 1, 'elected',
             jsonb_strip_nulls(jsonb_build_object('prev_holder', c.old_holder, 'prev_epoch', c.old_epoch,
                                'prev_closed', NOT c.was_open, 'mode', 'lease',
                                'epoch_floor', CASE WHEN c.stored_epoch < v_floor THEN v_floor END,
                                'handed_over_by', CASE WHEN c.handed THEN c.handed_from END,
                                'priority', v_prio)), 3
        FROM calc c) a
    ORDER BY a.scope, a.ord
    RETURNING 1
  )
  SELECT c.scope, true, false, c.old_epoch + 1, p_node, c.old_holder, c.old_epoch, NOT c.was_open,
         NULL::bigint, NULL::boolean, 0, c.reason, '{}'::bigint[]
    FROM calc c JOIN upd ON upd.scope = c.scope;
  PERFORM pg_notify('leader_change', json_build_object(
              'scope', s.scope, 'epoch', s.epoch, 'holder', p_node, 'event', 'elected')::text)
     FROM pgleader.leader_state s WHERE s.scope = ANY (v_locked) ORDER BY s.scope;
  SELECT coalesce(array_agg(x), '{}') INTO v_won FROM unnest(v_locked) x;
  IF cardinality(v_won) > 0 THEN
    UPDATE pgleader.nodes n SET leads = ARRAY(SELECT DISTINCT x FROM unnest(n.leads || v_won) x ORDER BY x)
     WHERE n.node_id = p_node;
  END IF;
  -- The rest: deferred, busy (claimable, but a fenced writer holds the row), or
  -- held (the epoch, and the holder while a term is open).
  RETURN QUERY
  SELECT s.scope, false,
         s.scope <> ALL (v_locked) AND NOT v_defer ? s.scope
           AND (s.holder IS NULL OR s.released_at IS NOT NULL
                OR (s.lease_seq = u.q AND s.last_heartbeat
                      + make_interval(secs => coalesce(s.session_lease_ms, p_lease_ms) / 1000.0) < clock_timestamp())),
         s.epoch, CASE WHEN s.holder IS NOT NULL AND s.released_at IS NULL THEN s.holder END,
         nullif(v_defer->>s.scope, ''), NULL::bigint, NULL::boolean, NULL::bigint, NULL::boolean, NULL::int,
         NULL::text, NULL::bigint[]
    FROM pgleader.leader_state s JOIN unnest(p_scopes, p_seqs) AS u(s, q) ON u.s = s.scope
   WHERE s.scope <> ALL (v_won);
END $$;
-- +goose StatementEnd

-- lease_release_batch: release_batch for lease mode (no advisory lock to give
-- back; ownership by node and token). A release of a term a handover was asked
-- for keeps the reservation, as in release_batch.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.lease_release_batch(p_node text, p_token bigint, p_scopes text[],
                                                        p_epochs bigint[], p_reasons text[])
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
  v_mine     boolean;
BEGIN
  PERFORM set_config('synchronous_commit', 'on', true);
  SELECT n.resign_cooldown_ms, true INTO v_cooldown, v_mine FROM pgleader.nodes n
   WHERE n.node_id = p_node AND n.lease_token = p_token AND n.mode = 'lease';
  FOR i IN 1 .. coalesce(cardinality(p_scopes), 0) LOOP
    SELECT * INTO st FROM pgleader.leader_state s WHERE s.scope = p_scopes[i] FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
      RETURN QUERY SELECT p_scopes[i], false, EXISTS (SELECT 1 FROM pgleader.leader_state s WHERE s.scope = p_scopes[i]);
      CONTINUE;
    END IF;
    v_now := clock_timestamp();
    v_ours := coalesce(v_mine, false) AND st.epoch = p_epochs[i] AND st.holder = p_node
              AND st.released_at IS NULL AND st.mode = 'lease';
    IF v_ours THEN
      v_to := CASE WHEN st.handover_epoch = st.epoch AND st.handover_deadline > v_now THEN st.handover_to END;
      UPDATE pgleader.terms t SET released_at = v_now, release_reason = p_reasons[i], handed_to = v_to
       WHERE t.scope = st.scope AND t.epoch = st.epoch AND t.released_at IS NULL;
      UPDATE pgleader.leader_state s SET holder = NULL, released_at = v_now, lease_seq = s.lease_seq + 1,
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
      v_done := v_done || st.scope;
    END IF;
    RETURN QUERY SELECT st.scope, v_ours, false;
  END LOOP;
  IF cardinality(v_done) > 0 THEN
    UPDATE pgleader.nodes n SET leads = ARRAY(SELECT x FROM unnest(n.leads) x WHERE x <> ALL (v_done) ORDER BY x)
     WHERE n.node_id = p_node;
  END IF;
END $$;
-- +goose StatementEnd

-- lease_stopped: record a clean shutdown of the lease-mode node with token.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.lease_stopped(p_node text, p_token bigint) RETURNS boolean
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pgleader, pg_temp AS $$
  UPDATE pgleader.nodes n SET stopped_at = now(), last_seen = now(), leads = '{}'
   WHERE n.node_id = p_node AND n.lease_token = p_token
  RETURNING true
$$;
-- +goose StatementEnd

-- mode_conflict: the first of p_scopes that a live node of another mode than
-- p_mode campaigns for, that mode and those nodes (no row: none). A node checks
-- it at start.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.mode_conflict(p_node text, p_mode text, p_scopes text[])
RETURNS TABLE (scope text, mode text, nodes text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgleader, pg_temp AS $$
  SELECT s, n.mode, string_agg(n.node_id, ', ' ORDER BY n.node_id)
    FROM unnest(p_scopes) s
    JOIN pgleader.nodes n ON s = ANY (n.scopes) AND n.mode <> p_mode AND n.node_id <> p_node
    JOIN pgleader.live_nodes(pgleader.lock_map()) ln ON ln.node_id = n.node_id
   GROUP BY s, n.mode ORDER BY s LIMIT 1
$$;
-- +goose StatementEnd

-- live_holder: the holder of a scope's row while its term is live — in lock mode
-- while its leadership backend holds the scope's lock, in lease mode while its
-- lease runs in the server's time — else NULL.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.live_holder(st pgleader.leader_state, p_locks jsonb) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pgleader, pg_temp AS $$
  SELECT CASE WHEN st.holder IS NULL OR st.released_at IS NOT NULL THEN NULL
              WHEN st.mode = 'lease'
                THEN CASE WHEN st.last_heartbeat + make_interval(secs => coalesce(st.session_lease_ms, 0) / 1000.0)
                               > clock_timestamp() THEN st.holder END
              WHEN st.holder_pid IS NOT NULL AND p_locks ? (st.holder_pid::text || ':' || st.lock_key::text)
                THEN st.holder END
$$;
-- +goose StatementEnd

-- request_handover, version 9: a lease-mode holder is live while its lease runs
-- (version 8 looked only for the lock of a lock-mode holder, so a handover of a
-- lease-mode scope reached no one).
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
  v_hold := pgleader.live_holder(st, v_locks);
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

-- privilege_lists, version 9: the lease-mode functions run as the owner, and
-- nodes may run them.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.privilege_lists(
    OUT definer text[], OUT node text[], OUT reader text[], OUT operator text[])
LANGUAGE sql IMMUTABLE AS $$
  SELECT ARRAY['claim_batch', 'release_batch', 'node_heartbeat', 'unlock_held_many',
               'await_release', 'ring_next', 'register_node', 'node_stopped', 'session_lock',
               'fence', 'fence_rejected', 'request_resign', 'record_eviction', 'interference',
               'request_handover', 'cancel_handover', 'retire_scope',
               'lease_register', 'lease_heartbeat', 'lease_claim_batch', 'lease_release_batch', 'lease_stopped',
               'mode_conflict'],
         ARRAY['schema_version', 'lock_key', 'claim_batch', 'release_batch', 'node_heartbeat',
               'unlock_held_many', 'await_release', 'ring_next', 'register_node', 'node_stopped',
               'session_lock', 'fence', 'fence_rejected', 'epoch_floor', 'wal_timeline',
               'interference',
               'lease_register', 'lease_heartbeat', 'lease_claim_batch', 'lease_release_batch', 'lease_stopped',
               'mode_conflict'],
         ARRAY['schema_version', 'lock_key', 'lock_held', 'advisory_locks', 'lock_map',
               'wal_timeline', 'epoch_floor', 'interference'],
         ARRAY['request_resign', 'record_eviction', 'request_handover', 'cancel_handover', 'retire_scope']
$$;
-- +goose StatementEnd

SELECT pgleader.apply_privileges();
