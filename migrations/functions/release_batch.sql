-- release_batch, version 8: as version 5, plus: a release of the term a handover
-- was requested for records its target (terms.handed_to) and keeps the scope
-- reserved for it (the announcement names it: "to"); a clean release (resigned,
-- handed_over) records the releasing node and its cooldown, so that no deferral
-- waits for it.
-- Proof: the caller is the leadership session node p_node registered
-- (caller_node, PLF12); a term is released only when this backend holds it
-- (holder_pid) and its lock. A scratch scope's lock is the warm-up
-- transaction's and ends with it: it is never unlocked here.
CREATE OR REPLACE FUNCTION pgleader.release_batch(p_node text, p_scopes text[], p_epochs bigint[], p_reasons text[])
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
  v_cooldown int := (pgleader.caller_node(p_node)).resign_cooldown_ms;
  v_scratch  boolean;
BEGIN
  PERFORM set_config('synchronous_commit', 'on', true);
  IF cardinality(p_scopes) > 1000 THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF11',
      MESSAGE = format('pgleader: a release of %s scopes: at most 1000 a call', cardinality(p_scopes));
  END IF;
  FOR i IN 1 .. coalesce(cardinality(p_scopes), 0) LOOP
    SELECT * INTO st FROM pgleader.leader_state s WHERE s.scope = p_scopes[i] FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
      IF EXISTS (SELECT 1 FROM pgleader.leader_state s WHERE s.scope = p_scopes[i]) THEN
        RETURN QUERY SELECT p_scopes[i], false, true;
      ELSE
        RETURN QUERY SELECT p_scopes[i], false, false;
      END IF;
      CONTINUE;
    END IF;
    v_now := clock_timestamp();
    v_scratch := starts_with(st.scope, 'pgleader-warmup-');
    v_ours := st.epoch = p_epochs[i] AND st.holder = p_node AND st.released_at IS NULL
              AND st.holder_pid = pg_backend_pid();
    IF v_ours THEN
      v_to := CASE WHEN st.handover_epoch = st.epoch AND st.handover_deadline > v_now THEN st.handover_to END;
      UPDATE pgleader.terms t SET released_at = v_now, release_reason = p_reasons[i], handed_to = v_to, last_sign = v_now
       WHERE t.scope = st.scope AND t.epoch = st.epoch AND t.released_at IS NULL;
      UPDATE pgleader.leader_state s SET holder = NULL, holder_pid = NULL,
             holder_guard_key = NULL, released_at = v_now,
             unresolved_guards = '{}', unresolved_trust_ms = 0,
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
      IF NOT v_scratch AND NOT pg_advisory_unlock(st.lock_key) THEN
        RAISE EXCEPTION USING ERRCODE = 'PLF02',
          MESSAGE = format('pgleader: backend %s does not hold advisory lock %s of scope %L',
                           pg_backend_pid(), st.lock_key, st.scope);
      END IF;
      v_done := v_done || st.scope;
    ELSIF NOT v_scratch AND pgleader.lock_held(st.lock_key, pg_backend_pid()) THEN
      PERFORM pg_advisory_unlock(st.lock_key);
    END IF;
    RETURN QUERY SELECT st.scope, v_ours, false;
  END LOOP;
  IF cardinality(v_done) > 0 THEN
    UPDATE pgleader.nodes n SET leads = ARRAY(SELECT x FROM unnest(n.leads) x WHERE x <> ALL (v_done) ORDER BY x)
     WHERE n.node_id = p_node;
  END IF;
END $function$;
