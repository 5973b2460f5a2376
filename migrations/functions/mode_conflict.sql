-- mode_conflict: the first of p_scopes that a live node of another mode than
-- p_mode campaigns for, that mode and those nodes (no row: none). A node checks
-- it at start.
CREATE OR REPLACE FUNCTION pgleader.mode_conflict(p_node text, p_mode text, p_scopes text[])
 RETURNS TABLE(scope text, mode text, nodes text)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
  SELECT s, n.mode, string_agg(n.node_id, ', ' ORDER BY n.node_id)
    FROM unnest(p_scopes) s
    JOIN pgleader.nodes n ON s = ANY (n.scopes) AND n.mode <> p_mode AND n.node_id <> p_node
    JOIN pgleader.live_nodes(pgleader.lock_map()) ln ON ln.node_id = n.node_id
   GROUP BY s, n.mode ORDER BY s LIMIT 1
$function$;
