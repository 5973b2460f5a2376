-- fence, version 12: as version 6, and (1) the transaction also takes the scope's
-- fence key shared, without waiting (a session holding it exclusively only hides
-- this transaction from end_fenced), so that end_fenced can find it; (2) the
-- refusal says the epoch is stale, not which epoch or holder is current.
CREATE OR REPLACE FUNCTION pgleader.fence(p_scope text, p_epoch bigint, p_holder text DEFAULT NULL::text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  st      pgleader.leader_state;
  v_floor bigint := pgleader.epoch_floor();
BEGIN
  SELECT * INTO st FROM pgleader.leader_state s WHERE s.scope = p_scope FOR KEY SHARE;
  IF FOUND THEN
    PERFORM pg_try_advisory_xact_lock_shared(((st.lock_key >> 32) & 2147483647)::int, (st.lock_key & 2147483647)::int);
  END IF;
  IF st.session_lease_ms > 0 THEN
    PERFORM set_config('idle_in_transaction_session_timeout', st.session_lease_ms::text, true);
  END IF;
  IF p_epoch <= v_floor THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF01',
      MESSAGE = format('pgleader: fenced: write for scope %L carries epoch %s, granted before the failover to timeline %s (epochs now start above %s)',
                       p_scope, p_epoch, pgleader.wal_timeline(), v_floor);
  END IF;
  IF NOT FOUND OR st.epoch IS DISTINCT FROM p_epoch OR st.released_at IS NOT NULL
     OR st.holder IS NULL OR (p_holder IS NOT NULL AND st.holder IS DISTINCT FROM p_holder) THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF01',
      MESSAGE = format('pgleader: fenced: write for scope %L carries epoch %s, which is no longer current', p_scope, p_epoch);
  END IF;
END $function$;
