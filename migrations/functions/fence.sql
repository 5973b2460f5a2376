-- fence: the caller's transaction may write for p_scope's term p_epoch (S3), or
-- PLF01. Callers: any role granted EXECUTE (node logins, application roles); the
-- epoch is not a secret and proves nothing about the caller: the fence only
-- admits writes of the current term, and a login bound elsewhere is refused.
--   1. The scope's fence key is taken shared for the transaction, without
--      waiting: end_fenced finds the transaction by it. A session holding that
--      key exclusively would hide the transaction, so the fence refuses (PLF13,
--      naming the session) instead of proceeding unmarked.
--   2. The scope's row is locked FOR KEY SHARE until the transaction ends: a
--      successor's claim cannot bump the epoch meanwhile.
--   3. A node login (a member of the node role) that may not campaign for a
--      bound scope is refused (PLF10): it cannot probe another service's epochs.
--   4. idle_in_transaction_session_timeout is set to the holder's session lease
--      for the rest of the transaction, and where the server allows prepared
--      transactions the transaction touches a temporary table of the session's,
--      which makes it impossible to PREPARE: a fenced transaction always has a
--      backend that end_fenced can end.
-- A term whose fenced transactions end_fenced ended (fenced_off_epoch) is
-- refused too: its holder is gone, and a writer that keeps fencing with its epoch
-- would hold the row against every successor.
-- The refusal says the epoch is stale, not which epoch or holder is current.
CREATE OR REPLACE FUNCTION pgleader.fence(p_scope text, p_epoch bigint, p_holder text DEFAULT NULL::text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  st      pgleader.leader_state;
  v_floor bigint := pgleader.epoch_floor();
  v_key   bigint;
  v_hi    int;
  v_lo    int;
BEGIN
  SELECT s.lock_key INTO v_key FROM pgleader.leader_state s WHERE s.scope = p_scope;
  IF FOUND THEN
    v_hi := ((v_key >> 32) & 2147483647)::int;
    v_lo := (v_key & 2147483647)::int;
    IF NOT pg_try_advisory_xact_lock_shared(v_hi, v_lo) THEN
      RAISE EXCEPTION USING ERRCODE = 'PLF13',
        MESSAGE = format('pgleader: the fence key of scope %L (%s, %s) is held exclusively by another session (%s): a fenced write could not be bounded',
                         p_scope, v_hi, v_lo,
                         coalesce((SELECT string_agg(format('pid %s, role %s', l.pid, quote_ident(a.usename::text)), '; ')
                                     FROM pg_catalog.pg_locks l LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
                                    WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted AND l.mode = 'ExclusiveLock'
                                      AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = current_database())
                                      AND l.classid = v_hi::oid AND l.objid = v_lo::oid), 'unknown')),
        HINT = 'that session interferes with pgleader: end it (pg_terminate_backend), and revoke the advisory-lock functions from PUBLIC (docs/security.md, Hardening)';
    END IF;
  END IF;
  SELECT * INTO st FROM pgleader.leader_state s WHERE s.scope = p_scope FOR KEY SHARE;
  IF EXISTS (SELECT 1 FROM pgleader.scope_bindings)
     AND pg_catalog.pg_has_role(session_user, (SELECT r.role_name FROM pgleader.roles r WHERE r.kind = 'node'), 'MEMBER')
     AND NOT pgleader.may_campaign(p_scope, session_user) THEN
    PERFORM pgleader.refuse_unbound(p_scope, session_user);
  END IF;
  IF st.session_lease_ms > 0 THEN
    PERFORM set_config('idle_in_transaction_session_timeout', st.session_lease_ms::text, true);
  END IF;
  IF p_epoch <= v_floor THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF01',
      MESSAGE = format('pgleader: fenced: write for scope %L carries epoch %s, granted before the failover to timeline %s (epochs now start above %s)',
                       p_scope, p_epoch, pgleader.wal_timeline(), v_floor);
  END IF;
  IF st.scope IS NULL OR st.epoch IS DISTINCT FROM p_epoch OR st.released_at IS NOT NULL
     OR st.holder IS NULL OR (p_holder IS NOT NULL AND st.holder IS DISTINCT FROM p_holder)
     OR st.fenced_off_epoch IS NOT DISTINCT FROM st.epoch THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF01',
      MESSAGE = format('pgleader: fenced: write for scope %L carries epoch %s, which is no longer current', p_scope, p_epoch);
  END IF;
  IF current_setting('max_prepared_transactions')::int > 0 THEN
    IF to_regclass('pg_temp.pgleader_fenced') IS NULL THEN
      BEGIN
        CREATE TEMPORARY TABLE IF NOT EXISTS pgleader_fenced ();
      EXCEPTION WHEN insufficient_privilege THEN
        RAISE EXCEPTION USING ERRCODE = '42501',
          MESSAGE = format('pgleader: the server allows prepared transactions (max_prepared_transactions = %s), and role %I may not create the temporary table that keeps a fenced transaction from being prepared',
                           current_setting('max_prepared_transactions'), current_user),
          HINT = format('GRANT TEMPORARY ON DATABASE %I TO %I (pgleader migrate does it when it may), or set max_prepared_transactions = 0',
                        current_database(), current_user);
      END;
    END IF;
    PERFORM 1 FROM pg_temp.pgleader_fenced LIMIT 0;
  END IF;
END $function$;
