-- watch_nodes_v1: the nodes as the watching side (collector, status, top, the
-- exporter) reads them, version 1 of that contract. Columns are only ever
-- added at the end; a change of a column's type or meaning is a new view
-- (watch_nodes_v2), and this one stays for watchers of the release before.
-- lease_token is not here: it is a secret.
CREATE OR REPLACE VIEW pgleader.watch_nodes_v1 AS
SELECT n.node_id, n.hostname, n.os_pid, n.version, n.started_at, n.last_seen, n.stopped_at,
       n.backend_pid, n.scopes, n.leads, n.heartbeat_interval_ms, n.trust_window_ms,
       n.session_lease_ms, n.priority, n.mode, n.failback_after_ms
  FROM pgleader.nodes n;
