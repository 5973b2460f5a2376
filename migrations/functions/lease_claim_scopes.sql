-- lease_claim_scopes: claim, in one transaction, every scope of p_scopes that is
-- free (never claimed, or released) or whose lease expired: its lease_seq is still
-- p_seqs[i] (the follower watched it unchanged for a whole lease on its own
-- clock) and, in the server's time, its last renewal is older than the holder's
-- lease. Never waits: a row locked by fenced writers is busy. Handover
-- reservations and priorities apply as in claim_scopes (a row not acquired names
-- the node its scope is deferred to in deferred_to). Rows as claim_scopes (the
-- guard columns are NULL: lease mode has no guards; a successor's safety is the
-- lease it waited out).
-- Proof and bounds: the caller is the session node p_node registered with
-- p_token under this login (caller_node, PLF12), every scope is one the node
-- registered (PLF12), at most 1000 scopes, the timing within check_timing
-- (PLF11). A scope whose row is held by fenced transactions is recorded in
-- fence_waits, which end_fenced requires.
CREATE OR REPLACE FUNCTION pgleader.lease_claim_scopes(p_node text, p_token bigint, p_hostname text, p_interval_ms integer, p_timeout_ms integer, p_trust_ms integer, p_lease_ms integer, p_scopes text[], p_seqs bigint[])
 RETURNS TABLE(scope text, acquired boolean, busy boolean, epoch bigint, holder text, prev_holder text, prev_epoch bigint, prev_closed boolean, prev_guard_key bigint, prev_guard_held boolean, prev_trust_ms integer, prev_reason text, wait_guards bigint[], deferred_to text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  v_prio    int;
  v_locks   jsonb := pgleader.lock_map();
  v_floor   bigint := pgleader.epoch_floor(); -- raises on a standby: a standby never grants
  v_locked  text[];
  v_won     text[];
  v_defer   jsonb := '{}';
  v_busy    text[];
  v_me      pgleader.nodes;
  v_bad     text;
  v_since   timestamptz;     -- leases count from no earlier than this (lease_claimable)
BEGIN
  PERFORM set_config('synchronous_commit', 'on', true);
  IF NOT EXISTS (SELECT 1 FROM pgleader.nodes n
                  WHERE n.node_id = p_node AND n.lease_token = p_token AND n.mode = 'lease') THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF02',
      MESSAGE = format('pgleader: node %L is not registered in lease mode with this token', p_node);
  END IF;
  v_me := pgleader.caller_node(p_node, p_token);
  PERFORM pgleader.check_timing(p_interval_ms, p_timeout_ms, p_trust_ms, p_lease_ms);
  IF cardinality(p_scopes) IS DISTINCT FROM cardinality(p_seqs) THEN
    RAISE EXCEPTION 'pgleader: lease_claim_batch needs one observed lease_seq per scope';
  END IF;
  IF cardinality(p_scopes) > 1000 THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF11',
      MESSAGE = format('pgleader: a claim of %s scopes: at most 1000 a call', cardinality(p_scopes));
  END IF;
  SELECT min(d.x) INTO v_bad FROM (SELECT unnest(p_scopes) EXCEPT SELECT unnest(v_me.scopes)) d(x);
  IF v_bad IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF12',
      MESSAGE = format('pgleader: node %L did not register scope %L: a node claims the scopes it registered', p_node, v_bad),
      HINT = 'register the node again with the scope (lease_register)';
  END IF;
  PERFORM pgleader.note_timeline(p_node);
  v_since := greatest(pg_postmaster_start_time(),
                      CASE WHEN v_floor > 0 THEN (SELECT t.first_claim_at FROM pgleader.timelines t
                                                   WHERE t.timeline = pgleader.wal_timeline()) END);
  v_prio := v_me.priority;
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
           WHERE pgleader.lease_claimable(s.*, u.q, p_lease_ms, v_since, v_floor)
             FOR UPDATE OF s SKIP LOCKED) x;
  -- Who else should have the free scopes: the lock mode's rule (defer_free_scopes).
  IF cardinality(v_locked) > 0 THEN
    v_defer := pgleader.defer_free_scopes(p_node, v_prio, v_locked, v_locks);
    IF v_defer <> '{}' THEN
      v_locked := ARRAY(SELECT x FROM unnest(v_locked) x WHERE NOT v_defer ? x);
    END IF;
  END IF;

  -- Busy: claimable, but the previous term's fenced transactions hold the row.
  -- The term, and since when (the first claim that found it so): end_fenced's proof.
  SELECT coalesce(array_agg(s.scope), '{}') INTO v_busy
    FROM pgleader.leader_state s JOIN unnest(p_scopes, p_seqs) AS u(s, q) ON u.s = s.scope
   WHERE s.scope <> ALL (v_locked) AND NOT v_defer ? s.scope
     AND pgleader.lease_claimable(s.*, u.q, p_lease_ms, v_since, v_floor);
  IF cardinality(v_busy) > 0 THEN
    INSERT INTO pgleader.fence_waits AS w (scope, node_id, epoch)
    SELECT s.scope, p_node, s.epoch FROM pgleader.leader_state s WHERE s.scope = ANY (v_busy)
    ON CONFLICT ON CONSTRAINT fence_waits_pkey DO UPDATE SET node_id = EXCLUDED.node_id, epoch = EXCLUDED.epoch, since = EXCLUDED.since
     WHERE w.epoch IS DISTINCT FROM EXCLUDED.epoch;
  END IF;

  -- calc: per won scope, its predecessor as recorded. stored_epoch is the
  -- predecessor's term (what the audit rows and prev_epoch name); bump_from is
  -- where the new epoch counts from: stored_epoch, raised to the timeline's
  -- floor after a promotion (S1). An open term ends as database_failover when
  -- the server restarted since its last renewal or the timeline changed (its
  -- holder's sessions ended with the database), else as heartbeat_timeout
  -- (its lease ran out).
  RETURN QUERY
  WITH calc AS MATERIALIZED (
    SELECT s.scope, greatest(s.epoch, v_floor) AS bump_from, s.epoch AS stored_epoch, s.holder AS old_holder,
           s.last_heartbeat AS old_hb, s.released_at AS old_released,
           (s.holder IS NOT NULL AND s.released_at IS NULL) AS was_open,
           CASE WHEN s.holder IS NULL OR s.released_at IS NOT NULL THEN NULL
                WHEN s.epoch < v_floor OR pg_postmaster_start_time() > s.last_heartbeat THEN 'database_failover'
                ELSE 'heartbeat_timeout' END AS reason,
           s.handover_to = p_node AS handed, s.last_holder AS handed_from,
           s.retired_at IS NOT NULL AS was_retired,
           clock_timestamp() AS at
      FROM pgleader.leader_state s WHERE s.scope = ANY (v_locked)
  ), upd AS (
    UPDATE pgleader.leader_state s SET
        epoch = c.bump_from + 1, holder = p_node, holder_pid = NULL, holder_guard_key = NULL,
        acquired_at = c.at, released_at = NULL, last_heartbeat = c.at, lease_seq = s.lease_seq + 1,
        heartbeat_interval_ms = p_interval_ms, unresolved_guards = '{}', unresolved_trust_ms = 0,
        heartbeat_timeout_ms = p_timeout_ms, trust_window_ms = p_trust_ms,
        session_lease_ms = p_lease_ms, resign_requested_epoch = NULL, resign_requested_by = NULL,
        handover_to = NULL, handover_epoch = NULL, handover_deadline = NULL, handover_by = NULL,
        deferred_since = NULL, retired_at = NULL, retired_by = NULL
      FROM calc c WHERE s.scope = c.scope
    RETURNING s.scope
  ), closed AS (
    UPDATE pgleader.terms t SET released_at = c.at, release_reason = c.reason, last_sign = c.old_hb
      FROM calc c WHERE c.was_open AND t.scope = c.scope AND t.released_at IS NULL
    RETURNING t.scope
  ), opened AS (
    INSERT INTO pgleader.terms (scope, epoch, holder, hostname, holder_pid, acquired_at, handover_gap)
    SELECT c.scope, c.bump_from + 1, p_node, p_hostname, NULL, c.at,
           c.at - CASE WHEN c.was_open THEN c.old_hb ELSE c.old_released END
      FROM calc c
    RETURNING 1
  ), audited AS (
    INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
    SELECT a.scope, a.node_id, a.epoch, a.kind, a.detail FROM (
      SELECT c.scope, c.old_holder AS node_id, c.stored_epoch AS epoch, 'term_closed_by_successor' AS kind,
             jsonb_build_object('reason', c.reason, 'successor', p_node, 'last_heartbeat', c.old_hb) AS detail, 1 AS ord
        FROM calc c WHERE c.was_open
      UNION ALL
      SELECT c.scope, p_node, c.stored_epoch, 'scope_revived', jsonb_build_object('by', p_node), 2
        FROM calc c WHERE c.was_retired
      UNION ALL
      SELECT c.scope, p_node, c.bump_from + 1, 'elected',
             jsonb_strip_nulls(jsonb_build_object('prev_holder', c.old_holder, 'prev_epoch', c.stored_epoch,
                                'prev_closed', NOT c.was_open, 'mode', 'lease',
                                'epoch_floor', CASE WHEN c.stored_epoch < v_floor THEN v_floor END,
                                'handed_over_by', CASE WHEN c.handed THEN c.handed_from END,
                                'priority', v_prio)), 3
        FROM calc c) a
    ORDER BY a.scope, a.ord
    RETURNING 1
  )
  SELECT c.scope, true, false, c.bump_from + 1, p_node, c.old_holder, c.stored_epoch, NOT c.was_open,
         NULL::bigint, NULL::boolean, 0, c.reason, '{}'::bigint[], NULL::text
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
  SELECT s.scope, false, s.scope = ANY (v_busy), s.epoch, CASE WHEN s.holder IS NOT NULL AND s.released_at IS NULL THEN s.holder END,
         NULL::text, NULL::bigint, NULL::boolean, NULL::bigint, NULL::boolean, NULL::int,
         NULL::text, NULL::bigint[], nullif(v_defer->>s.scope, '')
    FROM pgleader.leader_state s JOIN unnest(p_scopes) AS u(s) ON u.s = s.scope
   WHERE s.scope <> ALL (v_won);
END $function$;
