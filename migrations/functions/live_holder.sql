-- live_holder: the holder of a scope's row while its term is live — in lock mode
-- while its leadership backend holds the scope's lock, in lease mode while its
-- lease runs in the server's time — else NULL.
CREATE OR REPLACE FUNCTION pgleader.live_holder(st pgleader.leader_state, p_locks jsonb)
 RETURNS text
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
  SELECT CASE WHEN st.holder IS NULL OR st.released_at IS NOT NULL THEN NULL
              WHEN st.mode = 'lease'
                THEN CASE WHEN st.last_heartbeat + make_interval(secs => coalesce(st.session_lease_ms, 0) / 1000.0)
                               > clock_timestamp() THEN st.holder END
              WHEN st.holder_pid IS NOT NULL AND p_locks ? (st.holder_pid::text || ':' || st.lock_key::text)
                THEN st.holder END
$function$;
