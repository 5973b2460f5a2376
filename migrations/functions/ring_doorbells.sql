-- ring_doorbells: wake the watch sessions of the nodes p_nodes (the doorbell:
-- doorbell_register, watch). Each node's doorbell row is locked FOR KEY SHARE
-- first, in node_id order, and held until the caller's transaction ends: the
-- woken session's re-read (watch) locks the row FOR UPDATE before it reads, so
-- it reads after this commit. Then the backend is signalled (pg_cancel_backend)
-- only if it is still the one registered — the same pid, backend_start, login
-- and application_name in pg_stat_activity: a reused pid never has the same
-- start —, is running a statement (a session between statements re-reads at
-- its next call anyway), is not waiting for a transaction (that is its re-read,
-- which waits for this one), and the owner may signal it (checked here, so that
-- ringing never raises). Callers: the schema's SECURITY DEFINER functions, as
-- their last act (a ringer must not wait for anything a re-read holds). Granted
-- to no role. Returns how many sessions it signalled.
CREATE OR REPLACE FUNCTION pgleader.ring_doorbells(p_nodes text[])
 RETURNS integer
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  d       record;
  v_n     int := 0;
  v_super boolean;
  v_sig   boolean;
BEGIN
  IF coalesce(cardinality(p_nodes), 0) = 0 THEN
    RETURN 0;
  END IF;
  SELECT r.rolsuper INTO v_super FROM pg_catalog.pg_roles r WHERE r.rolname = current_user;
  v_sig := pg_catalog.pg_has_role(current_user, 'pg_signal_backend', 'USAGE');
  FOR d IN SELECT b.node_id, b.backend_pid, b.backend_start, b.login_role, b.application_name
             FROM pgleader.doorbells b
            WHERE b.node_id = ANY (p_nodes) AND b.ringable
            ORDER BY b.node_id
              FOR KEY SHARE
  LOOP
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_stat_get_activity(d.backend_pid) a
                 JOIN pg_catalog.pg_roles r ON r.oid = a.usesysid
                WHERE a.pid = d.backend_pid AND a.backend_start = d.backend_start
                  AND r.rolname = d.login_role AND a.application_name = d.application_name
                  AND a.state = 'active'
                  AND NOT (a.wait_event_type = 'Lock' AND a.wait_event IN ('transactionid', 'tuple'))
                  AND (v_super OR (NOT r.rolsuper AND (v_sig OR pg_catalog.pg_has_role(current_user, r.oid, 'USAGE'))))) THEN
      PERFORM pg_catalog.pg_cancel_backend(d.backend_pid);
      v_n := v_n + 1;
    END IF;
  END LOOP;
  RETURN v_n;
END $function$;
