-- pgleader schema, version 12: scopes belong to services, keys are the
-- database's, lease tokens are secrets, a fenced transaction cannot stall a
-- failover without bound, and grants outside the four roles are taken back.
--
--   * scope_bindings: a scope, or every scope with a name prefix, may be bound to
--     the roles allowed to campaign for it. Enforced by triggers on the tables
--     every campaigning function writes (nodes.scopes at registration, an epoch
--     bump at a claim, lock or lease mode), against session_user: the login of
--     the calling session, never a value the caller passes. Unbound scopes stay
--     open to every node role, as before.
--   * scope_keys: a scope's lock key is pgleader.lock_key(scope) unless the owner
--     or an operator recorded another (set_lock_key). A trigger refuses a
--     leader_state row under any other key, so a node can no longer plant a row
--     that makes a scope unclaimable. Keys that differ from the derived one and
--     were granted before this version are recorded as overrides (audited); rows
--     under such keys that no term ever used are deleted.
--   * nodes.lease_token is no longer readable by the reader role (column grants).
--   * fence also takes a transaction-level shared advisory lock on the scope's
--     fence key (a try: it never waits), so a successor can find the previous
--     term's fenced transactions in pg_locks; end_fenced ends them (audited,
--     naming pid and login) once the scope's lock is free. The fence's refusal
--     no longer names the current epoch and holder.
--   * request_failbacks names the login of the preferred node as the requester
--     and only prefers nodes whose login may campaign for the scope.
--   * apply_privileges also takes back what was granted by hand to roles other
--     than the four, except the grants docs/security.md tells a DBA to make
--     (an application role's EXECUTE on fence and fence_rejected, USAGE on the
--     schema, and the demo workload's INSERT on demo_actions).

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.schema_version() RETURNS int
LANGUAGE sql IMMUTABLE AS $$ SELECT 12 $$;
-- +goose StatementEnd

CREATE TABLE IF NOT EXISTS pgleader.scope_keys (
  scope    text PRIMARY KEY CHECK (scope <> '' AND octet_length(scope) <= 200),
  lock_key bigint NOT NULL UNIQUE,
  set_by   text NOT NULL DEFAULT session_user,
  set_at   timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE IF NOT EXISTS pgleader.scope_bindings (
  kind     text NOT NULL CHECK (kind IN ('scope', 'prefix')),
  name     text NOT NULL CHECK (name <> '' AND octet_length(name) <= 200),
  roles    text[] NOT NULL CHECK (cardinality(roles) > 0),
  bound_by text NOT NULL DEFAULT session_user,
  bound_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (kind, name)
);

-- expected_key: the lock key the database allows for p_scope: its override, else
-- the derived key.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.expected_key(p_scope text) RETURNS bigint
LANGUAGE sql STABLE AS $$
  SELECT coalesce((SELECT k.lock_key FROM pgleader.scope_keys k WHERE k.scope = p_scope),
                  pgleader.lock_key(p_scope))
$$;
-- +goose StatementEnd

-- scope_roles: the roles p_scope is bound to (its own binding, else the longest
-- prefix binding), NULL when it is not bound.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.scope_roles(p_scope text) RETURNS text[]
LANGUAGE sql STABLE AS $$
  SELECT b.roles FROM pgleader.scope_bindings b
   WHERE (b.kind = 'scope' AND b.name = p_scope)
      OR (b.kind = 'prefix' AND starts_with(p_scope, b.name))
   ORDER BY b.kind = 'scope' DESC, length(b.name) DESC
   LIMIT 1
$$;
-- +goose StatementEnd

-- may_campaign: whether login p_login may campaign for p_scope: the scope is not
-- bound, or p_login is a member of one of its roles (superusers are members of
-- every role).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.may_campaign(p_scope text, p_login text) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN r IS NULL THEN true
              WHEN p_login IS NULL THEN false
              ELSE EXISTS (SELECT 1 FROM unnest(r) x JOIN pg_catalog.pg_roles g ON g.rolname = x
                            JOIN pg_catalog.pg_roles u ON u.rolname = p_login
                           WHERE pg_catalog.pg_has_role(u.oid, g.oid, 'MEMBER')) END
    FROM pgleader.scope_roles(p_scope) r
$$;
-- +goose StatementEnd

-- refuse_unbound: raises PLF10 naming the scope, the login and the roles it is
-- bound to.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.refuse_unbound(p_scope text, p_login text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'PLF10',
    MESSAGE = format('pgleader: role %s may not campaign for scope %L: it is bound to %s',
                     quote_ident(p_login), p_scope, array_to_string(pgleader.scope_roles(p_scope), ', ')),
    HINT = 'campaign for it with a login of one of those roles, or have the schema owner change the binding (pgleader scope bind; docs/security.md)';
END $$;
-- +goose StatementEnd

-- campaign_refusals: the scopes of p_scopes the calling login may not campaign
-- for, with the roles each is bound to (a node's start-up check).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.campaign_refusals(p_scopes text[])
RETURNS TABLE (scope text, roles text[])
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgleader, pg_temp AS $$
  SELECT x, pgleader.scope_roles(x) FROM unnest(p_scopes) x
   WHERE NOT pgleader.may_campaign(x, session_user) ORDER BY x
$$;
-- +goose StatementEnd

-- check_node_scopes (trigger on nodes): a node registers only scopes its login
-- may campaign for.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.check_node_scopes() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  v_bad text;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pgleader.scope_bindings) THEN
    RETURN NEW;
  END IF;
  IF TG_OP = 'UPDATE' AND NEW.scopes IS NOT DISTINCT FROM OLD.scopes THEN
    RETURN NEW;
  END IF;
  SELECT min(x) INTO v_bad FROM unnest(NEW.scopes) x WHERE NOT pgleader.may_campaign(x, session_user);
  IF v_bad IS NOT NULL THEN
    PERFORM pgleader.refuse_unbound(v_bad, session_user);
  END IF;
  RETURN NEW;
END $$;
-- +goose StatementEnd

DROP TRIGGER IF EXISTS nodes_scope_bindings ON pgleader.nodes;
CREATE TRIGGER nodes_scope_bindings BEFORE INSERT OR UPDATE OF scopes ON pgleader.nodes
  FOR EACH ROW EXECUTE FUNCTION pgleader.check_node_scopes();

-- check_claim_binding (trigger on leader_state): an epoch is granted only to a
-- session whose login may campaign for the scope.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.check_claim_binding() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM pgleader.scope_bindings) AND NOT pgleader.may_campaign(NEW.scope, session_user) THEN
    PERFORM pgleader.refuse_unbound(NEW.scope, session_user);
  END IF;
  RETURN NEW;
END $$;
-- +goose StatementEnd

DROP TRIGGER IF EXISTS leader_state_scope_bindings ON pgleader.leader_state;
CREATE TRIGGER leader_state_scope_bindings BEFORE UPDATE OF epoch ON pgleader.leader_state
  FOR EACH ROW WHEN (NEW.epoch IS DISTINCT FROM OLD.epoch AND NEW.holder IS NOT NULL)
  EXECUTE FUNCTION pgleader.check_claim_binding();

-- check_lock_key (trigger on leader_state): a row carries the key the database
-- allows for its scope (expected_key), whoever writes it. One exception, checked
-- at commit instead (check_lock_key_at_commit): the scratch scope of the session
-- warm-up of nodes of release 11 and before, named after the random key it uses
-- ('pgleader-warmup-' and the key's 16 hex digits), which lives only inside a
-- transaction that is rolled back; such a row never commits either.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.check_lock_key() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  v_want bigint := pgleader.expected_key(NEW.scope);
BEGIN
  IF NEW.lock_key IS DISTINCT FROM v_want
     AND NOT (TG_OP = 'INSERT' AND NEW.scope = 'pgleader-warmup-' || lpad(to_hex(NEW.lock_key), 16, '0')) THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF03',
      MESSAGE = format('pgleader: scope %L: lock key %s is not the one the database allows (%s)',
                       NEW.scope, NEW.lock_key, v_want),
      HINT = 'a node may not choose a scope''s key: remove the override from the node''s configuration (Config.LockKeys), or record it as the owner or an operator: pgleader scope key SCOPE KEY';
  END IF;
  RETURN NEW;
END $$;
-- +goose StatementEnd

-- Existing rows: a key that differs from the derived one and was granted (a term
-- used it) was a node's override (Config.LockKeys) — record it, audited, so its
-- nodes keep working; a row under such a key that no term ever used is deleted
-- (a claim makes it again, under the allowed key).
-- +goose StatementBegin
DO $$
DECLARE
  r record;
BEGIN
  FOR r IN SELECT s.scope, s.lock_key FROM pgleader.leader_state s
            WHERE s.lock_key <> pgleader.lock_key(s.scope)
              AND NOT EXISTS (SELECT 1 FROM pgleader.terms t WHERE t.scope = s.scope)
              AND s.holder IS NULL LOOP
    DELETE FROM pgleader.leader_state s WHERE s.scope = r.scope;
    INSERT INTO pgleader.audit (scope, kind, detail)
    VALUES (r.scope, 'lock_key_dropped', jsonb_build_object('lock_key', r.lock_key,
            'why', 'a row under a key that is not the derived one, which no term ever used (schema version 12)'));
  END LOOP;
  FOR r IN SELECT s.scope, s.lock_key FROM pgleader.leader_state s
            WHERE s.lock_key <> pgleader.lock_key(s.scope)
              AND NOT EXISTS (SELECT 1 FROM pgleader.scope_keys k WHERE k.scope = s.scope) LOOP
    INSERT INTO pgleader.scope_keys (scope, lock_key, set_by) VALUES (r.scope, r.lock_key, 'schema version 12');
    INSERT INTO pgleader.audit (scope, kind, detail)
    VALUES (r.scope, 'lock_key_set', jsonb_build_object('lock_key', r.lock_key, 'derived', pgleader.lock_key(r.scope),
            'by', session_user, 'why', 'in use before keys were derived by the database (schema version 12): review it with pgleader scope keys'));
  END LOOP;
END $$;
-- +goose StatementEnd

DROP TRIGGER IF EXISTS leader_state_lock_key ON pgleader.leader_state;
CREATE TRIGGER leader_state_lock_key BEFORE INSERT OR UPDATE OF lock_key ON pgleader.leader_state
  FOR EACH ROW EXECUTE FUNCTION pgleader.check_lock_key();

-- check_lock_key_at_commit (deferred constraint trigger): no row under a key
-- the database does not allow commits, a warm-up's scratch row included. It
-- runs as the owner (it fires at commit, outside the function that wrote).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.check_lock_key_at_commit() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM pgleader.leader_state s
              WHERE s.scope = NEW.scope AND s.lock_key IS DISTINCT FROM pgleader.expected_key(s.scope)) THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF03',
      MESSAGE = format('pgleader: scope %L: lock key %s is not the one the database allows (%s)',
                       NEW.scope, NEW.lock_key, pgleader.expected_key(NEW.scope));
  END IF;
  RETURN NULL;
END $$;
-- +goose StatementEnd

DROP TRIGGER IF EXISTS leader_state_lock_key_commit ON pgleader.leader_state;
CREATE CONSTRAINT TRIGGER leader_state_lock_key_commit AFTER INSERT ON pgleader.leader_state
  DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW WHEN (NEW.scope LIKE 'pgleader-warmup-%')
  EXECUTE FUNCTION pgleader.check_lock_key_at_commit();

-- set_lock_key: record p_key as p_scope's lock key (NULL: back to the derived
-- key). Refused while a session holds the scope's current key, which would let
-- two sessions lead it under two keys. Audited with the caller's login.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.set_lock_key(p_scope text, p_key bigint) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgleader, pg_temp AS $$
DECLARE
  v_old  bigint := pgleader.expected_key(p_scope);
  v_new  bigint := coalesce(p_key, pgleader.lock_key(p_scope));
  v_row  bigint;
  v_user text;
BEGIN
  IF p_scope IS NULL OR p_scope = '' THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'pgleader: a scope name is required';
  END IF;
  SELECT k.scope INTO v_user FROM pgleader.scope_keys k WHERE k.lock_key = v_new AND k.scope <> p_scope;
  IF FOUND OR EXISTS (SELECT 1 FROM pgleader.leader_state s WHERE s.lock_key = v_new AND s.scope <> p_scope) THEN
    RAISE EXCEPTION USING ERRCODE = '23505',
      MESSAGE = format('pgleader: lock key %s is already the key of scope %L', v_new,
                       coalesce(v_user, (SELECT s.scope FROM pgleader.leader_state s WHERE s.lock_key = v_new)));
  END IF;
  SELECT s.lock_key INTO v_row FROM pgleader.leader_state s WHERE s.scope = p_scope FOR UPDATE;
  IF FOUND AND v_row <> v_new AND pgleader.lock_held(v_row, NULL) THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF07',
      MESSAGE = format('pgleader: scope %L is held under key %s: its key may change only while no session holds it (stop its nodes first)',
                       p_scope, v_row);
  END IF;
  DELETE FROM pgleader.scope_keys k WHERE k.scope = p_scope;
  IF p_key IS NOT NULL AND p_key <> pgleader.lock_key(p_scope) THEN
    INSERT INTO pgleader.scope_keys (scope, lock_key) VALUES (p_scope, p_key);
  END IF;
  IF v_row IS NOT NULL AND v_row <> v_new THEN
    UPDATE pgleader.leader_state s SET lock_key = v_new WHERE s.scope = p_scope;
  END IF;
  INSERT INTO pgleader.audit (scope, kind, detail)
  VALUES (p_scope, 'lock_key_set', jsonb_build_object('lock_key', v_new, 'previous', v_old,
          'derived', pgleader.lock_key(p_scope), 'by', session_user));
  RETURN v_new;
END $$;
-- +goose StatementEnd

-- bind_scope: bind a scope (p_kind 'scope') or every scope whose name starts with
-- p_name (p_kind 'prefix') to p_roles, the roles whose members may campaign for
-- it; an empty or NULL p_roles removes the binding. Only the schema owner runs it
-- (no role is granted it). Returns the running nodes that campaign for a scope of
-- the binding under a login it does not allow: their claims of it are refused
-- from now on, and they should be restarted without it. Audited.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.bind_scope(p_kind text, p_name text, p_roles text[])
RETURNS TABLE (node_id text, login_role text, scope text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgleader, pg_temp AS $$
DECLARE
  v_missing text;
BEGIN
  IF p_kind IS NULL OR p_kind NOT IN ('scope', 'prefix') THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('pgleader: binding kind %L: must be scope or prefix', p_kind);
  END IF;
  IF p_name IS NULL OR p_name = '' THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'pgleader: a scope name or prefix is required';
  END IF;
  IF coalesce(cardinality(p_roles), 0) = 0 THEN
    DELETE FROM pgleader.scope_bindings b WHERE b.kind = p_kind AND b.name = p_name;
    INSERT INTO pgleader.audit (scope, kind, detail)
    VALUES (CASE WHEN p_kind = 'scope' THEN p_name END, 'scope_unbound',
            jsonb_build_object('kind', p_kind, 'name', p_name, 'by', session_user));
    RETURN;
  END IF;
  SELECT min(x) INTO v_missing FROM unnest(p_roles) x
   WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles g WHERE g.rolname = x);
  IF v_missing IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = format('pgleader: role %s does not exist', quote_ident(v_missing));
  END IF;
  INSERT INTO pgleader.scope_bindings AS b (kind, name, roles)
  VALUES (p_kind, p_name, ARRAY(SELECT DISTINCT x FROM unnest(p_roles) x ORDER BY x))
  ON CONFLICT ON CONSTRAINT scope_bindings_pkey
  DO UPDATE SET roles = EXCLUDED.roles, bound_by = session_user, bound_at = clock_timestamp();
  INSERT INTO pgleader.audit (scope, kind, detail)
  VALUES (CASE WHEN p_kind = 'scope' THEN p_name END, 'scope_bound',
          jsonb_build_object('kind', p_kind, 'name', p_name, 'roles', to_jsonb(p_roles), 'by', session_user));
  RETURN QUERY
    SELECT n.node_id, n.login_role, x
      FROM pgleader.nodes n CROSS JOIN LATERAL unnest(n.scopes) x
     WHERE n.stopped_at IS NULL
       AND ((p_kind = 'scope' AND x = p_name) OR (p_kind = 'prefix' AND starts_with(x, p_name)))
       AND NOT pgleader.may_campaign(x, n.login_role)
     ORDER BY n.node_id, x;
END $$;
-- +goose StatementEnd

-- fence, version 12: as version 6, and (1) the transaction also takes the scope's
-- fence key shared, without waiting (a session holding it exclusively only hides
-- this transaction from end_fenced), so that end_fenced can find it; (2) the
-- refusal says the epoch is stale, not which epoch or holder is current.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.fence(p_scope text, p_epoch bigint, p_holder text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgleader, pg_temp AS $$
DECLARE
  st      pgleader.leader_state;
  v_floor bigint := pgleader.epoch_floor();
BEGIN
  SELECT * INTO st FROM pgleader.leader_state s WHERE s.scope = p_scope FOR KEY SHARE;
  IF FOUND THEN
    PERFORM pg_try_advisory_xact_lock_shared(((st.lock_key >> 32) & 2147483647)::int, (st.lock_key & 2147483647)::int);
  END IF;
  IF st.session_lease_ms > 0 THEN
    PERFORM set_config('idle_in_transaction_session_timeout', st.session_lease_ms::text, true);
  END IF;
  IF p_epoch <= v_floor THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF01',
      MESSAGE = format('pgleader: fenced: write for scope %L carries epoch %s, granted before the failover to timeline %s (epochs now start above %s)',
                       p_scope, p_epoch, pgleader.wal_timeline(), v_floor);
  END IF;
  IF NOT FOUND OR st.epoch IS DISTINCT FROM p_epoch OR st.released_at IS NOT NULL
     OR st.holder IS NULL OR (p_holder IS NOT NULL AND st.holder IS DISTINCT FROM p_holder) THEN
    RAISE EXCEPTION USING ERRCODE = 'PLF01',
      MESSAGE = format('pgleader: fenced: write for scope %L carries epoch %s, which is no longer current', p_scope, p_epoch);
  END IF;
END $$;
-- +goose StatementEnd

-- end_fenced: end the fenced transactions that still hold p_scope's row after its
-- term ended, so that a successor's claim can bump the epoch. Only while no
-- session leads the scope: in lock mode this call takes the scope's lock (without
-- waiting; refused, PLF07, when it is held) and gives it back at the end; in
-- lease mode the lease on record must have expired or been released. Each
-- transaction is audited (pid, login, application, start) before its backend is
-- terminated, which needs pg_signal_backend on the owner role (migrate grants it
-- when it may; a superuser's backend can never be ended this way): ended is false
-- where the termination was refused. Returns one row per fenced transaction found.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.end_fenced(p_node text, p_scope text)
RETURNS TABLE (pid int, login_role text, application text, xact_start timestamptz, ended boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgleader, pg_temp AS $$
DECLARE
  st     pgleader.leader_state;
  v_lock boolean := false;
  r      record;
BEGIN
  SELECT * INTO st FROM pgleader.leader_state s WHERE s.scope = p_scope;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  IF st.mode = 'lease' THEN
    IF st.holder IS NOT NULL AND st.released_at IS NULL
       AND st.last_heartbeat + make_interval(secs => coalesce(st.session_lease_ms, 0) / 1000.0) > clock_timestamp() THEN
      RAISE EXCEPTION USING ERRCODE = 'PLF07',
        MESSAGE = format('pgleader: scope %L is led: its fenced transactions belong to a live term', p_scope);
    END IF;
  ELSE
    v_lock := pg_try_advisory_lock(st.lock_key);
    IF NOT v_lock THEN
      RAISE EXCEPTION USING ERRCODE = 'PLF07',
        MESSAGE = format('pgleader: scope %L is led: its fenced transactions belong to a live term', p_scope);
    END IF;
  END IF;
  BEGIN
    FOR r IN SELECT l.pid AS bpid, a.usename::text AS who, a.application_name AS app, a.xact_start AS started
               FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
              WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted AND l.mode = 'ShareLock'
                AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = current_database())
                AND l.classid = (((st.lock_key >> 32) & 2147483647)::int)::oid
                AND l.objid = ((st.lock_key & 2147483647)::int)::oid
                AND l.pid <> pg_backend_pid()
              ORDER BY l.pid LOOP
      pid := r.bpid; login_role := r.who; application := r.app; xact_start := r.started;
      BEGIN
        ended := pg_terminate_backend(r.bpid);
      EXCEPTION WHEN insufficient_privilege THEN
        ended := false;
      END;
      INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
      VALUES (p_scope, p_node, st.epoch, 'fenced_tx_ended',
              jsonb_build_object('pid', r.bpid, 'login_role', r.who, 'application', r.app,
                                 'xact_start', r.started, 'ended', ended, 'by', session_user));
      RETURN NEXT;
    END LOOP;
  EXCEPTION WHEN OTHERS THEN
    IF v_lock THEN
      PERFORM pg_advisory_unlock(st.lock_key);
    END IF;
    RAISE;
  END;
  IF v_lock THEN
    PERFORM pg_advisory_unlock(st.lock_key);
  END IF;
END $$;
-- +goose StatementEnd

-- request_failbacks, version 12: as version 10, but only nodes whose login may
-- campaign for the scope are preferred, and the request is attributed to the
-- login of the preferred node (recorded at its registration), the one that
-- caused it; recorded_by is the leader's login, whose heartbeat wrote it.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.request_failbacks(p_node text, p_scopes text[], p_epochs bigint[], p_locks jsonb)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgleader, pg_temp AS $$
DECLARE
  v_prio int;
  r      record;
BEGIN
  -- The common case (every leader heartbeat) is this one statement on the small
  -- nodes table, and a return: nobody preferred outranks this node.
  SELECT me.priority INTO v_prio FROM pgleader.nodes me
   WHERE me.node_id = p_node
     AND EXISTS (SELECT 1 FROM pgleader.nodes n
                  WHERE n.failback_after_ms IS NOT NULL AND n.stopped_at IS NULL
                    AND n.priority > me.priority AND n.scopes && p_scopes);
  IF NOT FOUND THEN
    RETURN;
  END IF;
  FOR r IN
    WITH cand AS (
      SELECT ln.node_id, ln.priority, ln.scopes, n.failback_after_ms AS after_ms, n.login_role
        FROM pgleader.live_nodes(coalesce(p_locks, pgleader.lock_map())) ln
        JOIN pgleader.nodes n ON n.node_id = ln.node_id
       WHERE n.failback_after_ms IS NOT NULL AND ln.priority > v_prio
         AND n.registered_at <= now() - make_interval(secs => n.failback_after_ms / 1000.0)
    )
    SELECT s.scope, s.epoch, c.node_id AS target, c.priority, c.after_ms, c.login_role
      FROM unnest(p_scopes, p_epochs) AS w(scope, epoch)
      JOIN pgleader.leader_state s ON s.scope = w.scope AND s.epoch = w.epoch
      CROSS JOIN LATERAL (
        SELECT cand.node_id, cand.priority, cand.after_ms, cand.login_role FROM cand
         WHERE s.scope = ANY (cand.scopes)
           AND s.acquired_at <= now() - make_interval(secs => cand.after_ms / 1000.0)
           AND NOT coalesce(cand.node_id = s.last_holder AND s.cooldown_until > now(), false)
           AND pgleader.may_campaign(s.scope, cand.login_role)
         ORDER BY cand.priority DESC, cand.node_id LIMIT 1) c
     WHERE s.holder = p_node AND s.released_at IS NULL
       AND (s.handover_deadline IS NULL OR s.handover_deadline <= now())
       AND s.resign_requested_epoch IS DISTINCT FROM s.epoch
       AND coalesce(s.failback_not_before <= now(), true)
       -- failback undoes failovers, not an operator's choice: a term that began
       -- with a handover to its holder other than a failback stays
       AND NOT EXISTS (
         SELECT 1 FROM (SELECT t.epoch, t.handed_to, t.acquired_at FROM pgleader.terms t
                         WHERE t.scope = s.scope AND t.epoch < s.epoch ORDER BY t.epoch DESC LIMIT 1) p
          WHERE p.handed_to = s.holder
            AND NOT EXISTS (SELECT 1 FROM pgleader.audit a
                             WHERE a.scope = s.scope AND a.at >= p.acquired_at AND a.kind = 'handover_requested'
                               AND a.epoch = p.epoch AND a.detail->>'via' = 'failback'))
     FOR NO KEY UPDATE OF s SKIP LOCKED
  LOOP
    UPDATE pgleader.leader_state s SET handover_to = r.target, handover_epoch = r.epoch,
           handover_deadline = now() + interval '30 seconds', handover_by = coalesce(r.login_role, r.target),
           failback_not_before = now() + make_interval(secs => r.after_ms / 1000.0)
     WHERE s.scope = r.scope;
    INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
    VALUES (r.scope, p_node, r.epoch, 'handover_requested',
            jsonb_build_object('to', r.target, 'by', r.login_role, 'recorded_by', session_user,
                               'via', 'failback', 'timeout_ms', 30000,
                               'priority', r.priority, 'holder_priority', v_prio));
    PERFORM pg_notify('leader_change', json_build_object(
        'scope', r.scope, 'epoch', r.epoch, 'holder', p_node, 'event', 'handover_requested', 'to', r.target)::text);
  END LOOP;
END $$;
-- +goose StatementEnd

-- privilege_lists, version 12: end_fenced (nodes), set_lock_key (operators),
-- bind_scope (the owner only) run as the owner.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.privilege_lists(
    OUT definer text[], OUT node text[], OUT reader text[], OUT operator text[])
LANGUAGE sql IMMUTABLE AS $$
  SELECT ARRAY['claim_batch', 'release_batch', 'node_heartbeat', 'unlock_held_many',
               'await_release', 'ring_next', 'register_node', 'node_stopped', 'session_lock',
               'fence', 'fence_rejected', 'request_resign', 'record_eviction', 'interference',
               'request_handover', 'cancel_handover', 'retire_scope',
               'lease_register', 'lease_heartbeat', 'lease_claim_batch', 'lease_release_batch', 'lease_stopped',
               'mode_conflict', 'end_fenced', 'set_lock_key', 'bind_scope', 'campaign_refusals',
               'check_lock_key_at_commit'],
         ARRAY['schema_version', 'lock_key', 'claim_batch', 'release_batch', 'node_heartbeat',
               'unlock_held_many', 'await_release', 'ring_next', 'register_node', 'node_stopped',
               'session_lock', 'fence', 'fence_rejected', 'epoch_floor', 'wal_timeline',
               'interference',
               'lease_register', 'lease_heartbeat', 'lease_claim_batch', 'lease_release_batch', 'lease_stopped',
               'mode_conflict', 'end_fenced', 'campaign_refusals'],
         ARRAY['schema_version', 'lock_key', 'lock_held', 'advisory_locks', 'lock_map',
               'wal_timeline', 'epoch_floor', 'interference'],
         ARRAY['request_resign', 'record_eviction', 'request_handover', 'cancel_handover', 'retire_scope',
               'set_lock_key']
$$;
-- +goose StatementEnd

-- apply_privileges, version 12: as version 8, and
--   * the reader reads every column of pgleader.nodes but lease_token;
--   * grants to roles other than the four (and PUBLIC) are taken back, except
--     those docs/security.md tells a DBA to make: USAGE on the schema, EXECUTE on
--     fence and fence_rejected (an application role that fences its writes),
--     INSERT on demo_actions and USAGE on its sequence (the demo workload);
--   * the owner is granted pg_signal_backend when the migrating role may
--     (end_fenced ends fenced transactions of an ended term).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgleader.apply_privileges() RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pgleader, pg_temp AS $$
DECLARE
  r        record;
  v_owner  name;
  v_node   name;
  v_reader name;
  v_oper   name;
  v_can    boolean;
  v_four   oid[];
  v_definer text[];
  v_node_fn text[];
  v_read_fn text[];
  v_oper_fn text[];
BEGIN
  SELECT l.definer, l.node, l.reader, l.operator INTO v_definer, v_node_fn, v_read_fn, v_oper_fn
    FROM pgleader.privilege_lists() l;
  SELECT role_name INTO v_owner FROM pgleader.roles WHERE kind = 'owner';
  SELECT role_name INTO v_node FROM pgleader.roles WHERE kind = 'node';
  SELECT role_name INTO v_reader FROM pgleader.roles WHERE kind = 'reader';
  SELECT role_name INTO v_oper FROM pgleader.roles WHERE kind = 'operator';
  SELECT u.rolsuper OR u.rolcreaterole INTO v_can FROM pg_catalog.pg_roles u WHERE u.rolname = current_user;

  FOR r IN SELECT x AS name FROM unnest(ARRAY[v_owner, v_node, v_reader, v_oper]) x
            WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles g WHERE g.rolname = x) LOOP
    IF NOT v_can THEN
      RAISE EXCEPTION USING ERRCODE = '42501',
        MESSAGE = format('pgleader: role %I does not exist, and %I may not create roles', r.name, current_user),
        HINT = format('have a DBA run: CREATE ROLE %I NOLOGIN; GRANT %I TO %I; (all four roles: docs/security.md), or migrate once as a role with CREATEROLE',
                      r.name, v_owner, current_user);
    END IF;
    -- Roles are shared by every database of the cluster: another database's
    -- migration may create the same role at the same time.
    BEGIN
      EXECUTE format('CREATE ROLE %I NOLOGIN', r.name);
    EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
    END;
  END LOOP;
  IF NOT pg_catalog.pg_has_role(current_user, v_owner, 'MEMBER') THEN
    BEGIN
      EXECUTE format('GRANT %I TO %I', v_owner, current_user);
    EXCEPTION WHEN unique_violation THEN NULL;
    END;
  END IF;
  IF NOT pg_catalog.pg_has_role(v_oper, v_reader, 'MEMBER') THEN
    BEGIN
      EXECUTE format('GRANT %I TO %I', v_reader, v_oper);
    EXCEPTION WHEN unique_violation THEN NULL;
    END;
  END IF;
  -- interference() reports the client address of a squatter's session;
  -- end_fenced terminates fenced transactions of an ended term.
  FOR r IN SELECT x AS name FROM unnest(ARRAY['pg_read_all_stats', 'pg_signal_backend']) x LOOP
    IF NOT pg_catalog.pg_has_role(v_owner, r.name, 'MEMBER') THEN
      BEGIN
        EXECUTE format('GRANT %I TO %I', r.name, v_owner);
      EXCEPTION WHEN unique_violation THEN NULL;
                WHEN insufficient_privilege THEN
        RAISE NOTICE 'pgleader: % may not grant % to %: %', current_user, r.name, v_owner,
          CASE r.name WHEN 'pg_read_all_stats' THEN 'squatters will be named without their client address'
                      ELSE 'a successor will name, not end, the fenced transactions of an ended term that hold up its claim' END;
      END;
    END IF;
  END LOOP;

  -- Ownership: the schema and everything in it (the publication of the logical
  -- source stays with whoever created it: a publication's owner needs CREATE on the
  -- database).
  EXECUTE format('ALTER SCHEMA pgleader OWNER TO %I', v_owner);
  FOR r IN SELECT c.oid::regclass AS obj, c.relkind FROM pg_catalog.pg_class c
            WHERE c.relnamespace = 'pgleader'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
              AND c.relowner <> (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = v_owner) LOOP
    IF r.relkind = 'S' THEN
      -- a sequence owned by a column follows its table
      CONTINUE WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_depend d WHERE d.classid = 'pg_class'::regclass
                             AND d.objid = r.obj::oid AND d.deptype IN ('a', 'i'));
      EXECUTE format('ALTER SEQUENCE %s OWNER TO %I', r.obj, v_owner);
    ELSE
      EXECUTE format('ALTER TABLE %s OWNER TO %I', r.obj, v_owner);
    END IF;
  END LOOP;
  FOR r IN SELECT p.oid::regprocedure AS fn, p.proname, p.prosecdef, p.proconfig FROM pg_catalog.pg_proc p
            WHERE p.pronamespace = 'pgleader'::regnamespace LOOP
    EXECUTE format('ALTER FUNCTION %s OWNER TO %I', r.fn, v_owner);
    IF r.proconfig IS NULL OR NOT ('search_path=pg_catalog, pgleader, pg_temp' = ANY (r.proconfig)) THEN
      EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, pgleader, pg_temp', r.fn);
    END IF;
    IF (r.proname = ANY (v_definer)) <> r.prosecdef THEN
      EXECUTE format('ALTER FUNCTION %s %s', r.fn,
                     CASE WHEN r.proname = ANY (v_definer) THEN 'SECURITY DEFINER' ELSE 'SECURITY INVOKER' END);
    END IF;
  END LOOP;

  -- Grants made by hand to any other role, but those docs/security.md asks for.
  SELECT array_agg(g.oid) INTO v_four FROM pg_catalog.pg_roles g WHERE g.rolname IN (v_owner, v_node, v_reader, v_oper);
  FOR r IN
    SELECT 'SCHEMA' AS what, 'pgleader' AS obj, a.grantee, a.privilege_type AS priv, ''::text AS name
      FROM pg_catalog.pg_namespace n, aclexplode(n.nspacl) a
     WHERE n.nspname = 'pgleader'
    UNION ALL
    SELECT CASE WHEN c.relkind = 'S' THEN 'SEQUENCE' ELSE 'TABLE' END, c.oid::regclass::text, a.grantee, a.privilege_type, c.relname::text
      FROM pg_catalog.pg_class c, aclexplode(c.relacl) a
     WHERE c.relnamespace = 'pgleader'::regnamespace
    UNION ALL
    SELECT 'FUNCTION', p.oid::regprocedure::text, a.grantee, a.privilege_type, p.proname::text
      FROM pg_catalog.pg_proc p, aclexplode(p.proacl) a
     WHERE p.pronamespace = 'pgleader'::regnamespace
  LOOP
    CONTINUE WHEN r.grantee = 0 OR r.grantee = ANY (v_four);
    CONTINUE WHEN (r.what = 'SCHEMA' AND r.priv = 'USAGE')
               OR (r.what = 'FUNCTION' AND r.priv = 'EXECUTE' AND r.name IN ('fence', 'fence_rejected'))
               OR (r.what = 'TABLE' AND r.priv = 'INSERT' AND r.name = 'demo_actions')
               OR (r.what = 'SEQUENCE' AND r.priv IN ('USAGE', 'SELECT', 'UPDATE') AND r.name = 'demo_actions_id_seq');
    CONTINUE WHEN NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles g WHERE g.oid = r.grantee);
    RAISE NOTICE 'pgleader: taking back % on % % from %, granted by hand (docs/security.md lists what each role gets)',
      r.priv, lower(r.what), r.obj, r.grantee::regrole;
    EXECUTE format('REVOKE %s ON %s %s FROM %s CASCADE', r.priv, r.what, r.obj, r.grantee::regrole);
  END LOOP;

  -- Grants: nothing to PUBLIC; each role exactly its list (re-applied from
  -- scratch, so a grant removed from the list is taken back).
  FOR r IN SELECT x AS name FROM unnest(ARRAY['public', v_node, v_reader, v_oper]) x LOOP
    EXECUTE format('REVOKE ALL ON SCHEMA pgleader FROM %s', CASE WHEN r.name = 'public' THEN 'PUBLIC' ELSE quote_ident(r.name) END);
    EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA pgleader FROM %s', CASE WHEN r.name = 'public' THEN 'PUBLIC' ELSE quote_ident(r.name) END);
    EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA pgleader FROM %s', CASE WHEN r.name = 'public' THEN 'PUBLIC' ELSE quote_ident(r.name) END);
    EXECUTE format('REVOKE ALL ON ALL FUNCTIONS IN SCHEMA pgleader FROM %s', CASE WHEN r.name = 'public' THEN 'PUBLIC' ELSE quote_ident(r.name) END);
    EXECUTE format('REVOKE ALL (%s) ON pgleader.nodes FROM %s',
                   (SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) FROM pg_catalog.pg_attribute a
                     WHERE a.attrelid = 'pgleader.nodes'::regclass AND a.attnum > 0 AND NOT a.attisdropped),
                   CASE WHEN r.name = 'public' THEN 'PUBLIC' ELSE quote_ident(r.name) END);
  END LOOP;
  EXECUTE format('GRANT USAGE ON SCHEMA pgleader TO %I, %I, %I', v_node, v_reader, v_oper);
  FOR r IN SELECT c.oid::regclass AS obj FROM pg_catalog.pg_class c
            WHERE c.relnamespace = 'pgleader'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm')
              AND c.oid <> 'pgleader.nodes'::regclass LOOP
    EXECUTE format('GRANT SELECT ON %s TO %I', r.obj, v_reader);
  END LOOP;
  -- The lease token binds a lease-mode node's calls: only the owner reads it.
  EXECUTE format('GRANT SELECT (%s) ON pgleader.nodes TO %I',
                 (SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) FROM pg_catalog.pg_attribute a
                   WHERE a.attrelid = 'pgleader.nodes'::regclass AND a.attnum > 0 AND NOT a.attisdropped
                     AND a.attname <> 'lease_token'),
                 v_reader);
  FOR r IN SELECT p.oid::regprocedure AS fn, p.proname FROM pg_catalog.pg_proc p
            WHERE p.pronamespace = 'pgleader'::regnamespace LOOP
    IF r.proname = ANY (v_node_fn) THEN
      EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', r.fn, v_node);
    END IF;
    IF r.proname = ANY (v_read_fn) THEN
      EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', r.fn, v_reader);
    END IF;
    IF r.proname = ANY (v_oper_fn) THEN
      EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', r.fn, v_oper);
    END IF;
  END LOOP;
END $$;
-- +goose StatementEnd

SELECT pgleader.apply_privileges();
