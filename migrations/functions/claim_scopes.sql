-- claim_scopes: take the advisory lock of each scope without waiting and claim
-- every scope won (S1: each epoch bumps by one, committed with
-- synchronous_commit = on; S2 by construction: this very call took the locks on
-- the calling backend; S3: the rows are locked FOR UPDATE, which fenced writers
-- of the previous term block). A handful of statements per batch, whatever its
-- size:
--   * never waits: a row locked by fenced writers answers busy = true (its lock
--     given back), for the caller to retry shortly;
--   * who may claim a free scope: a scope reserved by a handover (handover_to,
--     before handover_deadline, the target alive) goes to its target only;
--     otherwise a claim is deferred while a live candidate of higher priority,
--     not cooling down after resigning the scope, campaigns for it, for at most
--     that candidate's trust window (never less than three of its heartbeat
--     intervals) from the first deferral (deferred_since); a node of priority
--     0 never wins a claim. A deferred row answers acquired = false, busy =
--     false and names the node it waits for in deferred_to (its lock given
--     back);
--   * the guards of earlier holders are probed one by one (key_free), and the
--     lock map and the deferral query are read only when a row needs them;
--   * p_announce, when not NULL, names a node whose leadership session ended:
--     the doorbells of the candidates of its scopes that this call left to
--     others (the lost node still their holder, or their handover target) are
--     rung (ring_doorbells), so that they claim them at once — only when that
--     node's beacon is indeed not held (the name is the caller's word); a
--     leader_change notification (event node_lost) tells the collector.
-- Rows: one per scope. acquired = false: holder is the current holder while its
-- backend holds the lock (NULL otherwise), epoch the current epoch. A won claim
-- clears the handover, the deferral and retirement. If anything fails, every
-- lock the batch took is given back before the error propagates (session locks
-- survive a rollback).
-- Proof and bounds, before any lock is taken: the caller is the leadership
-- session node p_node registered (caller_node, PLF12), every scope is one the
-- node registered (PLF12), every key is the one the database allows for its
-- scope (PLF03), at most 1000 scopes, the timing within check_timing (PLF11).
-- The one exception is a session warm-up's scratch scope ('pgleader-warmup-…',
-- alone in its batch): its lock is taken for the transaction only, so a
-- warm-up (always rolled back) leaves no lock behind, and its row never
-- commits (check_lock_key_at_commit). A scope whose row is held by fenced
-- transactions is recorded in fence_waits (the term, since when), which
-- end_fenced requires. The elected audit row records the claim statement's
-- start (claim_started, the server's clock; acquired_at is when it decided).
CREATE OR REPLACE FUNCTION pgleader.claim_scopes(p_node text, p_hostname text, p_guard_key bigint, p_interval_ms integer, p_timeout_ms integer, p_trust_ms integer, p_lease_ms integer, p_scopes text[], p_keys bigint[], p_announce text DEFAULT NULL::text)
 RETURNS TABLE(scope text, acquired boolean, busy boolean, epoch bigint, holder text, prev_holder text, prev_epoch bigint, prev_closed boolean, prev_guard_key bigint, prev_guard_held boolean, prev_trust_ms integer, prev_reason text, wait_guards bigint[], deferred_to text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  v_taken   bigint[] := '{}';  -- keys this batch locked
  v_cands   bigint[];          -- guards of the holders on record and of the unresolved chain
  v_held    bigint[];          -- those held at the start of the batch
  v_locks   jsonb;             -- 'pid:key' of every exclusive advisory lock, read when needed
  v_locked  text[];            -- won scopes whose rows are ours
  v_busy    bigint[];
  v_bad     text;
  v_won     text[];
  v_prio    int;
  v_defer   jsonb := '{}';     -- scope → the node it is deferred to
  v_floor   bigint := pgleader.epoch_floor(); -- raises on a standby: a standby never grants
  v_me      pgleader.nodes := pgleader.caller_node(p_node);
  v_scratch boolean;          -- a warm-up's scratch scope: transaction-level lock
  v_fenced  bigint[];         -- won keys whose rows fenced transactions hold
  v_start   timestamptz;       -- before the claim statement: the terms it closes end after it
  v_outage  boolean;           -- it closes a term that ended with the database
BEGIN
  PERFORM set_config('synchronous_commit', 'on', true);
  PERFORM pgleader.check_timing(p_interval_ms, p_timeout_ms, p_trust_ms, p_lease_ms);
  IF cardinality(p_scopes) IS DISTINCT FROM cardinality(p_keys) THEN
    RAISE EXCEPTION 'pgleader: claim_batch needs one key per scope (% scopes, % keys)',
      cardinality(p_scopes), cardinality(p_keys);
  END IF;
  IF cardinality(p_scopes) > 1000 THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF11',
      MESSAGE = format('pgleader: a claim of %s scopes: at most 1000 a call', cardinality(p_scopes));
  END IF;
  IF p_announce IS NOT NULL THEN
    PERFORM pgleader.check_name('node id', p_announce);
  END IF;
  v_scratch := cardinality(p_scopes) = 1 AND starts_with(p_scopes[1], 'pgleader-warmup-');
  IF NOT v_scratch THEN
    SELECT min(d.x) INTO v_bad FROM (SELECT unnest(p_scopes) EXCEPT SELECT unnest(v_me.scopes)) d(x);
    IF v_bad IS NOT NULL THEN
      RAISE EXCEPTION USING ERRCODE = 'PLF12',
        MESSAGE = format('pgleader: node %L did not register scope %L: a node claims the scopes it registered', p_node, v_bad),
        HINT = 'register the node again with the scope (register_node)';
    END IF;
  END IF;
  SELECT min(u.s) INTO v_bad
    FROM unnest(p_scopes, p_keys) AS u(s, k) LEFT JOIN pgleader.scope_keys sk ON sk.scope = u.s
   WHERE u.k IS DISTINCT FROM coalesce(sk.lock_key, pgleader.lock_key(u.s));
  IF v_bad IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF03',
      MESSAGE = format('pgleader: scope %L: the lock key passed is not the one the database allows (%s)',
                       v_bad, pgleader.expected_key(v_bad)),
      HINT = 'a node may not choose a scope''s key: remove the override from the node''s configuration (Config.LockKeys), or record it as the owner or an operator: pgleader scope key SCOPE KEY';
  END IF;
  PERFORM pgleader.note_timeline(p_node);
  v_prio := v_me.priority;
  -- Which guards of holders on record and of the unresolved chain are held: each
  -- probed with a shared try-lock, given back at once (before any lock of the
  -- batch is taken). A guard seen held here and released meanwhile is waited on
  -- for nothing; a guard seen free stays free (guard keys are random per session).
  SELECT coalesce(array_agg(DISTINCT g) FILTER (WHERE g IS NOT NULL), '{}') INTO v_cands
    FROM (SELECT s.holder_guard_key AS g FROM pgleader.leader_state s WHERE s.scope = ANY (p_scopes)
          UNION ALL
          SELECT unnest(s.unresolved_guards) FROM pgleader.leader_state s WHERE s.scope = ANY (p_scopes)) c;
  v_held := ARRAY(SELECT k FROM unnest(v_cands) k WHERE NOT pgleader.key_free(k));
  BEGIN
    SELECT coalesce(array_agg(u.k), '{}') INTO v_taken
      FROM unnest(p_keys) AS u(k)
     WHERE CASE WHEN v_scratch THEN pg_try_advisory_xact_lock(u.k) ELSE pg_try_advisory_lock(u.k) END;
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
    v_fenced := v_busy;

    -- Who else should have the free scopes (defer_free_scopes), asked only when
    -- some scope can be deferred at all: this node never leads, a handover is
    -- pending, or a registered node of higher priority campaigns for one of
    -- them. Otherwise none is deferred, and pg_locks is not read.
    IF cardinality(v_locked) > 0 AND (v_prio = 0
        OR EXISTS (SELECT 1 FROM pgleader.leader_state s
                    WHERE s.scope = ANY (v_locked) AND s.handover_to IS NOT NULL)
        OR EXISTS (SELECT 1 FROM pgleader.nodes n
                    WHERE n.stopped_at IS NULL AND n.priority > v_prio AND n.scopes && v_locked)) THEN
      v_locks := coalesce(v_locks, pgleader.lock_map());
      v_defer := pgleader.defer_free_scopes(p_node, v_prio, v_locked, v_locks);
      IF v_defer <> '{}' THEN
        v_busy := v_busy || ARRAY(SELECT s.lock_key FROM pgleader.leader_state s
                                   WHERE s.scope = ANY (v_locked) AND v_defer ? s.scope);
        v_locked := ARRAY(SELECT x FROM unnest(v_locked) x WHERE NOT v_defer ? x);
      END IF;
    END IF;
    IF NOT v_scratch THEN
      PERFORM pg_advisory_unlock(k) FROM unnest(v_busy) k;
    END IF;
    v_taken := ARRAY(SELECT k FROM unnest(v_taken) k WHERE k <> ALL (v_busy));
    -- The term whose fenced transactions hold the row, and since when (the
    -- first claim that found it so, whoever made it): end_fenced's proof.
    IF cardinality(v_fenced) > 0 AND NOT v_scratch THEN
      INSERT INTO pgleader.fence_waits AS w (scope, node_id, epoch)
      SELECT s.scope, p_node, s.epoch FROM pgleader.leader_state s WHERE s.lock_key = ANY (v_fenced)
      ON CONFLICT ON CONSTRAINT fence_waits_pkey DO UPDATE SET node_id = EXCLUDED.node_id, epoch = EXCLUDED.epoch, since = EXCLUDED.since
       WHERE w.epoch IS DISTINCT FROM EXCLUDED.epoch;
    END IF;

    -- calc: per won scope, its predecessor as recorded. stored_epoch is the
    -- predecessor's term (what the audit rows and prev_epoch name); bump_from is
    -- where the new epoch counts from: stored_epoch, raised to the timeline's
    -- floor after a promotion (S1). How an open term ended: database_failover
    -- when the server restarted since its last heartbeat or the timeline
    -- changed (its holder's sessions ended with the database); else
    -- heartbeat_timeout when it was silent for its whole session lease (frozen,
    -- cut off); else crashed when its guard is gone too within a heartbeat
    -- interval and timeout of its last heartbeat (the process died: a crash
    -- ends every session at once, mid-cycle); else lost_connection: its guard
    -- lives on (only its session ended), or its sessions ended only after a
    -- whole heartbeat timeout of silence (a node that lost its link gives up
    -- its sessions then, and a process rarely dies exactly so).
    v_start := clock_timestamp();
    v_outage := EXISTS (SELECT 1 FROM pgleader.leader_state s
                         WHERE s.scope = ANY (v_locked) AND s.holder IS NOT NULL AND s.released_at IS NULL
                           AND (s.epoch < v_floor OR pg_postmaster_start_time() > s.last_heartbeat));
    RETURN QUERY
    WITH calc AS MATERIALIZED (
      SELECT s.scope, greatest(s.epoch, v_floor) AS bump_from, s.epoch AS stored_epoch, s.holder AS old_holder, s.holder_guard_key AS old_guard,
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
             -- blind: a predecessor whose sessions ended with the server (an open
             -- term from before a restart, any term of an older timeline), or a
             -- debt carried from a successor that never opened its gate (a NULL
             -- in unresolved_guards). Its guard proves nothing (every guard is
             -- free after a restart; a promoted standby never had them): the new
             -- term waits out the predecessor's trust window.
             ((s.holder IS NOT NULL AND s.released_at IS NULL AND pg_postmaster_start_time() > s.last_heartbeat)
              OR (v_floor > 0 AND s.epoch <= v_floor)
              OR array_position(s.unresolved_guards, NULL) IS NOT NULL) AS blind,
             greatest(s.unresolved_trust_ms, coalesce(s.trust_window_ms, 0)) AS blind_trust,
             CASE WHEN s.holder IS NULL OR s.released_at IS NOT NULL THEN NULL
                  WHEN s.epoch < v_floor OR pg_postmaster_start_time() > s.last_heartbeat THEN 'database_failover'
                  WHEN s.last_heartbeat < clock_timestamp() - make_interval(secs => coalesce(s.session_lease_ms, 0) / 1000.0)
                    THEN 'heartbeat_timeout'
                  WHEN NOT coalesce(s.holder_guard_key = ANY (v_held), false)
                   AND s.last_heartbeat >= clock_timestamp()
                         - make_interval(secs => (coalesce(s.heartbeat_interval_ms, 0) + coalesce(s.heartbeat_timeout_ms, 0)) / 1000.0)
                    THEN 'crashed'
                  ELSE 'lost_connection' END AS reason,
             s.handover_to = p_node AS handed, s.last_holder AS handed_from,
             s.retired_at IS NOT NULL AS was_retired,
             clock_timestamp() AS at
        FROM pgleader.leader_state s
       WHERE s.scope = ANY (v_locked)
    ), upd AS (
      UPDATE pgleader.leader_state s SET
          epoch = c.bump_from + 1, holder = p_node, holder_pid = pg_backend_pid(),
          holder_guard_key = p_guard_key, acquired_at = c.at, released_at = NULL,
          last_heartbeat = c.at, heartbeat_interval_ms = p_interval_ms,
          unresolved_guards = c.wait || CASE WHEN c.blind THEN ARRAY[NULL::bigint] ELSE '{}'::bigint[] END,
          unresolved_trust_ms = CASE WHEN c.blind THEN greatest(c.trust, c.blind_trust)
                                     WHEN cardinality(c.wait) = 0 THEN 0 ELSE c.trust END,
          heartbeat_timeout_ms = p_timeout_ms, trust_window_ms = p_trust_ms,
          session_lease_ms = p_lease_ms, resign_requested_epoch = NULL, resign_requested_by = NULL,
          handover_to = NULL, handover_epoch = NULL, handover_deadline = NULL, handover_by = NULL,
          deferred_since = NULL, retired_at = NULL, retired_by = NULL
        FROM calc c WHERE s.scope = c.scope
      RETURNING s.scope
    ), closed AS (
      -- Every term left open (also ones an operator bypassed by editing the epoch).
      UPDATE pgleader.terms t SET released_at = c.at, release_reason = c.reason, last_sign = c.old_hb
        FROM calc c WHERE c.was_open AND t.scope = c.scope AND t.released_at IS NULL
      RETURNING t.scope
    ), opened AS (
      INSERT INTO pgleader.terms (scope, epoch, holder, hostname, holder_pid, acquired_at, handover_gap)
      SELECT c.scope, c.bump_from + 1, p_node, p_hostname, pg_backend_pid(), c.at,
             c.at - CASE WHEN c.was_open THEN c.old_hb ELSE c.old_released END
        FROM calc c
      RETURNING 1
    ), audited AS (
      INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
      SELECT a.scope, a.node_id, a.epoch, a.kind, a.detail FROM (
        SELECT c.scope, c.old_holder AS node_id, c.stored_epoch AS epoch, 'term_closed_by_successor' AS kind,
               jsonb_build_object('reason', c.reason, 'successor', p_node, 'last_heartbeat', c.old_hb) AS detail,
               1 AS ord
          FROM calc c WHERE c.was_open
        UNION ALL
        SELECT c.scope, p_node, c.stored_epoch, 'scope_revived', jsonb_build_object('by', p_node), 2
          FROM calc c WHERE c.was_retired
        UNION ALL
        SELECT c.scope, p_node, c.bump_from + 1, 'elected',
               jsonb_strip_nulls(jsonb_build_object('prev_holder', c.old_holder, 'prev_epoch', c.stored_epoch,
                                  'prev_closed', NOT c.was_open, 'backend_pid', pg_backend_pid(),
                                  'claim_started', statement_timestamp(),
                                  'epoch_floor', CASE WHEN c.stored_epoch < v_floor THEN v_floor END,
                                  'handed_over_by', CASE WHEN c.handed THEN c.handed_from END,
                                  'priority', v_prio)),
               3
          FROM calc c) a
      ORDER BY a.scope, a.ord
      RETURNING 1
    )
    -- A blind predecessor is answered as an open term with no guard on record:
    -- the engine waits out prev_trust_ms (and the guards in wait_guards).
    SELECT c.scope, true, false, c.bump_from + 1, p_node, c.old_holder, c.stored_epoch, NOT (c.was_open OR c.blind),
           CASE WHEN c.blind THEN NULL ELSE c.old_guard END, c.was_open AND NOT c.blind AND coalesce(c.guard_held, false),
           CASE WHEN c.blind THEN greatest(c.trust, c.blind_trust) WHEN cardinality(c.wait) = 0 THEN 0 ELSE c.trust END,
           c.reason, c.wait, NULL::text
      FROM calc c JOIN upd ON upd.scope = c.scope;
    -- (The data-modifying parts above run to completion whatever the outer query reads.)
    IF v_outage THEN
      PERFORM pgleader.relabel_shutdown_victims(v_locked, v_start, p_node);
    END IF;
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
    SELECT u.s, false, NOT v_defer ? u.s, NULL::bigint, NULL::text, NULL::text, NULL::bigint, NULL::boolean,
           NULL::bigint, NULL::boolean, NULL::int, NULL::text, NULL::bigint[], nullif(v_defer->>u.s, '')
      FROM unnest(p_scopes, p_keys) AS u(s, k) WHERE u.k = ANY (v_busy);

    -- Scopes held elsewhere: the epoch on record, and the holder while its backend
    -- holds the lock (NULL while the record is stale or a claim is in flight).
    IF EXISTS (SELECT 1 FROM unnest(p_keys) k WHERE k <> ALL (v_taken) AND k <> ALL (v_busy)) THEN
      v_locks := coalesce(v_locks, pgleader.lock_map());
    END IF;
    RETURN QUERY
      SELECT u.s, false, false, s.epoch,
             CASE WHEN s.holder_pid IS NOT NULL AND s.released_at IS NULL
                   AND v_locks ? (s.holder_pid::text || ':' || s.lock_key::text)
                  THEN s.holder END,
             NULL::text, NULL::bigint, NULL::boolean, NULL::bigint, NULL::boolean, NULL::int,
             NULL::text, NULL::bigint[], NULL::text
        FROM unnest(p_scopes, p_keys) AS u(s, k)
        LEFT JOIN pgleader.leader_state s ON s.scope = u.s
       WHERE u.k <> ALL (v_taken) AND u.k <> ALL (v_busy);
    IF p_announce IS NOT NULL THEN
      PERFORM pg_notify('leader_change', json_build_object(
          'holder', p_announce, 'event', 'node_lost', 'by', p_node)::text);
      -- Only a node whose leadership session did end: p_announce is the
      -- caller's word, and a live node's candidates have nothing to claim.
      IF NOT EXISTS (SELECT 1 FROM pgleader.nodes x
                      WHERE x.node_id = p_announce AND x.beacon_key IS NOT NULL
                        AND pgleader.lock_held(x.beacon_key, x.backend_pid)) THEN
        PERFORM pgleader.ring_doorbells(ARRAY(
          SELECT c.node_id FROM pgleader.nodes c
           WHERE c.node_id <> p_node AND c.node_id <> p_announce AND c.stopped_at IS NULL
             AND c.scopes && ARRAY(SELECT s.scope FROM pgleader.leader_state s
                                    WHERE (s.holder = p_announce AND s.released_at IS NULL) OR s.handover_to = p_announce)));
      END IF;
    END IF;
  EXCEPTION WHEN OTHERS THEN
    IF NOT v_scratch THEN
      PERFORM pg_advisory_unlock(k) FROM unnest(v_taken) k;
    END IF;
    RAISE;
  END;
END $function$;
