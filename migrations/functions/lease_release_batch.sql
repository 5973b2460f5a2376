-- lease_release_batch: release_batch for lease mode. Node p_node ends the terms
-- (p_scopes, p_epochs) it holds, each for its reason (the release rule,
-- end_term); there is no advisory lock to give back.
-- Proof: the node's secret token under its login (a term is ended only when
-- the row names the node, the token is the node's and the scope is in lease
-- mode). Bounds: 10000 scopes a call (PLF11).
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
  v_done     text[] := '{}';
  v_cooldown int;
  v_mine     boolean;
BEGIN
  PERFORM set_config('synchronous_commit', 'on', true);
  IF cardinality(p_scopes) > 10000 THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF11',
      MESSAGE = format('pgleader: a release of %s scopes: at most 10000 a call', cardinality(p_scopes));
  END IF;
  SELECT n.resign_cooldown_ms, true INTO v_cooldown, v_mine FROM pgleader.nodes n
   WHERE n.node_id = p_node AND n.lease_token = p_token AND n.mode = 'lease';
  FOR i IN 1 .. coalesce(cardinality(p_scopes), 0) LOOP
    SELECT * INTO st FROM pgleader.leader_state s WHERE s.scope = p_scopes[i] FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
      RETURN QUERY SELECT p_scopes[i], false, EXISTS (SELECT 1 FROM pgleader.leader_state s WHERE s.scope = p_scopes[i]);
      CONTINUE;
    END IF;
    v_ours := coalesce(v_mine, false) AND st.epoch = p_epochs[i] AND st.holder = p_node
              AND st.released_at IS NULL AND st.mode = 'lease';
    IF v_ours THEN
      PERFORM pgleader.end_term(st, p_node, p_reasons[i], v_cooldown, true);
      v_done := v_done || st.scope;
    END IF;
    RETURN QUERY SELECT st.scope, v_ours, false;
  END LOOP;
  IF cardinality(v_done) > 0 THEN
    UPDATE pgleader.nodes n SET leads = ARRAY(SELECT x FROM unnest(n.leads) x WHERE x <> ALL (v_done) ORDER BY x)
     WHERE n.node_id = p_node;
  END IF;
END $function$;
