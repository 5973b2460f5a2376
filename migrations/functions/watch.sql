-- watch: the one statement of a node's watch session (the doorbell; docs/design.md
-- §4). Two steps:
--   READ (unless p_read is false), in order with every transaction that rang
--     this node (ring_doorbells): lock the node's doorbell row FOR UPDATE,
--     which waits for every ringer holding it FOR KEY SHARE to end — for at
--     most min(I, 1 s), so that a
--     ringer that keeps its transaction open cannot stall the watch (then the
--     read goes ahead; the wake-up that ringer carries may be missed, and the
--     node's heartbeat finds it within I) —, read with a fresh snapshot what
--     the node should act on, and give the row lock back (the subtransaction
--     is rolled back) before any wait:
--       claim     a scope the node campaigns for whose term is over (released,
--                 or its holder's backend no longer holds its lock) and that no
--                 handover reserves for another live node; node: its last holder
--       reserved  such a scope reserved for this node by a handover
--       request   a scope this node leads whose resignation or handover was
--                 asked for; node: the handover's target
--       peer      the ring peer: the next live lock-mode node in node_id order
--                 (node, key: its beacon); no row when this node is alone.
--     Each row carries hash, hashtext of its fields. If a row's hash is not in
--     p_seen (the hashes of the caller's last answer), every row is returned at
--     once: the caller acts on them and calls again with their hashes. So a
--     state that lasts (a squatted scope, a claim deferred to another node)
--     wakes the node once.
--   WAIT: otherwise, until no session holds p_key exclusively (a ring peer's
--     beacon, a predecessor's guard) or p_timeout_ms passes — a sleep when
--     p_key is NULL —, then one row: kind 'wait', key p_key, free. The shared
--     lock is the transaction's, so no cancel can leave it behind.
-- A doorbell's signal (SQLSTATE 57014) that finds the statement in its WAIT is
-- followed by a READ in the same statement (the ringer locked the node's row
-- since the wait began: its xmax changed); anywhere else, or when the signal is
-- the caller's own cancel request (no new locker), it ends the statement, the
-- caller calls again, and that READ sees the ringer's commit. The caller skips
-- the READ (p_read false) only to go on waiting after a wait that ran out with
-- nothing new: the READ locks a row, so it costs a transaction ID and a commit
-- record, and a wait of nobody's concern then costs neither. A ring that falls
-- between two such calls (the session idle, the signal ignored) is read by the
-- second: a wait keeps the row's locker as it began (xmax, in the session
-- setting pgleader.watch_xmax), and a bare wait that finds a new one READs
-- first.
-- Proof: this backend is the watch session node p_node registered
-- (doorbell_register: pid and login), and p_node has not stopped (PLF12).
-- Bounds: 1 ≤ p_timeout_ms ≤ 60000; p_seen at most 10000 hashes; p_read not
-- NULL (PLF11).
DROP FUNCTION IF EXISTS pgleader.watch(text, bigint, integer, integer[]);
CREATE OR REPLACE FUNCTION pgleader.watch(p_node text, p_key bigint, p_timeout_ms integer, p_seen integer[], p_read boolean)
 RETURNS TABLE(kind text, scope text, epoch bigint, node text, key bigint, free boolean, hash integer)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  v_me     pgleader.nodes;
  v_kind   text[];
  v_scope  text[];
  v_epoch  bigint[];
  v_node   text[];
  v_key    bigint[];
  v_hash   int[];
  v_free   boolean := false;
  v_read   boolean;
  v_waited boolean := false;
  v_rang   boolean := false;
  v_xmax   text;
BEGIN
  IF p_timeout_ms IS NULL OR p_timeout_ms < 1 OR p_timeout_ms > 60000 THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF11',
      MESSAGE = format('pgleader: watch timeout %s ms: must be 1 to 60000', p_timeout_ms);
  END IF;
  IF coalesce(cardinality(p_seen), 0) > 10000 THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF11',
      MESSAGE = format('pgleader: watch given %s seen rows: at most 10000', cardinality(p_seen));
  END IF;
  IF p_read IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF11', MESSAGE = 'pgleader: watch p_read is NULL: true to re-read first, false to wait only';
  END IF;
  SELECT n.* INTO v_me FROM pgleader.doorbells d JOIN pgleader.nodes n ON n.node_id = d.node_id
   WHERE d.node_id = p_node AND d.backend_pid = pg_backend_pid() AND d.login_role = session_user
     AND n.login_role = session_user AND n.stopped_at IS NULL;
  IF NOT FOUND THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF12',
      MESSAGE = format('pgleader: this session (backend %s, role %s) is not the registered watch session of node %L',
                       pg_backend_pid(), quote_ident(session_user), p_node),
      HINT = 'register it first (doorbell_register), and again after a reconnect';
  END IF;
  -- The row lock of the READ writes; nothing of it needs to survive a crash.
  PERFORM set_config('synchronous_commit', 'off', true);
  v_read := p_read;
  LOOP
    IF v_read THEN
      BEGIN
        PERFORM set_config('lock_timeout', least(greatest(coalesce(v_me.heartbeat_interval_ms, 1000), 1), 1000)::text, true);
        PERFORM 1 FROM pgleader.doorbells d WHERE d.node_id = p_node FOR UPDATE;
        SELECT r.kinds, r.scopes, r.epochs, r.nodes, r.keys, r.hashes
          INTO v_kind, v_scope, v_epoch, v_node, v_key, v_hash
          FROM pgleader.watch_read(v_me) r;
        RAISE EXCEPTION USING ERRCODE = 'PLR00'; -- roll the subtransaction back: the row lock goes
      EXCEPTION
        WHEN SQLSTATE 'PLR00' THEN NULL;
        WHEN lock_not_available THEN
          SELECT r.kinds, r.scopes, r.epochs, r.nodes, r.keys, r.hashes
            INTO v_kind, v_scope, v_epoch, v_node, v_key, v_hash
            FROM pgleader.watch_read(v_me) r;
      END;
      IF EXISTS (SELECT 1 FROM unnest(v_hash) h WHERE h <> ALL (coalesce(p_seen, '{}'))) THEN
        RETURN QUERY SELECT u.k, u.s, u.e, u.n, u.y, NULL::boolean, u.h
                       FROM unnest(v_kind, v_scope, v_epoch, v_node, v_key, v_hash) AS u(k, s, e, n, y, h);
        RETURN;
      END IF;
    END IF;
    EXIT WHEN v_waited;
    -- Who locked the row last (xmax): a ringer locks it, and nobody else but
    -- this session's READ, which is over.
    SELECT d.xmax::text INTO v_xmax FROM pgleader.doorbells d WHERE d.node_id = p_node;
    IF NOT v_read AND v_xmax IS DISTINCT FROM current_setting('pgleader.watch_xmax', true) THEN
      -- A bare wait, but the row has had a locker since the last wait of this
      -- session began: a ring that found the session between two statements
      -- (the server ignores a signal to an idle backend). READ first.
      v_read := true;
      CONTINUE;
    END IF;
    v_waited := true;
    BEGIN
      IF p_key IS NULL THEN
        PERFORM pg_sleep(p_timeout_ms / 1000.0);
      ELSE
        PERFORM set_config('lock_timeout', p_timeout_ms::text, true);
        PERFORM pg_advisory_xact_lock_shared(p_key);
        v_free := true;
      END IF;
    EXCEPTION
      WHEN lock_not_available THEN
        v_free := false;
      WHEN query_canceled THEN
        -- A doorbell, or the caller's own cancel request. A ringer locks this
        -- node's row FOR KEY SHARE before it signals, so a ring since the wait
        -- began shows as a new locker (xmax) of the row: the READ (which waits
        -- for the ringer's commit) follows in this statement, a round trip
        -- sooner than the caller's next call. With no new locker the cancel is
        -- the caller's, and it ends the statement.
        SELECT d.xmax::text IS DISTINCT FROM v_xmax INTO v_rang FROM pgleader.doorbells d WHERE d.node_id = p_node;
        IF NOT coalesce(v_rang, false) THEN
          RAISE EXCEPTION USING ERRCODE = 'query_canceled', MESSAGE = 'canceling statement due to user request';
        END IF;
    END;
    EXIT WHEN NOT v_rang;
    v_read := true;
  END LOOP;
  -- The row's locker as this wait began: the next bare wait compares it.
  PERFORM set_config('pgleader.watch_xmax', v_xmax, false);
  RETURN QUERY SELECT 'wait'::text, NULL::text, NULL::bigint, NULL::text, p_key, v_free, NULL::int;
END $function$;
