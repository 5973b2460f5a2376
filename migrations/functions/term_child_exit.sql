-- term_child_exit: record, in the row of scope p_scope's current term p_epoch,
-- that the command `pgleader run` supervises ended on its own while the term
-- was led: its exit code (128+signal for a signal) and how (exit or signal).
-- A term that ends after its child crashed then reads as such in history and
-- the dashboard, not as a clean shutdown. terms.child_exits counts every such
-- end in the term (a restart policy restarts the child); the audit keeps the
-- first 100 of a term as child_exited.
-- Proof: term_login (the caller is the login of the term's holder, and the term
-- is current, PLF12). Bounds: code 0–255, cause exit or signal (PLF11).
CREATE OR REPLACE FUNCTION pgleader.term_child_exit(p_scope text, p_epoch bigint, p_code integer, p_cause text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  v_exits int;
BEGIN
  IF p_code IS NULL OR p_code NOT BETWEEN 0 AND 255 OR p_cause IS NULL OR p_cause NOT IN ('exit', 'signal') THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF11',
      MESSAGE = 'pgleader: a child''s exit is a code 0–255 and a cause exit or signal';
  END IF;
  PERFORM pgleader.term_login(p_scope, p_epoch);
  UPDATE pgleader.terms t SET child_exits = t.child_exits + 1, child_exit_code = p_code, child_exit_cause = p_cause
   WHERE t.scope = p_scope AND t.epoch = p_epoch AND t.released_at IS NULL
  RETURNING t.child_exits INTO v_exits;
  IF v_exits IS NOT NULL AND v_exits <= 100 THEN
    INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
    SELECT p_scope, s.holder, p_epoch, 'child_exited',
           jsonb_build_object('exit_code', p_code, 'cause', p_cause, 'exits', v_exits)
      FROM pgleader.leader_state s WHERE s.scope = p_scope;
  END IF;
END $function$;
