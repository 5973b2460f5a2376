-- apply_privileges: grant each of the four roles (owner, node, reader,
-- operator; migrate.Roles) exactly what privilege_lists and the tables' column
-- lists give it, and take back every other grant on the schema's objects, except
-- those docs/security.md tells a DBA to make: USAGE on the schema, EXECUTE on
-- fence and fence_rejected (an application role that fences its writes),
-- INSERT on demo_actions and USAGE on its sequence (the demo workload). The
-- reader reads every column of pgleader.nodes but lease_token (a secret). The
-- owner is granted pg_signal_backend when the migrating role may (end_fenced
-- ends fenced transactions of an ended term).
CREATE OR REPLACE FUNCTION pgleader.apply_privileges()
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
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

  -- fence keeps a fenced transaction from being prepared, where the server
  -- allows prepared transactions, with a temporary table of the session's.
  IF NOT pg_catalog.has_database_privilege(v_owner, current_database(), 'TEMPORARY') THEN
    BEGIN
      EXECUTE format('GRANT TEMPORARY ON DATABASE %I TO %I', current_database(), v_owner);
    EXCEPTION WHEN insufficient_privilege THEN
      RAISE NOTICE 'pgleader: % may not grant TEMPORARY on database % to %: with max_prepared_transactions above 0, fence will refuse writes until a DBA does',
        current_user, current_database(), v_owner;
    END;
  END IF;

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
END $function$;
