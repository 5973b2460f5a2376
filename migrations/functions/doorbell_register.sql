-- doorbell_register: the calling session becomes node p_node's watch session,
-- the one the schema's functions signal when a change concerns the node (the
-- doorbell; watch, ring_doorbells). It records this backend's pid,
-- backend_start, login and application_name in pgleader.doorbells, and whether
-- the owner role may signal it: ringable, else why_not (a superuser's session,
-- pg_signal_backend or pg_read_all_stats not granted to the owner), which the
-- node logs once and pgleader status shows; the node then learns of changes
-- from its heartbeats (within one interval).
-- Proof: p_node is a live lock-mode node (not stopped, its beacon held by its
-- registered leadership backend) registered under this login (PLF12), and this
-- session is neither that leadership session nor any session holding an
-- advisory lock (a guard): a doorbell never cancels a heartbeat or a claim
-- (PLF12). The pid recorded is always the caller's own: no call names another
-- backend. Bounds: p_node a valid node id (PLF11).
CREATE OR REPLACE FUNCTION pgleader.doorbell_register(p_node text)
 RETURNS TABLE(ringable boolean, why_not text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  n       pgleader.nodes;
  v_start timestamptz;
  v_app   text;
  v_super boolean;
  v_suser boolean;
  v_ok    boolean;
  v_why   text;
BEGIN
  PERFORM pgleader.check_name('node id', p_node);
  SELECT * INTO n FROM pgleader.nodes x WHERE x.node_id = p_node;
  IF NOT FOUND OR n.login_role IS DISTINCT FROM session_user OR n.stopped_at IS NOT NULL OR n.mode <> 'lock'
     OR n.beacon_key IS NULL OR NOT pgleader.lock_held(n.beacon_key, n.backend_pid) THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF12',
      MESSAGE = format('pgleader: role %s has no live lock-mode node %L: a watch session registers for its own node, once that node''s leadership session has registered',
                       quote_ident(session_user), p_node);
  END IF;
  IF n.backend_pid = pg_backend_pid()
     OR EXISTS (SELECT 1 FROM pgleader.advisory_locks() l WHERE l.pid = pg_backend_pid()) THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF12',
      MESSAGE = format('pgleader: this session (backend %s) is node %L''s leadership session or holds advisory locks: a doorbell is a watch session, which holds none',
                       pg_backend_pid(), p_node);
  END IF;
  SELECT a.backend_start, a.application_name INTO v_start, v_app
    FROM pg_catalog.pg_stat_get_activity(pg_backend_pid()) a;
  SELECT r.rolsuper INTO v_super FROM pg_catalog.pg_roles r WHERE r.rolname = current_user;
  SELECT r.rolsuper INTO v_suser FROM pg_catalog.pg_roles r WHERE r.rolname = session_user;
  v_ok := v_start IS NOT NULL
          AND (v_super OR (NOT v_suser AND (pg_catalog.pg_has_role(current_user, 'pg_signal_backend', 'USAGE')
                                           OR pg_catalog.pg_has_role(current_user, session_user, 'USAGE'))));
  v_why := CASE
    WHEN v_ok THEN NULL
    WHEN v_start IS NULL THEN
      format('the owner role %s may not read this session''s start (pg_stat_activity): GRANT pg_read_all_stats TO %s',
             quote_ident(current_user), quote_ident(current_user))
    WHEN v_suser THEN
      format('the node''s login %s is a superuser, and only a superuser may signal a superuser''s session: run nodes under a login in the node role (docs/security.md)',
             quote_ident(session_user))
    ELSE
      format('the owner role %s may not signal the sessions of %s: GRANT pg_signal_backend TO %s',
             quote_ident(current_user), quote_ident(session_user), quote_ident(current_user))
  END;
  INSERT INTO pgleader.doorbells AS d (node_id, backend_pid, backend_start, login_role, application_name, ringable, why_not)
  VALUES (p_node, pg_backend_pid(), v_start, session_user, coalesce(v_app, ''), v_ok, v_why)
  ON CONFLICT (node_id) DO UPDATE SET backend_pid = EXCLUDED.backend_pid, backend_start = EXCLUDED.backend_start,
         login_role = EXCLUDED.login_role, application_name = EXCLUDED.application_name,
         registered_at = now(), ringable = EXCLUDED.ringable, why_not = EXCLUDED.why_not;
  RETURN QUERY SELECT v_ok, v_why;
END $function$;
