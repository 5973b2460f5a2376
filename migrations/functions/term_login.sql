-- term_login: PLF12 unless the calling login is the login the holder of p_scope's
-- current term p_epoch registered under (nodes.login_role) and may campaign for
-- the scope (bindings). The epoch is no proof (notifications and the tables tell
-- it to anyone); the login is the database's. Writers of a term's records (the
-- run ledger) call it after fence.
CREATE OR REPLACE FUNCTION pgleader.term_login(p_scope text, p_epoch bigint)
 RETURNS void
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  v_login text;
BEGIN
  SELECT n.login_role INTO v_login FROM pgleader.leader_state s JOIN pgleader.nodes n ON n.node_id = s.holder
   WHERE s.scope = p_scope AND s.epoch = p_epoch AND s.released_at IS NULL;
  IF v_login IS DISTINCT FROM session_user::text OR NOT pgleader.may_campaign(p_scope, session_user) THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF12',
      MESSAGE = format('pgleader: role %s is not the login of the holder of scope %L''s term %s: only that login writes the term''s records',
                       quote_ident(session_user), p_scope, p_epoch);
  END IF;
END $function$;
