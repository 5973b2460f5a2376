-- relabel_shutdown_victims: a claim that has just closed terms as
-- database_failover (since p_since, for scopes p_scopes) corrects the label of
-- the term before each, where the database's shutdown, not a crash, ended it.
-- A fast or immediate shutdown ends the backends one by one: a node whose
-- backends the server has not reached yet can see its peer's locks freed, claim
-- the peer's scope and commit before its own backends end. The peer's term then
-- reads crashed (its guard and its lock were free, its last heartbeat recent),
-- and the claimant's term ends with the database before its first heartbeat.
-- That signature — a term closed as database_failover that never heartbeated
-- (its last sign is its start), whose predecessor it closed as crashed or
-- lost_connection at that very start — marks the predecessor as ended by the
-- database too: it is relabelled database_failover, and the relabelling is
-- audited (term_relabelled: from, to, by). A holder that really crashed less
-- than a heartbeat interval before a restart reads database_failover as well,
-- as one that crashed just before it always has. Called inside claim_scopes
-- (security invoker: the caller proved itself there).
CREATE OR REPLACE FUNCTION pgleader.relabel_shutdown_victims(p_scopes text[], p_since timestamp with time zone, p_node text)
 RETURNS void
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
  WITH recent AS (
    -- Per scope its three newest terms: the one just opened (1), the one it
    -- closed (2), and the one before (3).
    SELECT r.scope, r.epoch, r.holder, r.acquired_at, r.released_at, r.release_reason, r.last_sign,
           row_number() OVER (PARTITION BY r.scope ORDER BY r.acquired_at DESC) AS n
      FROM unnest(p_scopes) u(scope)
     CROSS JOIN LATERAL (SELECT x.* FROM pgleader.terms x WHERE x.scope = u.scope
                          ORDER BY x.acquired_at DESC LIMIT 3) r
  ), victim AS (
    SELECT p.scope, p.epoch, p.holder, p.release_reason AS was
      FROM recent t JOIN recent p ON p.scope = t.scope AND t.n = 2 AND p.n = 3
     WHERE t.release_reason = 'database_failover' AND t.released_at >= p_since AND t.last_sign = t.acquired_at
       AND p.released_at = t.acquired_at AND p.release_reason IN ('crashed', 'lost_connection')
  ), relabelled AS (
    UPDATE pgleader.terms p SET release_reason = 'database_failover'
      FROM victim v WHERE p.scope = v.scope AND p.epoch = v.epoch
    RETURNING p.scope
  )
  INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
  SELECT v.scope, v.holder, v.epoch, 'term_relabelled',
         jsonb_build_object('from', v.was, 'to', 'database_failover', 'by', p_node,
                            'why', 'its successor''s term ended with the database before its first heartbeat')
    FROM victim v
$function$;
