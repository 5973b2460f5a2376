-- cancel_handover: withdraw a handover to p_to that has not been completed (the
-- command that asked gave up). When the scope has no live leader, its
-- candidates' doorbells are rung, so that they claim it. Returns whether a
-- request was withdrawn.
CREATE OR REPLACE FUNCTION pgleader.cancel_handover(p_scope text, p_to text, p_via text)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  v_epoch bigint;
  v_free  boolean;
BEGIN
  UPDATE pgleader.leader_state s SET handover_to = NULL, handover_epoch = NULL,
         handover_deadline = NULL, handover_by = NULL
   WHERE s.scope = p_scope AND s.handover_to = p_to
  RETURNING s.epoch, s.holder IS NULL OR s.released_at IS NOT NULL INTO v_epoch, v_free;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
  VALUES (p_scope, NULL, v_epoch, 'handover_cancelled',
          jsonb_build_object('to', p_to, 'by', session_user, 'via', left(p_via, 200)));
  IF v_free THEN
    PERFORM pg_notify('leader_change', json_build_object(
        'scope', p_scope, 'epoch', v_epoch, 'event', 'released')::text);
    PERFORM pgleader.ring_doorbells(ARRAY(
      SELECT c.node_id FROM pgleader.nodes c WHERE c.stopped_at IS NULL AND p_scope = ANY (c.scopes)));
  END IF;
  RETURN true;
END $function$;
