-- note_timeline: record the current timeline if it is new (see timelines).
CREATE OR REPLACE FUNCTION pgleader.note_timeline(p_node text)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pgleader', 'pg_temp'
AS $function$
DECLARE
  v_tl    bigint := pgleader.wal_timeline();
  v_prev  bigint;
  v_max   bigint;
BEGIN
  IF EXISTS (SELECT 1 FROM pgleader.timelines t WHERE t.timeline = v_tl) THEN
    RETURN;
  END IF;
  SELECT max(t.timeline) INTO v_prev FROM pgleader.timelines t;
  SELECT max(s.epoch) INTO v_max FROM pgleader.leader_state s;
  INSERT INTO pgleader.timelines (timeline, epoch_floor, first_claim_by, max_epoch_seen)
  VALUES (v_tl, (v_tl - 1) << 40, p_node, v_max)
  ON CONFLICT (timeline) DO NOTHING;
  IF NOT FOUND OR v_tl = 1 THEN
    RETURN;
  END IF;
  INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail)
  VALUES (NULL, p_node, (v_tl - 1) << 40, 'epoch_floor_raised',
          jsonb_build_object('timeline', v_tl, 'previous_timeline', v_prev,
                             'epoch_floor', (v_tl - 1) << 40, 'max_epoch_on_record', v_max));
  PERFORM pg_notify('leader_change', json_build_object(
      'event', 'failover', 'timeline', v_tl, 'epoch', (v_tl - 1) << 40, 'holder', p_node)::text);
END $function$;
