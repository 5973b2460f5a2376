-- record_eviction: audit an eviction (and announce it) before the operator's
-- session terminates the holder's backend, if the holder is still the expected one.
-- Returns the audit id, or NULL when the holder changed. The termination itself
-- runs with the operator's own rights (pg_signal_backend).
CREATE OR REPLACE FUNCTION pgleader.record_eviction(p_scope text, p_epoch bigint, p_holder text, p_pid integer, p_reason text, p_via text)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  v_id bigint;
BEGIN
  PERFORM 1 FROM pgleader.leader_state st
   WHERE st.scope = p_scope AND st.epoch = p_epoch AND st.holder = p_holder
     AND st.holder_pid = p_pid AND st.released_at IS NULL;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
  VALUES (p_scope, p_holder, p_epoch, 'evicted',
          jsonb_build_object('reason', left(p_reason, 200), 'pid', p_pid, 'by', session_user, 'via', left(p_via, 200),
                             'application_name', current_setting('application_name')))
  RETURNING id INTO v_id;
  PERFORM pg_notify('leader_change', json_build_object(
      'scope', p_scope, 'epoch', p_epoch, 'holder', p_holder, 'event', 'evicted')::text);
  RETURN v_id;
END $function$;
