-- register_node: record (or refresh) the calling node in pgleader.nodes, on the
-- calling backend (its leadership session), and announce it: node_joined for
-- the collector, and the doorbell of its ring predecessor (the live lock-mode
-- node before it in node_id order), whose next peer it now is. A node
-- id that is live (its beacon held) under another login role is refused: node ids
-- are not secrets, and a second login must not take over a running node's row.
-- Proof: the row records this backend and session_user, which every later call
-- for the node is checked against (caller_node). Bounds: check_registration.
CREATE OR REPLACE FUNCTION pgleader.register_node(p_node text, p_hostname text, p_os_pid integer, p_version text, p_scopes text[], p_interval_ms integer, p_trust_ms integer, p_lease_ms integer, p_beacon_key bigint, p_guard_key bigint)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  n pgleader.nodes;
BEGIN
  PERFORM pgleader.check_registration(p_node, p_hostname, p_version, p_scopes,
                                      p_interval_ms, p_trust_ms, p_lease_ms, NULL, NULL);
  SELECT * INTO n FROM pgleader.nodes x WHERE x.node_id = p_node FOR UPDATE;
  PERFORM pgleader.refuse_taken_node(n, n.backend_pid IS DISTINCT FROM pg_backend_pid()
                                        AND pgleader.lock_held(n.beacon_key, n.backend_pid));
  INSERT INTO pgleader.nodes AS x (node_id, hostname, os_pid, version, backend_pid, scopes,
         heartbeat_interval_ms, trust_window_ms, session_lease_ms, beacon_key, guard_key, login_role)
  VALUES (p_node, p_hostname, p_os_pid, p_version, pg_backend_pid(), p_scopes,
          p_interval_ms, p_trust_ms, p_lease_ms, p_beacon_key, p_guard_key, session_user)
  ON CONFLICT (node_id) DO UPDATE SET hostname = EXCLUDED.hostname,
         os_pid = EXCLUDED.os_pid, version = EXCLUDED.version,
         backend_pid = EXCLUDED.backend_pid, scopes = EXCLUDED.scopes,
         heartbeat_interval_ms = EXCLUDED.heartbeat_interval_ms,
         trust_window_ms = EXCLUDED.trust_window_ms,
         session_lease_ms = EXCLUDED.session_lease_ms,
         beacon_key = EXCLUDED.beacon_key, guard_key = EXCLUDED.guard_key,
         login_role = EXCLUDED.login_role,
         -- another process under this id (a restart): its start, counted
         started_at = CASE WHEN pgleader.process_changed(x.os_pid, x.hostname, EXCLUDED.os_pid, EXCLUDED.hostname)
                           THEN now() ELSE x.started_at END,
         restarts = x.restarts + pgleader.process_changed(x.os_pid, x.hostname, EXCLUDED.os_pid, EXCLUDED.hostname)::int,
         last_seen = now(), stopped_at = NULL, leads = '{}';
  PERFORM pg_notify('leader_change', json_build_object('event', 'node_joined', 'holder', p_node)::text);
  PERFORM pgleader.ring_doorbells(ARRAY(
    SELECT p.node_id FROM pgleader.nodes p, (SELECT pgleader.lock_map() AS m) l
     WHERE p.node_id <> p_node AND p.stopped_at IS NULL AND p.mode = 'lock' AND p.beacon_key IS NOT NULL
       AND l.m ? (p.backend_pid::text || ':' || p.beacon_key::text)
     ORDER BY p.node_id < p_node DESC, p.node_id DESC
     LIMIT 1));
END $function$;

-- register_node with a priority and a resign cooldown (12 arguments): as above,
-- and the node revives the retired scopes it campaigns for (revive_scopes).
CREATE OR REPLACE FUNCTION pgleader.register_node(p_node text, p_hostname text, p_os_pid integer, p_version text, p_scopes text[], p_interval_ms integer, p_trust_ms integer, p_lease_ms integer, p_beacon_key bigint, p_guard_key bigint, p_priority integer, p_cooldown_ms integer)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
BEGIN
  -- Transaction-local: it holds until this registration's commit, which is what
  -- must not wait (a function-level SET would be undone before the commit).
  PERFORM set_config('synchronous_commit', 'local', true);
  IF p_priority IS NULL OR p_priority < 0 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('pgleader: priority %s: must be 0 or more', p_priority);
  END IF;
  PERFORM pgleader.check_registration(p_node, p_hostname, p_version, p_scopes,
                                      p_interval_ms, p_trust_ms, p_lease_ms, p_cooldown_ms, NULL);
  PERFORM pgleader.register_node(p_node, p_hostname, p_os_pid, p_version, p_scopes,
                                 p_interval_ms, p_trust_ms, p_lease_ms, p_beacon_key, p_guard_key);
  UPDATE pgleader.nodes n SET priority = p_priority, resign_cooldown_ms = p_cooldown_ms,
         registered_at = now(), failback_after_ms = NULL
   WHERE n.node_id = p_node AND n.backend_pid = pg_backend_pid();
  PERFORM pgleader.revive_scopes(p_node, p_scopes);
END $function$;

-- register_node and lease_register with a failback delay: as above, then the node
-- is preferred (p_failback_ms > 0, at priority 1 or more: nodes_failback_check) or
-- not (NULL).
CREATE OR REPLACE FUNCTION pgleader.register_node(p_node text, p_hostname text, p_os_pid integer, p_version text, p_scopes text[], p_interval_ms integer, p_trust_ms integer, p_lease_ms integer, p_beacon_key bigint, p_guard_key bigint, p_priority integer, p_cooldown_ms integer, p_failback_ms integer)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
BEGIN
  PERFORM pgleader.check_registration(p_node, p_hostname, p_version, p_scopes,
                                      p_interval_ms, p_trust_ms, p_lease_ms, p_cooldown_ms, p_failback_ms);
  PERFORM pgleader.register_node(p_node, p_hostname, p_os_pid, p_version, p_scopes,
                                 p_interval_ms, p_trust_ms, p_lease_ms, p_beacon_key, p_guard_key,
                                 p_priority, p_cooldown_ms);
  UPDATE pgleader.nodes n SET failback_after_ms = p_failback_ms
   WHERE n.node_id = p_node AND n.backend_pid = pg_backend_pid();
END $function$;

-- register_node with the process's start (schema 17; the engine calls this
-- form): as the 13-argument form, and started_at is p_started_at (the node's
-- own clock, never after the database's now), restarts counting each
-- registration by a process that started at another time. The older forms tell
-- a new process by its os pid or hostname instead.
CREATE OR REPLACE FUNCTION pgleader.register_node(p_node text, p_hostname text, p_os_pid integer, p_version text, p_scopes text[], p_interval_ms integer, p_trust_ms integer, p_lease_ms integer, p_beacon_key bigint, p_guard_key bigint, p_priority integer, p_cooldown_ms integer, p_failback_ms integer, p_started_at timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  prev pgleader.nodes;
BEGIN
  SELECT * INTO prev FROM pgleader.nodes x WHERE x.node_id = p_node;
  PERFORM pgleader.register_node(p_node, p_hostname, p_os_pid, p_version, p_scopes,
                                 p_interval_ms, p_trust_ms, p_lease_ms, p_beacon_key, p_guard_key,
                                 p_priority, p_cooldown_ms, p_failback_ms);
  PERFORM pgleader.note_process_start(p_node, prev, p_started_at);
END $function$;
