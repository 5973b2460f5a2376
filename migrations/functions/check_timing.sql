-- check_timing: the timing a node registers or claims with obeys the rules every
-- guarantee rests on (docs/protocol.md §5), or PLF11 naming the rule:
--   I ≥ 10 ms, T ≥ 10 ms (when given), I + T < W (I < W without T), W < L,
--   L − W ≥ 100 ms, and L ≤ 600000 ms (10 minutes).
-- The bound on L bounds every wait computed from the database's values: a
-- successor waits for a predecessor's trust window (≤ W < L) and never longer.
CREATE OR REPLACE FUNCTION pgleader.check_timing(p_interval_ms integer, p_timeout_ms integer, p_trust_ms integer, p_lease_ms integer)
 RETURNS void
 LANGUAGE plpgsql
 IMMUTABLE
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  v_rule text;
BEGIN
  v_rule := CASE
    WHEN p_interval_ms IS NULL OR p_trust_ms IS NULL OR p_lease_ms IS NULL
      THEN 'the heartbeat interval, trust window and session lease are required'
    WHEN p_interval_ms < 10 THEN 'the heartbeat interval must be at least 10 ms'
    WHEN p_timeout_ms IS NOT NULL AND p_timeout_ms < 10 THEN 'the heartbeat timeout must be at least 10 ms'
    WHEN p_interval_ms::bigint + coalesce(p_timeout_ms, 0) >= p_trust_ms
      THEN 'the heartbeat interval plus the heartbeat timeout must be shorter than the trust window'
    WHEN p_trust_ms >= p_lease_ms THEN 'the trust window must be shorter than the session lease'
    WHEN p_lease_ms::bigint - p_trust_ms < 100 THEN 'the session lease must exceed the trust window by at least 100 ms'
    WHEN p_lease_ms > 600000 THEN 'the session lease must be at most 600000 ms (10 minutes)'
  END;
  IF v_rule IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF11',
      MESSAGE = format('pgleader: timing out of bounds (interval %s ms, timeout %s ms, trust window %s ms, session lease %s ms): %s',
                       p_interval_ms, coalesce(p_timeout_ms::text, '-'), p_trust_ms, p_lease_ms, v_rule),
      HINT = 'I + T < W < L, L - W >= 100 ms, L <= 10 minutes (docs/protocol.md, Timing rules)';
  END IF;
END $function$;
