-- lease_claimable: whether lease-mode scope row s can be claimed by a follower
-- that watched lease_seq q unchanged for a whole lease (lease_claim_scopes).
-- A free row can (released, or never held), but one of an older timeline only
-- once a lease has passed since p_since; a held row once its lease_seq is still
-- q and a lease has passed since its last renewal — or since p_since, when that
-- is later: p_since is the later of the server's start and the current
-- timeline's first claim (lease_claim_scopes). A restart can lose the newest
-- renewals (they commit asynchronously) and a promoted standby never had them:
-- every renewal on record or lost happened before p_since, so waiting a lease
-- from it outlasts the holder's trust (W < L).
CREATE OR REPLACE FUNCTION pgleader.lease_claimable(s pgleader.leader_state, q bigint, p_lease_ms integer, p_since timestamp with time zone, p_floor bigint)
 RETURNS boolean
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
  SELECT CASE
    WHEN s.holder IS NULL OR s.released_at IS NOT NULL THEN
      NOT (p_floor > 0 AND s.epoch <= p_floor)
      OR p_since + make_interval(secs => coalesce(s.session_lease_ms, p_lease_ms) / 1000.0) < clock_timestamp()
    ELSE s.lease_seq = q
      AND greatest(s.last_heartbeat, p_since)
            + make_interval(secs => coalesce(s.session_lease_ms, p_lease_ms) / 1000.0) < clock_timestamp()
  END
$function$;
