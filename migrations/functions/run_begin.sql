-- run_begin: under the scope's fence, whether a run of the key's period already
-- completed (exit code 0), and if not, record this term's run as started.
-- p_key NULL: the key is the current period, aligned to the Unix epoch in UTC by
-- the database's clock (one clock for every host): for 24h, midnight UTC.
-- Proof: fence (the term is current) and term_login (the caller is the login
-- of the term's holder, PLF12): no other login inserts, rewrites or locks a run.
CREATE OR REPLACE FUNCTION pgleader.run_begin(p_scope text, p_epoch bigint, p_period interval, p_key text DEFAULT NULL::text, OUT run_key text, OUT completed_at timestamp with time zone, OUT completed_by text, OUT completed_epoch bigint)
 RETURNS record
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  v_len    double precision := extract(epoch FROM p_period);
  v_start  timestamptz;
  v_key    text;
  v_holder text;
BEGIN
  IF octet_length(p_key) > 200 THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF11', MESSAGE = 'pgleader: a run key is at most 200 bytes';
  END IF;
  IF p_key IS NULL AND (p_period IS NULL OR p_period < interval '1 second' OR p_period > interval '366 days') THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF11', MESSAGE = format('pgleader: run period %s must be 1 second to 366 days', p_period);
  END IF;
  PERFORM pgleader.fence(p_scope, p_epoch);
  PERFORM pgleader.term_login(p_scope, p_epoch);
  IF p_key IS NULL THEN
    v_start := to_timestamp(floor(extract(epoch FROM statement_timestamp()) / v_len) * v_len);
    v_key := to_char(v_start AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') || '/' || p_period::text;
  ELSE
    v_key := p_key;
  END IF;
  run_key := v_key;
  SELECT r.ended_at, r.holder, r.epoch INTO completed_at, completed_by, completed_epoch
    FROM pgleader.runs r WHERE r.scope = p_scope AND r.run_key = v_key AND r.exit_code = 0
   ORDER BY r.ended_at LIMIT 1;
  IF FOUND THEN
    RETURN;
  END IF;
  SELECT s.holder INTO v_holder FROM pgleader.leader_state s WHERE s.scope = p_scope;
  -- OUT parameters share the columns' names: the conflict target names the
  -- unique constraint instead.
  INSERT INTO pgleader.runs AS r (scope, run_key, epoch, holder) VALUES (p_scope, v_key, p_epoch, v_holder)
  ON CONFLICT ON CONSTRAINT runs_scope_run_key_epoch_key
  DO UPDATE SET started_at = clock_timestamp(), ended_at = NULL, exit_code = NULL;
END $function$;
