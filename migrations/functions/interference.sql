-- interference: every session that holds or waits on a scope's advisory lock (in
-- any mode) without being a live candidate of that scope: not the backend on record
-- as the scope's holder, and not the leadership backend of a running node that
-- campaigns for it. Scopes: those in leader_state and those a running node
-- campaigns for (p_scopes narrows them). Session details come from
-- pg_stat_activity; client_addr is NULL unless the owner role may read all
-- statistics (pg_read_all_stats).
CREATE OR REPLACE FUNCTION pgleader.interference(p_scopes text[] DEFAULT NULL::text[])
 RETURNS TABLE(scope text, lock_key bigint, pid integer, mode text, granted boolean, role text, application_name text, client_addr text, backend_start timestamp with time zone, wait_start timestamp with time zone)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  -- lock key → [scope, holder_pid]: looked up by jsonb key (O(log n)) rather than
  -- joined, since pg_lock_status is estimated at one row and joins against it
  -- degenerate into nested loops.
  v_scopes jsonb;
BEGIN
  SELECT coalesce(jsonb_object_agg(k.key::text, jsonb_build_array(k.scope, k.holder_pid)), '{}') INTO v_scopes FROM (
    SELECT s.lock_key AS key, s.scope, s.holder_pid FROM pgleader.leader_state s
     WHERE p_scopes IS NULL OR s.scope = ANY (p_scopes)
    UNION ALL
    SELECT pgleader.lock_key(c.scope), c.scope, NULL
      FROM (SELECT DISTINCT unnest(n.scopes) AS scope FROM pgleader.nodes n WHERE n.stopped_at IS NULL) c
     WHERE (p_scopes IS NULL OR c.scope = ANY (p_scopes))
       AND NOT EXISTS (SELECT 1 FROM pgleader.leader_state s WHERE s.scope = c.scope)) k;
  RETURN QUERY
  WITH l AS MATERIALIZED (
    -- the locks on scope keys held or awaited by another backend than the holder
    -- on record: normally none (followers hold no lock on a scope's key)
    SELECT v_scopes->(x.key::text)->>0 AS scope, x.*
      FROM (SELECT l.pid, (l.classid::bigint << 32) | l.objid::bigint AS key, l.mode, l.granted, l.waitstart
              FROM pg_catalog.pg_locks l
             WHERE l.locktype = 'advisory' AND l.objsubid = 1
               AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = current_database())) x
     WHERE v_scopes ? (x.key::text)
       AND x.pid IS DISTINCT FROM (v_scopes->(x.key::text)->>1)::int
  )
  SELECT l.scope, l.key, l.pid, l.mode, l.granted, a.usename::text, a.application_name,
         host(a.client_addr), a.backend_start, l.waitstart
    FROM l LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
   WHERE NOT EXISTS (SELECT 1 FROM pgleader.nodes n
                      WHERE n.backend_pid = l.pid AND n.stopped_at IS NULL AND l.scope = ANY (n.scopes))
   ORDER BY l.scope, l.pid;
END $function$;
