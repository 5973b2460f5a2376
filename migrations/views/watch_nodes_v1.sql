-- watch_nodes_v1: the nodes as the watching side (collector, status, top, the
-- exporter) reads them, version 1 of that contract. Columns are only ever
-- added at the end; a change of a column's type or meaning is a new view
-- (watch_nodes_v2), and this one stays for watchers of the release before.
-- lease_token is not here: it is a secret. session_alive: whether a lock-mode
-- node's leadership session still holds its beacon lock (the server releases
-- it the moment the session ends, however it ended); NULL for a lease-mode or
-- stopped node, which has no beacon to ask. login_role: the session_user the
-- node registered under (register_node, lease_register), the role a scope
-- binding and an operator's GRANT concern; NULL for a row written otherwise.
-- supervisor: what a `pgleader run` node supervises (schema 15,
-- node_supervisor): {command, state, pid, epoch, restarts, last_exit}; NULL for
-- a plain node. restarts (schema 17): how many times another process registered
-- this node id; started_at is the last one's start. doorbell_why_not (schema
-- 17): why the node's doorbell cannot ring (pgleader.doorbells.why_not: a
-- superuser login, a grant the owner lacks), so that its wake-ups come from its
-- heartbeats; NULL when it rings or has not registered one (lease mode).
CREATE OR REPLACE VIEW pgleader.watch_nodes_v1 AS
SELECT n.node_id, n.hostname, n.os_pid, n.version, n.started_at, n.last_seen, n.stopped_at,
       n.backend_pid, n.scopes, n.leads, n.heartbeat_interval_ms, n.trust_window_ms,
       n.session_lease_ms, n.priority, n.mode, n.failback_after_ms,
       CASE WHEN n.mode = 'lock' AND n.stopped_at IS NULL AND n.backend_pid IS NOT NULL AND n.beacon_key IS NOT NULL THEN
         EXISTS (SELECT 1 FROM pg_catalog.pg_locks l
                  WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted AND l.mode = 'ExclusiveLock'
                    AND l.pid = n.backend_pid AND ((l.classid::bigint << 32) | l.objid::bigint) = n.beacon_key
                    AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = current_database()))
       END AS session_alive,
       n.login_role,
       n.supervisor,
       n.restarts,
       (SELECT d.why_not FROM pgleader.doorbells d WHERE d.node_id = n.node_id AND NOT d.ringable) AS doorbell_why_not
  FROM pgleader.nodes n;
