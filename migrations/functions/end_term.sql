-- end_term: the release rule of both modes. Its holder p_node ends the term
-- st (a row of leader_state the caller has locked and proven the node holds) for
-- p_reason: the term closes at its holder's last sign of life (now), the scope
-- is free with p_node as its last holder, in its resign cooldown (p_cooldown_ms)
-- after resigned or handed_over; a handover asked for this term keeps the scope
-- reserved for its target (returned, and recorded as the term's handed_to). The
-- release is audited and announced (leader_change). Lock mode (p_lease false)
-- also forgets the holder's guard and its predecessors' (they trusted only this
-- term); lease mode moves lease_seq on, so a claim that observed the lease
-- before fails.
CREATE OR REPLACE FUNCTION pgleader.end_term(st pgleader.leader_state, p_node text, p_reason text, p_cooldown_ms integer, p_lease boolean)
 RETURNS text
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  v_now timestamptz := clock_timestamp();
  v_to  text;
BEGIN
  v_to := CASE WHEN st.handover_epoch = st.epoch AND st.handover_deadline > v_now THEN st.handover_to END;
  UPDATE pgleader.terms t SET released_at = v_now, release_reason = p_reason, handed_to = v_to, last_sign = v_now
   WHERE t.scope = st.scope AND t.epoch = st.epoch AND t.released_at IS NULL;
  UPDATE pgleader.leader_state s SET holder = NULL, released_at = v_now, last_holder = p_node,
         holder_pid = CASE WHEN p_lease THEN s.holder_pid END,
         holder_guard_key = CASE WHEN p_lease THEN s.holder_guard_key END,
         unresolved_guards = CASE WHEN p_lease THEN s.unresolved_guards ELSE '{}' END,
         unresolved_trust_ms = CASE WHEN p_lease THEN s.unresolved_trust_ms ELSE 0 END,
         lease_seq = s.lease_seq + CASE WHEN p_lease THEN 1 ELSE 0 END,
         cooldown_until = CASE WHEN p_reason IN ('resigned', 'handed_over')
                               THEN v_now + make_interval(secs => coalesce(p_cooldown_ms, 0) / 1000.0) END,
         handover_to = v_to, handover_epoch = CASE WHEN v_to IS NOT NULL THEN st.handover_epoch END,
         handover_deadline = CASE WHEN v_to IS NOT NULL THEN st.handover_deadline END,
         handover_by = CASE WHEN v_to IS NOT NULL THEN st.handover_by END
   WHERE s.scope = st.scope;
  INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
  VALUES (st.scope, p_node, st.epoch, 'released',
          jsonb_strip_nulls(jsonb_build_object('reason', p_reason, 'to', v_to)));
  PERFORM pg_notify('leader_change', json_strip_nulls(json_build_object(
      'scope', st.scope, 'epoch', st.epoch, 'holder', p_node, 'event', 'released',
      'reason', p_reason, 'to', v_to))::text);
  RETURN v_to;
END $function$;
