-- lease_register: register (or refresh) a lease-mode node under a
-- fresh secret token. Proof: the row records the token and session_user, which
-- every later call for the node is checked against (caller_node). Bounds:
-- check_registration.
CREATE OR REPLACE FUNCTION pgleader.lease_register(p_node text, p_hostname text, p_os_pid integer, p_version text, p_scopes text[], p_interval_ms integer, p_trust_ms integer, p_lease_ms integer, p_token bigint, p_priority integer, p_cooldown_ms integer)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  n pgleader.nodes;
BEGIN
  PERFORM set_config('synchronous_commit', 'local', true); -- liveness, not a grant
  IF p_priority IS NULL OR p_priority < 0 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('pgleader: priority %s: must be 0 or more', p_priority);
  END IF;
  PERFORM pgleader.check_registration(p_node, p_hostname, p_version, p_scopes,
                                      p_interval_ms, p_trust_ms, p_lease_ms, p_cooldown_ms, NULL);
  SELECT * INTO n FROM pgleader.nodes x WHERE x.node_id = p_node FOR UPDATE;
  PERFORM pgleader.refuse_taken_node(n, EXISTS (SELECT 1 FROM pgleader.live_nodes(pgleader.lock_map()) ln WHERE ln.node_id = p_node));
  INSERT INTO pgleader.nodes AS x (node_id, hostname, os_pid, version, backend_pid, scopes,
         heartbeat_interval_ms, trust_window_ms, session_lease_ms, beacon_key, guard_key, login_role,
         priority, resign_cooldown_ms, mode, lease_token, registered_at)
  VALUES (p_node, p_hostname, p_os_pid, p_version, NULL, p_scopes,
          p_interval_ms, p_trust_ms, p_lease_ms, NULL, NULL, session_user, p_priority, p_cooldown_ms, 'lease', p_token, now())
  ON CONFLICT (node_id) DO UPDATE SET hostname = EXCLUDED.hostname,
         os_pid = EXCLUDED.os_pid, version = EXCLUDED.version, backend_pid = NULL, scopes = EXCLUDED.scopes,
         heartbeat_interval_ms = EXCLUDED.heartbeat_interval_ms, trust_window_ms = EXCLUDED.trust_window_ms,
         session_lease_ms = EXCLUDED.session_lease_ms, beacon_key = NULL, guard_key = NULL,
         login_role = EXCLUDED.login_role, priority = EXCLUDED.priority,
         resign_cooldown_ms = EXCLUDED.resign_cooldown_ms, mode = 'lease', lease_token = EXCLUDED.lease_token,
         started_at = CASE WHEN pgleader.process_changed(x.os_pid, x.hostname, EXCLUDED.os_pid, EXCLUDED.hostname)
                           THEN now() ELSE x.started_at END,
         restarts = x.restarts + pgleader.process_changed(x.os_pid, x.hostname, EXCLUDED.os_pid, EXCLUDED.hostname)::int,
         last_seen = now(), stopped_at = NULL, leads = '{}',
         registered_at = now(), failback_after_ms = NULL;
  PERFORM pgleader.revive_scopes(p_node, p_scopes);
  PERFORM pg_notify('leader_change', json_build_object('event', 'node_joined', 'holder', p_node)::text);
END $function$;

CREATE OR REPLACE FUNCTION pgleader.lease_register(p_node text, p_hostname text, p_os_pid integer, p_version text, p_scopes text[], p_interval_ms integer, p_trust_ms integer, p_lease_ms integer, p_token bigint, p_priority integer, p_cooldown_ms integer, p_failback_ms integer)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
BEGIN
  PERFORM pgleader.check_registration(p_node, p_hostname, p_version, p_scopes,
                                      p_interval_ms, p_trust_ms, p_lease_ms, p_cooldown_ms, p_failback_ms);
  PERFORM pgleader.lease_register(p_node, p_hostname, p_os_pid, p_version, p_scopes,
                                  p_interval_ms, p_trust_ms, p_lease_ms, p_token, p_priority, p_cooldown_ms);
  UPDATE pgleader.nodes n SET failback_after_ms = p_failback_ms
   WHERE n.node_id = p_node AND n.lease_token = p_token;
END $function$;

-- lease_register with the process's start (schema 17; the engine calls this
-- form): as the 12-argument form, with started_at and restarts as
-- register_node's 14-argument form.
CREATE OR REPLACE FUNCTION pgleader.lease_register(p_node text, p_hostname text, p_os_pid integer, p_version text, p_scopes text[], p_interval_ms integer, p_trust_ms integer, p_lease_ms integer, p_token bigint, p_priority integer, p_cooldown_ms integer, p_failback_ms integer, p_started_at timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  prev pgleader.nodes;
BEGIN
  SELECT * INTO prev FROM pgleader.nodes x WHERE x.node_id = p_node;
  PERFORM pgleader.lease_register(p_node, p_hostname, p_os_pid, p_version, p_scopes,
                                  p_interval_ms, p_trust_ms, p_lease_ms, p_token, p_priority, p_cooldown_ms, p_failback_ms);
  PERFORM pgleader.note_process_start(p_node, prev, p_started_at);
END $function$;
