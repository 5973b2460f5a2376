-- release_batch: node p_node ends the terms (p_scopes, p_epochs) its
-- leadership session holds, each for its reason (the release rule, end_term),
-- and gives back their advisory locks; a lock this backend holds for a term it
-- no longer has is given back too. Returns per scope whether the release was
-- this node's (ok) and whether the row was busy (locked by another
-- transaction: try again). Then it rings the doorbells of the nodes the
-- releases concern (ring_doorbells): a scope a handover keeps reserved, its
-- target alone; any other, its candidates.
-- Proof: the caller is the leadership session node p_node registered
-- (caller_node, PLF12); a term is released only when this backend holds it
-- (holder_pid) and its lock. A scratch scope's lock is the warm-up
-- transaction's and ends with it: it is never unlocked here. Bounds: 1000
-- scopes a call (PLF11).
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
  v_done     text[] := '{}';
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
    v_scratch := starts_with(st.scope, 'pgleader-warmup-');
    v_ours := st.epoch = p_epochs[i] AND st.holder = p_node AND st.released_at IS NULL
              AND st.holder_pid = pg_backend_pid();
    IF v_ours THEN
      PERFORM pgleader.end_term(st, p_node, p_reasons[i], v_cooldown, false);
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
    PERFORM pgleader.ring_doorbells(ARRAY(
      SELECT c.node_id FROM pgleader.nodes c
       WHERE c.node_id <> p_node AND c.stopped_at IS NULL
         AND (c.node_id IN (SELECT s.handover_to FROM pgleader.leader_state s WHERE s.scope = ANY (v_done))
              OR c.scopes && ARRAY(SELECT s.scope FROM pgleader.leader_state s
                                    WHERE s.scope = ANY (v_done) AND s.handover_to IS NULL))));
  END IF;
END $function$;
