-- ring_next: the live node after p_node in node_id order (wrapping around), with
-- its beacon key. Live: not stopped, and its beacon is held right now. Empty when
-- p_node is alone.
CREATE OR REPLACE FUNCTION pgleader.ring_next(p_node text)
 RETURNS TABLE(node_id text, beacon_key bigint)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
  SELECT n.node_id, n.beacon_key
    FROM pgleader.nodes n
   WHERE n.node_id <> p_node AND n.stopped_at IS NULL AND n.beacon_key IS NOT NULL
     AND EXISTS (SELECT 1 FROM pgleader.advisory_locks() l
                  WHERE l.key = n.beacon_key AND l.mode = 'ExclusiveLock')
   ORDER BY n.node_id <= p_node, n.node_id
   LIMIT 1
$function$;
