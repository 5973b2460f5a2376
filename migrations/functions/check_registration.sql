-- check_registration: the arguments of a registration (register_node,
-- lease_register) are within bounds, or PLF11 naming the one that is not: the
-- node id and every scope name (check_name), at most 10000 scopes and none a
-- scratch scope ('pgleader-warmup-…', which only a session warm-up claims), a
-- hostname and version of at most 255 bytes, the timing (check_timing), a resign
-- cooldown of 0 to 3600000 ms (an hour), a failback delay NULL or of 1 to
-- 86400000 ms (a day).
CREATE OR REPLACE FUNCTION pgleader.check_registration(p_node text, p_hostname text, p_version text, p_scopes text[], p_interval_ms integer, p_trust_ms integer, p_lease_ms integer, p_cooldown_ms integer, p_failback_ms integer)
 RETURNS void
 LANGUAGE plpgsql
 IMMUTABLE
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  v_scope text;
  v_rule  text;
BEGIN
  PERFORM pgleader.check_name('node id', p_node);
  IF coalesce(cardinality(p_scopes), 0) > 10000 THEN
    v_rule := format('%s scopes: at most 10000', cardinality(p_scopes));
  ELSIF octet_length(p_hostname) > 255 OR octet_length(p_version) > 255 THEN
    v_rule := 'the hostname and the version are at most 255 bytes';
  ELSIF p_cooldown_ms IS NOT NULL AND (p_cooldown_ms < 0 OR p_cooldown_ms > 3600000) THEN
    v_rule := format('resign cooldown %s ms: must be 0 to 3600000 (an hour)', p_cooldown_ms);
  ELSIF p_failback_ms IS NOT NULL AND (p_failback_ms < 1 OR p_failback_ms > 86400000) THEN
    v_rule := format('failback delay %s ms: must be 1 to 86400000 (a day), or none', p_failback_ms);
  END IF;
  IF v_rule IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF11', MESSAGE = format('pgleader: registration of node %L refused: %s', p_node, v_rule);
  END IF;
  FOREACH v_scope IN ARRAY coalesce(p_scopes, '{}') LOOP
    PERFORM pgleader.check_name('scope name', v_scope);
    IF starts_with(v_scope, 'pgleader-warmup-') THEN
      RAISE EXCEPTION USING ERRCODE = 'PLF11',
        MESSAGE = format('pgleader: scope %L refused: names beginning with pgleader-warmup- are the session warm-up''s scratch scopes', v_scope);
    END IF;
  END LOOP;
  PERFORM pgleader.check_timing(p_interval_ms, NULL, p_trust_ms, p_lease_ms);
END $function$;
