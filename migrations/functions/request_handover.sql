-- request_handover: an operator asks the holder of scope p_scope to hand it to
-- node p_to (without p_to: the live candidate of the highest priority, then the
-- most recently seen) within p_timeout_ms, or reserves a scope nobody leads for
-- that node. A holder is live while its lock is held (lock
-- mode) or its lease runs (lease mode). A target named in p_to is accepted while
-- it cools down after resigning or handing over the scope: the cooldown keeps a
-- resigner out of the free-for-all that follows its release, and a reserved
-- handover has none (only its target may claim); the target's engine ends its
-- cooldown when the release names it. Without p_to, a cooling-down node is
-- never chosen.
-- Then it rings the doorbell (ring_doorbells) of the live holder, which resigns
-- for the target, or, when no node leads, of the target, which claims.
CREATE OR REPLACE FUNCTION pgleader.request_handover(p_scope text, p_to text, p_timeout_ms integer, p_via text)
 RETURNS TABLE(epoch bigint, holder text, target text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  st      pgleader.leader_state;
  n       pgleader.nodes;
  v_locks jsonb := pgleader.lock_map();
  v_live  boolean;
  v_hold  text;
  v_to    text := p_to;
BEGIN
  IF p_timeout_ms IS NULL OR p_timeout_ms <= 0 THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF07', MESSAGE = format('pgleader: handover timeout %s ms: must be positive', p_timeout_ms);
  END IF;
  IF p_timeout_ms > 600000 THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF11', MESSAGE = format('pgleader: handover timeout %s ms: at most 600000 (10 minutes)', p_timeout_ms);
  END IF;
  SELECT * INTO st FROM pgleader.leader_state s WHERE s.scope = p_scope FOR NO KEY UPDATE;
  IF NOT FOUND AND NOT EXISTS (SELECT 1 FROM pgleader.nodes x WHERE p_scope = ANY (x.scopes)) THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF07', MESSAGE = format('pgleader: scope %L is unknown: no node campaigns for it and none ever led it', p_scope);
  END IF;
  IF st.retired_at IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF07', MESSAGE = format('pgleader: scope %L is retired: no node campaigns for it', p_scope);
  END IF;
  v_hold := pgleader.live_holder(st, v_locks);
  IF v_to IS NULL THEN
    SELECT ln.node_id INTO v_to FROM pgleader.live_nodes(v_locks) ln
     WHERE p_scope = ANY (ln.scopes) AND ln.priority > 0 AND ln.node_id IS DISTINCT FROM v_hold
       AND NOT coalesce(ln.node_id = st.last_holder AND st.cooldown_until > clock_timestamp(), false)
     ORDER BY ln.priority DESC, ln.last_seen DESC, ln.node_id LIMIT 1;
    IF v_to IS NULL THEN
      RAISE EXCEPTION USING ERRCODE = 'PLF07',
        MESSAGE = format('pgleader: no other live candidate of priority above 0 campaigns for scope %L (a candidate cooling down after resigning it does not count)', p_scope);
    END IF;
  END IF;
  SELECT * INTO n FROM pgleader.nodes x WHERE x.node_id = v_to;
  IF NOT FOUND THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF07', MESSAGE = format('pgleader: node %L is unknown (never registered)', v_to);
  END IF;
  v_live := EXISTS (SELECT 1 FROM pgleader.live_nodes(v_locks) ln WHERE ln.node_id = v_to);
  IF NOT v_live THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF07',
      MESSAGE = format('pgleader: node %L is not running (%s)', v_to,
                       CASE WHEN n.stopped_at IS NOT NULL THEN 'stopped at ' || n.stopped_at ELSE 'last seen ' || n.last_seen END);
  END IF;
  IF NOT p_scope = ANY (n.scopes) THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF07', MESSAGE = format('pgleader: node %L is not a candidate for scope %L (it campaigns for %s)',
                                                              v_to, p_scope, array_to_string(n.scopes, ', '));
  END IF;
  IF n.priority = 0 THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF07', MESSAGE = format('pgleader: node %L has priority 0: it never leads', v_to);
  END IF;
  IF v_to = v_hold THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF07', MESSAGE = format('pgleader: node %L leads scope %L already (epoch %s)', v_to, p_scope, st.epoch);
  END IF;
  IF st.scope IS NULL THEN
    INSERT INTO pgleader.leader_state (scope, lock_key) VALUES (p_scope, pgleader.lock_key(p_scope))
    ON CONFLICT (scope) DO NOTHING;
  END IF;
  UPDATE pgleader.leader_state s SET handover_to = v_to,
         handover_epoch = CASE WHEN v_hold IS NOT NULL THEN s.epoch END,
         handover_deadline = clock_timestamp() + make_interval(secs => p_timeout_ms / 1000.0),
         handover_by = session_user
   WHERE s.scope = p_scope;
  INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
  VALUES (p_scope, v_hold, coalesce(st.epoch, 0), 'handover_requested',
          jsonb_build_object('to', v_to, 'by', session_user, 'via', left(p_via, 200), 'timeout_ms', p_timeout_ms,
                             'application_name', current_setting('application_name')));
  IF v_hold IS NOT NULL THEN
    PERFORM pg_notify('leader_change', json_build_object(
        'scope', p_scope, 'epoch', st.epoch, 'holder', v_hold, 'event', 'handover_requested', 'to', v_to)::text);
  ELSE
    PERFORM pg_notify('leader_change', json_build_object(
        'scope', p_scope, 'epoch', coalesce(st.epoch, 0), 'event', 'released', 'to', v_to)::text);
  END IF;
  PERFORM pgleader.ring_doorbells(ARRAY[coalesce(v_hold, v_to)]);
  RETURN QUERY SELECT coalesce(st.epoch, 0), v_hold, v_to;
END $function$;
