-- run_end: under the scope's fence, record the exit code of the run run_begin
-- started in this term. A term that ended before its run did records nothing
-- (PLF01): that run did not complete the period.
-- Proof: fence (the term is current) and term_login (the caller is the login
-- of the term's holder, PLF12): no other login inserts, rewrites or locks a run.
CREATE OR REPLACE FUNCTION pgleader.run_end(p_scope text, p_epoch bigint, p_key text, p_exit_code integer)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
BEGIN
  IF octet_length(p_key) > 200 THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF11', MESSAGE = 'pgleader: a run key is at most 200 bytes';
  END IF;
  PERFORM pgleader.fence(p_scope, p_epoch);
  PERFORM pgleader.term_login(p_scope, p_epoch);
  UPDATE pgleader.runs SET ended_at = clock_timestamp(), exit_code = p_exit_code
   WHERE scope = p_scope AND run_key = p_key AND epoch = p_epoch;
  IF NOT FOUND THEN
    RAISE EXCEPTION USING ERRCODE = 'P0002',
      MESSAGE = format('pgleader: no run %L of scope %L was begun in epoch %s', p_key, p_scope, p_epoch);
  END IF;
END $function$;
