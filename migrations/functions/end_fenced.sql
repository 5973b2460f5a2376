-- end_fenced: end the fenced transactions that still hold p_scope's row after its
-- term ended, so that a successor's claim can bump the epoch. Only while no
-- session leads the scope: in lock mode this call takes the scope's lock (without
-- waiting; refused, PLF07, when it is held) and gives it back at the end; in
-- lease mode the lease on record must have expired or been released. Each
-- transaction is audited (pid, login, application, start) before its backend is
-- terminated, which needs pg_signal_backend on the owner role (migrate grants it
-- when it may; a superuser's backend can never be ended this way): ended is false
-- where the termination was refused. Returns one row per fenced transaction found.
CREATE OR REPLACE FUNCTION pgleader.end_fenced(p_node text, p_scope text)
 RETURNS TABLE(pid integer, login_role text, application text, xact_start timestamp with time zone, ended boolean)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  st     pgleader.leader_state;
  v_lock boolean := false;
  r      record;
BEGIN
  SELECT * INTO st FROM pgleader.leader_state s WHERE s.scope = p_scope;
  IF NOT FOUND THEN
    RETURN;
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
  BEGIN
    FOR r IN SELECT l.pid AS bpid, a.usename::text AS who, a.application_name AS app, a.xact_start AS started
               FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
              WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted AND l.mode = 'ShareLock'
                AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = current_database())
                AND l.classid = (((st.lock_key >> 32) & 2147483647)::int)::oid
                AND l.objid = ((st.lock_key & 2147483647)::int)::oid
                AND l.pid <> pg_backend_pid()
              ORDER BY l.pid LOOP
      pid := r.bpid; login_role := r.who; application := r.app; xact_start := r.started;
      BEGIN
        ended := pg_terminate_backend(r.bpid);
      EXCEPTION WHEN insufficient_privilege THEN
        ended := false;
      END;
      INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
      VALUES (p_scope, p_node, st.epoch, 'fenced_tx_ended',
              jsonb_build_object('pid', r.bpid, 'login_role', r.who, 'application', r.app,
                                 'xact_start', r.started, 'ended', ended, 'by', session_user));
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
