-- node_supervisor: record what a live node supervises (pgleader run). Only a
-- session of the login role the node registered under may write it: a value
-- the caller supplies (the node id) never stands for who the caller is. The
-- document is an object of at most 2 kB. Returns false when no live node of
-- that id and login exists.
CREATE OR REPLACE FUNCTION pgleader.node_supervisor(p_node text, p_info jsonb)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
BEGIN
  IF p_info IS NOT NULL AND (jsonb_typeof(p_info) <> 'object' OR octet_length(p_info::text) > 2048) THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = 'pgleader: a supervisor document is a JSON object of at most 2 kB';
  END IF;
  UPDATE pgleader.nodes SET supervisor = p_info
   WHERE node_id = p_node AND login_role = session_user AND stopped_at IS NULL;
  RETURN FOUND;
END $function$;
