-- privilege_lists: which functions run as the owner (SECURITY DEFINER: they
-- write), and which each role may execute (apply_privileges applies them). A
-- name covers every overload.
CREATE OR REPLACE FUNCTION pgleader.privilege_lists(OUT definer text[], OUT node text[], OUT reader text[], OUT operator text[])
 RETURNS record
 LANGUAGE sql
 IMMUTABLE
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
  SELECT ARRAY['claim_scopes', 'claim_batch', 'release_batch', 'node_heartbeat', 'unlock_held_many',
               'await_release', 'ring_next', 'register_node', 'node_stopped', 'session_lock',
               'fence', 'fence_rejected', 'request_resign', 'record_eviction', 'interference',
               'request_handover', 'cancel_handover', 'retire_scope',
               'lease_register', 'lease_heartbeat', 'lease_claim_scopes', 'lease_claim_batch', 'lease_release_batch', 'lease_stopped',
               'mode_conflict', 'end_fenced', 'set_lock_key', 'bind_scope', 'campaign_refusals',
               'check_lock_key_at_commit', 'run_begin', 'run_end', 'term_child_exit', 'node_supervisor', 'forget_node',
               'doorbell_register', 'watch'],
         ARRAY['schema_version', 'lock_key', 'claim_scopes', 'claim_batch', 'release_batch', 'node_heartbeat',
               'unlock_held_many', 'await_release', 'ring_next', 'register_node', 'node_stopped',
               'session_lock', 'fence', 'fence_rejected', 'epoch_floor', 'wal_timeline',
               'interference',
               'lease_register', 'lease_heartbeat', 'lease_claim_scopes', 'lease_claim_batch', 'lease_release_batch', 'lease_stopped',
               'mode_conflict', 'end_fenced', 'campaign_refusals', 'run_begin', 'run_end', 'term_child_exit', 'node_supervisor',
               'doorbell_register', 'watch'],
         ARRAY['schema_version', 'lock_key', 'lock_held', 'advisory_locks', 'lock_map',
               'wal_timeline', 'epoch_floor', 'interference', 'watch_scopes_v1', 'fenced_blockers',
               'may_campaign', 'scope_roles'],
         ARRAY['request_resign', 'record_eviction', 'request_handover', 'cancel_handover', 'retire_scope',
               'set_lock_key', 'forget_node']
$function$;
