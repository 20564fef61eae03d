-- Version 2 (issue 36): a store id belongs to one role, and outcomes follow memd's own rules
-- in the database, whatever a client sends.

-- Which role each store (daemon) id belongs to: the first to claim it, which is the daemon
-- that made the id, before it writes anything. Rows go in only under a store id of their
-- owner's, so a teammate who reads (or guesses) another user's next uid cannot take it.
CREATE TABLE memd_stores (
  store_id text PRIMARY KEY CHECK (store_id ~ '^[0-9a-f]{16}$'),
  owner    text NOT NULL
);
-- The stores already writing: the owner of each prefix's oldest row, and outcome senders.
INSERT INTO memd_stores (store_id, owner)
  SELECT DISTINCT ON (split_part(uid, ':', 1)) split_part(uid, ':', 1), owner
  FROM memd_memories WHERE split_part(uid, ':', 1) ~ '^[0-9a-f]{16}$'
  ORDER BY split_part(uid, ':', 1), change_seq
  ON CONFLICT DO NOTHING;
INSERT INTO memd_stores (store_id, owner)
  SELECT DISTINCT ON (split_part(event_id, ':', 1)) split_part(event_id, ':', 1), owner
  FROM memd_outcomes WHERE split_part(event_id, ':', 1) ~ '^[0-9a-f]{16}$'
  ORDER BY split_part(event_id, ':', 1), owner
  ON CONFLICT DO NOTHING;
ALTER TABLE memd_stores ENABLE ROW LEVEL SECURITY;
CREATE POLICY memd_read ON memd_stores FOR SELECT USING (true);

CREATE POLICY memd_own_store ON memd_memories AS RESTRICTIVE FOR INSERT
  WITH CHECK (EXISTS (SELECT 1 FROM memd_stores s
                      WHERE s.store_id = split_part(uid, ':', 1) AND s.owner = current_user));

-- Claims `p_store` for the caller: true when it is the caller's (now or already).
CREATE FUNCTION memd_claim_store(p_store text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $fn$
BEGIN
  IF p_store IS NULL OR p_store !~ '^[0-9a-f]{16}$' THEN
    RAISE EXCEPTION 'memd_claim_store: a store id is 16 lowercase hex digits'
      USING ERRCODE = '22023';
  END IF;
  INSERT INTO memd_stores (store_id, owner) VALUES (p_store, session_user)
    ON CONFLICT (store_id) DO NOTHING;
  RETURN EXISTS (SELECT 1 FROM memd_stores WHERE store_id = p_store AND owner = session_user);
END
$fn$;
REVOKE ALL ON FUNCTION memd_claim_store(text) FROM PUBLIC;

-- When each outcome arrived (server clock): the per-sender rate counts these.
ALTER TABLE memd_outcomes ADD COLUMN received_at timestamptz NOT NULL DEFAULT now();
CREATE INDEX memd_outcomes_sender ON memd_outcomes (owner, uid, received_at);

-- Adds one outcome to a memory the caller may see, once per (caller, event id), by memd's
-- rules (learn::scoring) computed here from the label and the memory's collection: the
-- client's deltas may only weaken an outcome (time weighting), never strengthen or flip it.
-- worked +0.2, partial +0.05, failed -0.3 on a scored memory's score (clamped to [0, 1]); a
-- memory-bank fact's score does not move, its confidence goes +0.1 (at most 1) or -0.2 (at
-- least 0.1); books take no outcomes; unknown only marks the memory used. At most
-- 120 outcomes per sender and memory are applied per hour; the rest are kept, unapplied.
-- The writer is one of the caller's own stores.
CREATE OR REPLACE FUNCTION memd_record_outcome(
  p_event text, p_uid text, p_outcome text, p_at bigint, p_score double precision,
  p_counted boolean, p_success double precision, p_confidence double precision,
  p_writer text
) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $fn$
DECLARE
  visible boolean;
  coll text;
  done boolean;
  counted boolean := p_outcome <> 'unknown';
  rule double precision;
  delta double precision;
  recent integer;
  at_ms bigint;
