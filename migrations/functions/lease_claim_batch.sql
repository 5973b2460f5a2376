-- lease_claim_batch: lease_claim_scopes for nodes of release 12 (schema 12), whose rows name the node a
-- scope not acquired is deferred to in prev_holder. Kept for rolling upgrades
-- from release 12; the release after this one drops it (README, Upgrades).
CREATE OR REPLACE FUNCTION pgleader.lease_claim_batch(p_node text, p_token bigint, p_hostname text, p_interval_ms integer, p_timeout_ms integer, p_trust_ms integer, p_lease_ms integer, p_scopes text[], p_seqs bigint[])
 RETURNS TABLE(scope text, acquired boolean, busy boolean, epoch bigint, holder text, prev_holder text, prev_epoch bigint, prev_closed boolean, prev_guard_key bigint, prev_guard_held boolean, prev_trust_ms integer, prev_reason text, wait_guards bigint[])
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
  SELECT c.scope, c.acquired, c.busy, c.epoch, c.holder, CASE WHEN c.acquired THEN c.prev_holder ELSE c.deferred_to END, c.prev_epoch, c.prev_closed, c.prev_guard_key, c.prev_guard_held, c.prev_trust_ms, c.prev_reason, c.wait_guards
    FROM pgleader.lease_claim_scopes(p_node, p_token, p_hostname, p_interval_ms, p_timeout_ms, p_trust_ms, p_lease_ms, p_scopes, p_seqs) c
$function$;
