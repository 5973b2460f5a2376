-- note_process_start: after a registration of node p_node (prev: its row
-- before, NULL for a first registration), record the start of the process that
-- registered it (p_started_at, the node's own clock, never after now()) and
-- count a restart when another process started since (a start that differs
-- from the one on record). The same process registering again (a new session
-- after a lost one) keeps both.
CREATE OR REPLACE FUNCTION pgleader.note_process_start(p_node text, prev pgleader.nodes, p_started_at timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
BEGIN
  IF p_started_at IS NULL THEN
    RETURN;
  END IF;
  UPDATE pgleader.nodes n
     SET started_at = least(p_started_at, now()),
         restarts = CASE WHEN prev.node_id IS NULL THEN 0
                         WHEN prev.started_at IS DISTINCT FROM least(p_started_at, now()) THEN prev.restarts + 1
                         ELSE prev.restarts END
   WHERE n.node_id = p_node AND n.login_role = session_user;
END $function$;