BEGIN
  IF p_outcome IS NULL OR p_outcome NOT IN ('worked', 'partial', 'failed', 'unknown') THEN
    RAISE EXCEPTION 'memd_record_outcome: outcome must be worked, partial, failed or unknown'
      USING ERRCODE = '22023';
  END IF;
  IF p_event IS NULL OR length(p_event) > 64 OR p_uid IS NULL OR length(p_uid) > 64 THEN
    RAISE EXCEPTION 'memd_record_outcome: event id and uid are 1-64 characters'
      USING ERRCODE = '22023';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM memd_stores WHERE store_id = p_writer AND owner = session_user)
  THEN
    RAISE EXCEPTION 'memd_record_outcome: the writer is not a store of role %', session_user
      USING ERRCODE = '42501';
  END IF;
  -- No outcome from the future (it would hold last_used ahead of every real use).
  at_ms := LEAST(coalesce(p_at, 0), (extract(epoch FROM clock_timestamp()) * 1000)::bigint + 300000);
  SELECT (owner = session_user OR visibility = 'team'), collection INTO visible, coll
    FROM memd_memories WHERE uid = p_uid;
  IF visible IS NOT NULL AND NOT visible THEN
    RETURN false;
  END IF;
  INSERT INTO memd_outcomes (event_id, uid, outcome, at)
    VALUES (p_event, p_uid, p_outcome, at_ms) ON CONFLICT (owner, event_id) DO NOTHING;
  SELECT applied INTO done FROM memd_outcomes
    WHERE owner = session_user AND event_id = p_event FOR UPDATE;
  IF done OR visible IS NULL OR coll = 'books' THEN
    RETURN done;
  END IF;
  SELECT count(*) INTO recent FROM memd_outcomes
    WHERE owner = session_user AND uid = p_uid AND applied
      AND received_at > now() - interval '1 hour';
  IF recent >= 120 THEN
    RETURN false;
  END IF;
  rule := CASE p_outcome WHEN 'worked' THEN 0.2 WHEN 'partial' THEN 0.05
                         WHEN 'failed' THEN -0.3 ELSE 0 END;
  delta := CASE WHEN rule > 0 THEN LEAST(rule, GREATEST(0, coalesce(p_score, rule)))
                WHEN rule < 0 THEN GREATEST(rule, LEAST(0, coalesce(p_score, rule)))
                ELSE 0 END;
  UPDATE memd_memories SET
    score = CASE WHEN collection = 'memory_bank' THEN score
                 ELSE round(LEAST(1, GREATEST(0, score + delta))::numeric, 6)::double precision END,
    uses = uses + CASE WHEN counted THEN 1 ELSE 0 END,
    success_count = success_count
      + CASE p_outcome WHEN 'worked' THEN 1 WHEN 'partial' THEN 0.5 ELSE 0 END,
    confidence = CASE
      WHEN collection <> 'memory_bank' THEN confidence
      WHEN p_outcome = 'failed'
        THEN GREATEST(0.1, LEAST(1, GREATEST(0, coalesce(confidence, 0.7))) - 0.2)
      WHEN p_outcome = 'worked'
        THEN LEAST(1, LEAST(1, GREATEST(0, coalesce(confidence, 0.7))) + 0.1)
      ELSE confidence END,
    outcome_history = CASE WHEN NOT counted THEN outcome_history ELSE (
        SELECT coalesce(jsonb_agg(e ORDER BY n), '[]'::jsonb) FROM (
          SELECT e, n FROM jsonb_array_elements(
            outcome_history || jsonb_build_array(jsonb_build_object('outcome', p_outcome, 'at', at_ms))
          ) WITH ORDINALITY AS h(e, n) ORDER BY n DESC LIMIT 10) newest)
      END,
    last_outcome = CASE WHEN counted THEN p_outcome ELSE last_outcome END,
    last_used = GREATEST(coalesce(last_used, at_ms), at_ms),
    last_writer = p_writer
  WHERE uid = p_uid AND NOT deleted;
  UPDATE memd_outcomes SET applied = true WHERE owner = session_user AND event_id = p_event;
  RETURN true;
END
$fn$;

GRANT SELECT ON memd_stores TO memd_user;
GRANT EXECUTE ON FUNCTION memd_claim_store(text) TO memd_user;
