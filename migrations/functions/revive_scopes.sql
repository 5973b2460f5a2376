-- revive_scopes: a node registering for retired scopes brings them back into the
-- views (retired_at cleared), audited as scope_revived by the node.
CREATE OR REPLACE FUNCTION pgleader.revive_scopes(p_node text, p_scopes text[])
 RETURNS void
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
  WITH revived AS (
    UPDATE pgleader.leader_state s SET retired_at = NULL, retired_by = NULL
     WHERE s.scope = ANY (p_scopes) AND s.retired_at IS NOT NULL
    RETURNING s.scope, s.epoch
  )
  INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
  SELECT r.scope, p_node, r.epoch, 'scope_revived', jsonb_build_object('by', p_node) FROM revived r
$function$;
