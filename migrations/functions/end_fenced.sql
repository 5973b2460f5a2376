-- end_fenced: end the fenced transactions of an ended term that still hold
-- p_scope's row, so that a successor's claim can bump the epoch.
-- Proof, before anything is read: the caller is the registered session of node
-- p_node (caller_node: lock mode, the node's leadership backend; lease mode,
-- p_token), the node campaigns for p_scope and its login may (bindings), and a
-- claim has found the scope's row held for this term (fence_waits, written by
-- the claim, committed before this call began) for the larger of the caller's
-- and the ended term's trust windows. Else PLF12 (the caller) or PLF07 (the
-- state). Then only while no session leads the scope: in lock mode the call
-- takes the scope's lock (without waiting) and gives it back at the end; in
-- lease mode the lease must have expired or been released (PLF07 otherwise).
-- Victims: fenced_blockers (a row lock taken by fence, and the fence key), at
-- most 100 a call. Two steps, so that no termination happens without an audit
-- row that a rollback cannot take back: a blocker seen for the first time is
-- audited (fenced_tx_found, state 'found') and left alone; a blocker whose
-- fenced_tx_found row was committed before this call (same pid, backend start
-- and transaction start) is terminated and audited (fenced_tx_ended; state
-- 'ended', or 'refused' without pg_signal_backend). The engine calls again at
-- once after a 'found'. The term is fenced off first (fenced_off_epoch): fence
-- refuses its epoch from then on, so no new fenced transaction takes the place
-- of those ended. A prepared transaction cannot be ended: state
-- 'prepared', named by its gid.
CREATE OR REPLACE FUNCTION pgleader.end_fenced(p_node text, p_token bigint, p_scope text)
 RETURNS TABLE(pid integer, login_role text, application text, xact_start timestamp with time zone, state text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  n       pgleader.nodes := pgleader.caller_node(p_node, p_token);
  st      pgleader.leader_state;
  v_since timestamptz;
  v_ms    int;
  v_lock  boolean := false;
  v_ended boolean;
  r       record;
BEGIN
  IF NOT p_scope = ANY (n.scopes) OR NOT pgleader.may_campaign(p_scope, session_user) THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF12',
      MESSAGE = format('pgleader: node %L does not campaign for scope %L under role %s', p_node, p_scope, quote_ident(session_user));
  END IF;
  SELECT * INTO st FROM pgleader.leader_state s WHERE s.scope = p_scope;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  SELECT w.since INTO v_since FROM pgleader.fence_waits w WHERE w.scope = p_scope AND w.epoch = st.epoch;
  v_ms := greatest(coalesce(n.trust_window_ms, 0), coalesce(st.trust_window_ms, 0));
  IF v_since IS NULL OR v_since >= transaction_timestamp()
     OR v_since > clock_timestamp() - make_interval(secs => v_ms / 1000.0) THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF07',
      MESSAGE = format('pgleader: scope %L: no claim has found its row held by the fenced transactions of term %s for %s ms yet (since %s)',
                       p_scope, st.epoch, v_ms, coalesce(v_since::text, 'never'));
  END IF;
  IF st.mode = 'lease' THEN
    IF st.holder IS NOT NULL AND st.released_at IS NULL
       AND st.last_heartbeat + make_interval(secs => coalesce(st.session_lease_ms, 0) / 1000.0) > clock_timestamp() THEN
      RAISE EXCEPTION USING ERRCODE = 'PLF07',
        MESSAGE = format('pgleader: scope %L is led: its fenced transactions belong to a live term', p_scope);
    END IF;
  ELSE
    v_lock := pg_try_advisory_lock(st.lock_key);
    IF NOT v_lock THEN
      RAISE EXCEPTION USING ERRCODE = 'PLF07',
        MESSAGE = format('pgleader: scope %L is led: its fenced transactions belong to a live term', p_scope);
    END IF;
  END IF;
  -- The dead term is fenced off: fence refuses its epoch from now on (a
  -- non-key update: it does not wait for the fenced transactions' row locks).
  UPDATE pgleader.leader_state s SET fenced_off_epoch = st.epoch
   WHERE s.scope = p_scope AND s.epoch = st.epoch AND s.fenced_off_epoch IS DISTINCT FROM st.epoch;
  BEGIN
    FOR r IN SELECT b.* FROM pgleader.fenced_blockers(p_scope) b ORDER BY b.pid NULLS LAST, b.prepared_gid LIMIT 100 LOOP
      pid := r.pid; login_role := r.login_role; application := r.application; xact_start := r.xact_start;
      IF EXISTS (SELECT 1 FROM pgleader.audit a
                  WHERE a.scope = p_scope AND a.kind = 'fenced_tx_found' AND a.epoch = st.epoch
                    AND a.at < transaction_timestamp()
                    AND a.detail->>'pid' IS NOT DISTINCT FROM r.pid::text
                    AND a.detail->>'gid' IS NOT DISTINCT FROM r.prepared_gid
                    AND (a.detail->>'xact_start')::timestamptz IS NOT DISTINCT FROM r.xact_start
                    AND (a.detail->>'backend_start')::timestamptz IS NOT DISTINCT FROM r.backend_start) THEN
        IF r.prepared_gid IS NOT NULL THEN
          state := 'prepared';
          RETURN NEXT;
          CONTINUE;
        END IF;
        BEGIN
          v_ended := pg_terminate_backend(r.pid);
        EXCEPTION WHEN insufficient_privilege THEN
          v_ended := false;
        END;
        state := CASE WHEN v_ended THEN 'ended' ELSE 'refused' END;
        INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
        VALUES (p_scope, p_node, st.epoch, 'fenced_tx_ended',
                jsonb_build_object('pid', r.pid, 'login_role', r.login_role, 'application', r.application,
                                   'xact_start', r.xact_start, 'backend_start', r.backend_start,
                                   'ended', v_ended, 'by', session_user));
      ELSE
        state := CASE WHEN r.prepared_gid IS NOT NULL THEN 'prepared' ELSE 'found' END;
        INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
        VALUES (p_scope, p_node, st.epoch, 'fenced_tx_found',
                jsonb_strip_nulls(jsonb_build_object('pid', r.pid, 'gid', r.prepared_gid, 'login_role', r.login_role,
                                   'application', r.application, 'xact_start', r.xact_start,
                                   'backend_start', r.backend_start, 'by', session_user,
                                   'waited_since', v_since)));
      END IF;
      RETURN NEXT;
    END LOOP;
  EXCEPTION WHEN OTHERS THEN
    IF v_lock THEN
      PERFORM pg_advisory_unlock(st.lock_key);
    END IF;
    RAISE;
  END;
  IF v_lock THEN
    PERFORM pg_advisory_unlock(st.lock_key);
  END IF;
END $function$;

-- end_fenced for lock-mode nodes of release 12 (two arguments): as above, with
-- ended = (state = 'ended'). A lease-mode caller has no token here: PLF12.
CREATE OR REPLACE FUNCTION pgleader.end_fenced(p_node text, p_scope text)
 RETURNS TABLE(pid integer, login_role text, application text, xact_start timestamp with time zone, ended boolean)
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
  SELECT f.pid, f.login_role, f.application, f.xact_start, f.state = 'ended'
    FROM pgleader.end_fenced(p_node, NULL::bigint, p_scope) f
$function$;
