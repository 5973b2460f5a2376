-- fenced_blockers: the transactions that hold p_scope's row through pgleader.fence
-- right now: each has locked the row (it is one of the row's lockers, read from
-- the row's xmax and, for several lockers, its multixact's members) AND holds the
-- scope's fence key shared (which only fence takes on a row lock's behalf). Both
-- are what the database recorded when fence ran; a session that only takes the
-- fence key (any role may, without the hardening) blocks nothing and is not
-- listed. A prepared transaction among the lockers is listed with its gid and
-- no pid (fence refuses to be prepared where it can; one prepared before that
-- can only be finished by its owner or a superuser).
CREATE OR REPLACE FUNCTION pgleader.fenced_blockers(p_scope text)
 RETURNS TABLE(pid integer, login_role text, application text, backend_start timestamp with time zone, xact_start timestamp with time zone, prepared_gid text)
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  v_key  bigint;
  v_xmax xid;
  v_xids text[];
  v_db   oid := (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = current_database());
BEGIN
  SELECT s.lock_key, s.xmax INTO v_key, v_xmax FROM pgleader.leader_state s WHERE s.scope = p_scope;
  IF NOT FOUND OR v_xmax::text = '0' THEN
    RETURN;
  END IF;
  v_xids := ARRAY[v_xmax::text];
  -- xmax is a transaction id (one locker) or a multixact id (several); which,
  -- the catalog does not say: read it both ways. The fence-key condition below
  -- keeps a misreading from naming anything but a fencer of this scope.
  BEGIN
    v_xids := v_xids || ARRAY(SELECT m.xid::text FROM pg_catalog.pg_get_multixact_members(v_xmax) m);
  EXCEPTION WHEN OTHERS THEN
    NULL; -- not a multixact id
  END;
  RETURN QUERY
  SELECT DISTINCT ON (l.pid) l.pid, a.usename::text, a.application_name, a.backend_start, a.xact_start, NULL::text
    FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
   WHERE l.locktype = 'transactionid' AND l.mode = 'ExclusiveLock' AND l.granted
     AND l.transactionid::text = ANY (v_xids)
     AND EXISTS (SELECT 1 FROM pg_catalog.pg_locks f
                  WHERE f.pid = l.pid AND f.locktype = 'advisory' AND f.objsubid = 2 AND f.granted
                    AND f.mode = 'ShareLock' AND f.database = v_db
                    AND f.classid = (((v_key >> 32) & 2147483647)::int)::oid
                    AND f.objid = ((v_key & 2147483647)::int)::oid)
  UNION ALL
  SELECT NULL::int, p.owner::text, NULL::text, NULL::timestamptz, p.prepared, p.gid
    FROM pg_catalog.pg_prepared_xacts p
   WHERE p.transaction::text = ANY (v_xids) AND p.database = current_database();
END $function$;
