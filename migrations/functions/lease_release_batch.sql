-- lease_release_batch: release_batch for lease mode (no advisory lock to give
-- back; ownership by node and token). A release of a term a handover was asked
-- for keeps the reservation, as in release_batch.
CREATE OR REPLACE FUNCTION pgleader.lease_release_batch(p_node text, p_token bigint, p_scopes text[], p_epochs bigint[], p_reasons text[])
 RETURNS TABLE(scope text, ok boolean, busy boolean)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  i          int;
  st         pgleader.leader_state;
  v_ours     boolean;
  v_now      timestamptz;
  v_done     text[] := '{}';
  v_to       text;
  v_cooldown int;
  v_mine     boolean;
BEGIN
  PERFORM set_config('synchronous_commit', 'on', true);
  SELECT n.resign_cooldown_ms, true INTO v_cooldown, v_mine FROM pgleader.nodes n
   WHERE n.node_id = p_node AND n.lease_token = p_token AND n.mode = 'lease';
  FOR i IN 1 .. coalesce(cardinality(p_scopes), 0) LOOP
    SELECT * INTO st FROM pgleader.leader_state s WHERE s.scope = p_scopes[i] FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
      RETURN QUERY SELECT p_scopes[i], false, EXISTS (SELECT 1 FROM pgleader.leader_state s WHERE s.scope = p_scopes[i]);
      CONTINUE;
    END IF;
    v_now := clock_timestamp();
    v_ours := coalesce(v_mine, false) AND st.epoch = p_epochs[i] AND st.holder = p_node
              AND st.released_at IS NULL AND st.mode = 'lease';
    IF v_ours THEN
      v_to := CASE WHEN st.handover_epoch = st.epoch AND st.handover_deadline > v_now THEN st.handover_to END;
      UPDATE pgleader.terms t SET released_at = v_now, release_reason = p_reasons[i], handed_to = v_to, last_sign = v_now
       WHERE t.scope = st.scope AND t.epoch = st.epoch AND t.released_at IS NULL;
      UPDATE pgleader.leader_state s SET holder = NULL, released_at = v_now, lease_seq = s.lease_seq + 1,
             last_holder = p_node,
             cooldown_until = CASE WHEN p_reasons[i] IN ('resigned', 'handed_over')
                                   THEN v_now + make_interval(secs => coalesce(v_cooldown, 0) / 1000.0) END,
             handover_to = v_to, handover_epoch = CASE WHEN v_to IS NOT NULL THEN st.handover_epoch END,
             handover_deadline = CASE WHEN v_to IS NOT NULL THEN st.handover_deadline END,
             handover_by = CASE WHEN v_to IS NOT NULL THEN st.handover_by END
       WHERE s.scope = st.scope;
      INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
      VALUES (st.scope, p_node, st.epoch, 'released',
              jsonb_strip_nulls(jsonb_build_object('reason', p_reasons[i], 'to', v_to)));
      PERFORM pg_notify('leader_change', json_strip_nulls(json_build_object(
          'scope', st.scope, 'epoch', st.epoch, 'holder', p_node, 'event', 'released',
          'reason', p_reasons[i], 'to', v_to))::text);
      v_done := v_done || st.scope;
    END IF;
    RETURN QUERY SELECT st.scope, v_ours, false;
  END LOOP;
  IF cardinality(v_done) > 0 THEN
    UPDATE pgleader.nodes n SET leads = ARRAY(SELECT x FROM unnest(n.leads) x WHERE x <> ALL (v_done) ORDER BY x)
     WHERE n.node_id = p_node;
  END IF;
END $function$;
