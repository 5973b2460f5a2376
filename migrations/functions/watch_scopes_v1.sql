-- watch_scopes_v1: every scope named in leader_state or by a running node (a
-- candidate's scope may have no row yet: claims create it), with its lock
-- holders and waiters (one pass over pg_locks, grouped by key and hash-joined),
-- its newest term, and the counts behind the flapping and epoch-regression
-- checks (p_flap_window_s: the flapping window in seconds). Version 1 of the
-- watching side's contract: columns are only ever added at the end; a change of
-- a column's type or meaning is a new function, and this one stays for watchers
-- of the release before.
--
-- The collector calls it first in a REPEATABLE READ transaction, so the lock
-- table and the rows describe (nearly) the same instant.
CREATE OR REPLACE FUNCTION pgleader.watch_scopes_v1(p_flap_window_s double precision)
RETURNS TABLE (scope text, recorded boolean, lock_key bigint, epoch bigint, holder text, holder_pid int,
               acquired_at timestamptz, released_at timestamptz, last_heartbeat timestamptz,
               heartbeat_interval_ms int, heartbeat_timeout_ms int, trust_window_ms int, session_lease_ms int,
               handover_to text, handover_deadline timestamptz, retired_at timestamptz, mode text, bound_to text[],
               exclusive_pids int[], other_pids int[], waiting int,
               term_id bigint, term_epoch bigint, term_holder text, term_hostname text, term_holder_pid int,
               term_acquired_at timestamptz, term_released_at timestamptz, term_release_reason text,
               term_handover_gap_us bigint, term_handed_to text,
               recent_terms int, max_term_epoch bigint)
LANGUAGE sql STABLE SET search_path = pg_catalog, pgleader, pg_temp AS $$
WITH l AS MATERIALIZED (
  SELECT l.pid, (l.classid::bigint << 32) | l.objid::bigint AS key, l.mode, l.granted
    FROM pg_catalog.pg_locks l
   WHERE l.locktype = 'advisory' AND l.objsubid = 1
     AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = current_database())
), lk AS (
  SELECT l.key,
         array_agg(l.pid ORDER BY l.pid) FILTER (WHERE l.granted AND l.mode = 'ExclusiveLock') AS excl,
         array_agg(l.pid ORDER BY l.pid) FILTER (WHERE l.granted AND l.mode <> 'ExclusiveLock') AS other,
         count(*) FILTER (WHERE NOT l.granted) AS waiting
    FROM l GROUP BY l.key
), names AS (
  SELECT s.scope FROM pgleader.leader_state s
  UNION
  SELECT unnest(n.scopes) FROM pgleader.nodes n WHERE n.stopped_at IS NULL
), sc AS (
  SELECT nm.scope, s.scope IS NOT NULL AS recorded,
         coalesce(s.lock_key, (SELECT k.lock_key FROM pgleader.scope_keys k WHERE k.scope = nm.scope),
                  pgleader.lock_key(nm.scope)) AS lock_key, coalesce(s.epoch, 0) AS epoch,
         s.holder, s.holder_pid, s.acquired_at, s.released_at, s.last_heartbeat,
         s.heartbeat_interval_ms, s.heartbeat_timeout_ms, s.trust_window_ms, s.session_lease_ms,
         s.handover_to, s.handover_deadline, s.retired_at, s.mode,
         (SELECT b.roles FROM pgleader.scope_bindings b
           WHERE (b.kind = 'scope' AND b.name = nm.scope) OR (b.kind = 'prefix' AND starts_with(nm.scope, b.name))
           ORDER BY b.kind = 'scope' DESC, length(b.name) DESC LIMIT 1) AS bound_to
    FROM names nm LEFT JOIN pgleader.leader_state s ON s.scope = nm.scope
)
SELECT sc.scope, sc.recorded, sc.lock_key, sc.epoch, sc.holder, sc.holder_pid,
       sc.acquired_at, sc.released_at, sc.last_heartbeat,
       sc.heartbeat_interval_ms, sc.heartbeat_timeout_ms, sc.trust_window_ms, sc.session_lease_ms,
       sc.handover_to, sc.handover_deadline, sc.retired_at, coalesce(sc.mode, 'lock'), coalesce(sc.bound_to, '{}'),
       coalesce(lk.excl, '{}'), coalesce(lk.other, '{}'), coalesce(lk.waiting, 0)::int,
       t.id, t.epoch, t.holder, t.hostname, t.holder_pid, t.acquired_at, t.released_at, t.release_reason,
       (extract(epoch FROM t.handover_gap) * 1000000)::bigint, t.handed_to,
       (SELECT count(*) FROM pgleader.terms f
         WHERE f.scope = sc.scope AND f.acquired_at > now() - make_interval(secs => p_flap_window_s))::int,
       coalesce((SELECT max(m.epoch) FROM pgleader.terms m WHERE m.scope = sc.scope), 0)
  FROM sc
  LEFT JOIN lk ON lk.key = sc.lock_key
  LEFT JOIN LATERAL (SELECT * FROM pgleader.terms t WHERE t.scope = sc.scope
                      ORDER BY t.acquired_at DESC, t.id DESC LIMIT 1) t ON true
 ORDER BY sc.scope
$$;
