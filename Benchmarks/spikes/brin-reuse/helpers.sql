-- summarize every complete block range not yet summarized (what autosummarize would have done)
CREATE FUNCTION autosum(ppr int) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE nb bigint := pg_relation_size('audit_events') / 8192; n bigint := 0; b bigint := 0;
BEGIN
  IF to_regclass('audit_events_recorded_at') IS NULL THEN RETURN 0; END IF;
  WHILE b + ppr <= nb LOOP n := n + brin_summarize_range('audit_events_recorded_at', b); b := b + ppr; END LOOP;
  RETURN n;
END $$;
CREATE FUNCTION desum(ppr int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE nb bigint := pg_relation_size('audit_events') / 8192; b bigint := 0;
BEGIN
  WHILE b < nb LOOP PERFORM brin_desummarize_range('audit_events_recorded_at', b); b := b + ppr; END LOOP;
END $$;
