-- request_resign: an operator asks the holder of scope p_scope's current term
-- (p_epoch, if given) to resign; its next heartbeat sees the request. The request is attributed to
-- the session's login role (session_user), recorded in resign_requested_role and
-- in the audit row; p_by is kept as what the caller says it is (a tool name).
-- The holder's doorbell is rung (ring_doorbells): it heartbeats at once.
CREATE OR REPLACE FUNCTION pgleader.request_resign(p_scope text, p_epoch bigint, p_by text)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  v_holder text;
  v_epoch  bigint;
BEGIN
  UPDATE pgleader.leader_state s
     SET resign_requested_epoch = s.epoch, resign_requested_by = left(p_by, 200),
         resign_requested_role = session_user
   WHERE s.scope = p_scope AND s.released_at IS NULL AND s.holder IS NOT NULL
     AND (p_epoch IS NULL OR s.epoch = p_epoch)
  RETURNING s.holder, s.epoch INTO v_holder, v_epoch;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
  VALUES (p_scope, v_holder, v_epoch, 'resign_requested',
          jsonb_build_object('by', session_user, 'via', left(p_by, 200),
                             'application_name', current_setting('application_name')));
  PERFORM pg_notify('leader_change', json_build_object(
      'scope', p_scope, 'epoch', v_epoch, 'holder', v_holder, 'event', 'resign_requested')::text);
  PERFORM pgleader.ring_doorbells(ARRAY[v_holder]);
  RETURN true;
END $function$;
