-- +goose Up
-- weft_append_events inserts a call's new events in one statement.
--
-- 00027's body probed and inserted event by event: for each event one
-- SELECT for its key and one INSERT, each started and ended by the
-- executor, so a 30-event append (a run's final flush) ran 60 statements.
-- This body probes every key of the call in one SELECT, computes the new
-- events' sequence numbers and hash chain in the loop as before (the same
-- bytes hashed in the same order), and inserts them in one INSERT ...
-- SELECT FROM unnest: the same rows, hashes, answers, run row and
-- notification, in two statements whatever the count. A key repeated
-- within one call is still logged once, at its first place, and the
-- approvals projection's row trigger still fires in the log's order.
-- BenchmarkAppendFlush32 (a run's final flush: 32 events and the terminal
-- status) compares the two bodies (docs/benchmarks.md, Session 16: one
-- insert per append).
--
-- CREATE OR REPLACE of 00027's third signature, arguments and answers
-- unchanged; the older signatures keep their bodies. Down restores
-- 00027's body.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION weft_append_events(
    p_run text, p_tenant text, p_only_active boolean, p_schema_version integer,
    p_keys text[], p_types text[], p_nodes text[], p_attempts integer[], p_ats timestamptz[], p_data bytea[],
    p_pres bytea[], p_node_parts bytea[], p_run_part bytea, p_running_at timestamptz, p_temporal_run_id text, p_channel text,
    p_final_status text, p_output jsonb, p_error jsonb, p_final_at timestamptz, p_after integer, p_through integer)
RETURNS TABLE (run_found boolean, run_status text, appended integer, was_terminal boolean, gap boolean)
LANGUAGE plpgsql AS $$
DECLARE
    v_seq     bigint;
    v_hash    text;
    v_status  text;
    v_new     text;
    v_closed  boolean;
    v_no_trid boolean;
    v_running boolean;
    v_trid    boolean;
    v_final   boolean;
    v_through integer;
    v_vouch   boolean;
    n         integer := 0;
    v_held    text[];
    v_keys    text[] := '{}';
    v_idx     integer[] := '{}';
    v_seqs    bigint[] := '{}';
    v_prevs   text[] := '{}';
    v_hashes  text[] := '{}';
BEGIN
    SELECT r.last_seq, r.last_hash, r.status, r.temporal_run_id IS NULL, r.events_through
      INTO v_seq, v_hash, v_status, v_no_trid, v_through
      FROM runs r WHERE r.run_id = p_run AND r.tenant_id = p_tenant FOR UPDATE;
    IF NOT FOUND THEN
        run_found := false; run_status := ''; appended := 0; was_terminal := false; gap := false;
        RETURN NEXT;
        RETURN;
    END IF;
    v_closed := v_status IN ('succeeded', 'failed', 'cancelled');
    IF p_only_active AND v_closed THEN
        run_found := true; run_status := v_status; appended := 0; was_terminal := true; gap := false;
        RETURN NEXT;
        RETURN;
    END IF;
    -- A suffix (p_after > 0) follows events sent to an earlier carrier:
    -- refused, writing nothing, unless appends that vouched for the whole
    -- prefix (p_through) already logged every event through p_after.
    IF p_after > 0 AND v_through < p_after THEN
        run_found := true; run_status := v_status; appended := 0; was_terminal := v_closed; gap := true;
        RETURN NEXT;
        RETURN;
    END IF;
    v_vouch := p_through > v_through;
    -- The keys the run already holds, in one probe; then the new events'
    -- sequence numbers and hash chain in order, a key repeated within the
    -- call taken once, at its first place.
    SELECT coalesce(array_agg(e.event_key), '{}') INTO v_held
      FROM run_events e WHERE e.run_id = p_run AND e.event_key = ANY (p_keys);
    FOR i IN 1 .. coalesce(array_length(p_keys, 1), 0) LOOP
        CONTINUE WHEN p_keys[i] = ANY (v_held) OR p_keys[i] = ANY (v_keys);
        v_seq := v_seq + 1;
        v_new := encode(sha256(convert_to(v_hash, 'UTF8') || p_pres[i] || p_data[i] || p_node_parts[i] || p_run_part
                               || convert_to(v_seq::text || ',"type":"' || p_types[i] || '"}', 'UTF8')), 'hex');
        v_idx := v_idx || i; v_seqs := v_seqs || v_seq; v_prevs := v_prevs || v_hash; v_hashes := v_hashes || v_new;
        v_keys := v_keys || p_keys[i];
        v_hash := v_new;
        n := n + 1;
    END LOOP;
    IF n > 0 THEN
        INSERT INTO run_events (run_id, tenant_id, seq, event_key, type, schema_version, at, node_id, attempt, data, prev_hash, hash)
        SELECT p_run, p_tenant, s.seq, p_keys[s.i], p_types[s.i], p_schema_version, p_ats[s.i],
               NULLIF(p_nodes[s.i], ''), NULLIF(p_attempts[s.i], 0), convert_from(p_data[s.i], 'UTF8')::jsonb, s.prev, s.hash
          FROM unnest(v_idx, v_seqs, v_prevs, v_hashes) AS s (i, seq, prev, hash)
         ORDER BY s.seq; -- row triggers (the approvals projection) fire in the log's order
    END IF;
    v_running := p_running_at IS NOT NULL AND v_status = 'queued';
    IF v_running THEN
        v_status := 'running';
    END IF;
    v_trid := p_temporal_run_id <> '' AND v_no_trid;
    v_final := p_final_status <> '' AND v_status NOT IN ('succeeded', 'failed', 'cancelled');
    IF v_running OR v_trid OR v_final THEN
        UPDATE runs SET last_seq = v_seq, last_hash = v_hash,
               status = CASE WHEN v_final THEN p_final_status WHEN v_running THEN 'running' ELSE status END,
               started_at = CASE WHEN v_running THEN COALESCE(started_at, p_running_at) ELSE started_at END,
               temporal_run_id = CASE WHEN v_trid THEN p_temporal_run_id ELSE temporal_run_id END,
               finished_at = CASE WHEN v_final THEN COALESCE(p_final_at, now()) ELSE finished_at END,
               output = CASE WHEN v_final THEN p_output ELSE output END,
               error = CASE WHEN v_final THEN p_error ELSE error END,
               updated_at = CASE WHEN n > 0 OR v_running OR v_final THEN now() ELSE updated_at END,
               events_through = CASE WHEN v_vouch THEN p_through ELSE events_through END
         WHERE run_id = p_run;
    ELSIF n > 0 OR v_vouch THEN
        UPDATE runs SET last_seq = v_seq, last_hash = v_hash,
               updated_at = CASE WHEN n > 0 THEN now() ELSE updated_at END,
               events_through = CASE WHEN v_vouch THEN p_through ELSE events_through END
         WHERE run_id = p_run;
    END IF;
    -- Notify only a run someone streams (see run_event_watches): a
    -- transaction that notifies holds PostgreSQL's cluster-wide notify
    -- lock from its commit's start until its WAL is flushed, so notifying
    -- every append made every append commit one after the other, each
    -- with its own WAL flush. The check runs under the run row lock,
    -- which a watch's registration waits for (FOR SHARE), so an append
    -- either sees the watch or committed before the registration did.
    IF n > 0 AND EXISTS (SELECT 1 FROM run_event_watches w WHERE w.run_id = p_run AND w.expires_at > now()) THEN
        PERFORM pg_notify(p_channel, p_run);
    END IF;
    IF v_final THEN
        v_status := p_final_status;
    END IF;
    run_found := true; run_status := v_status; appended := n; was_terminal := v_closed; gap := false;
    RETURN NEXT;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION weft_append_events(
    p_run text, p_tenant text, p_only_active boolean, p_schema_version integer,
    p_keys text[], p_types text[], p_nodes text[], p_attempts integer[], p_ats timestamptz[], p_data bytea[],
    p_pres bytea[], p_node_parts bytea[], p_run_part bytea, p_running_at timestamptz, p_temporal_run_id text, p_channel text,
    p_final_status text, p_output jsonb, p_error jsonb, p_final_at timestamptz, p_after integer, p_through integer)
RETURNS TABLE (run_found boolean, run_status text, appended integer, was_terminal boolean, gap boolean)
LANGUAGE plpgsql AS $$
DECLARE
    v_seq     bigint;
    v_hash    text;
    v_status  text;
    v_new     text;
    v_closed  boolean;
    v_no_trid boolean;
    v_running boolean;
    v_trid    boolean;
    v_final   boolean;
    v_through integer;
    v_vouch   boolean;
    n         integer := 0;
BEGIN
    SELECT r.last_seq, r.last_hash, r.status, r.temporal_run_id IS NULL, r.events_through
      INTO v_seq, v_hash, v_status, v_no_trid, v_through
      FROM runs r WHERE r.run_id = p_run AND r.tenant_id = p_tenant FOR UPDATE;
    IF NOT FOUND THEN
        run_found := false; run_status := ''; appended := 0; was_terminal := false; gap := false;
        RETURN NEXT;
        RETURN;
    END IF;
    v_closed := v_status IN ('succeeded', 'failed', 'cancelled');
    IF p_only_active AND v_closed THEN
        run_found := true; run_status := v_status; appended := 0; was_terminal := true; gap := false;
        RETURN NEXT;
        RETURN;
    END IF;
    -- A suffix (p_after > 0) follows events sent to an earlier carrier:
    -- refused, writing nothing, unless appends that vouched for the whole
    -- prefix (p_through) already logged every event through p_after.
    IF p_after > 0 AND v_through < p_after THEN
        run_found := true; run_status := v_status; appended := 0; was_terminal := v_closed; gap := true;
        RETURN NEXT;
        RETURN;
    END IF;
    v_vouch := p_through > v_through;
    FOR i IN 1 .. coalesce(array_length(p_keys, 1), 0) LOOP
        PERFORM 1 FROM run_events e WHERE e.run_id = p_run AND e.event_key = p_keys[i];
        CONTINUE WHEN FOUND;
        v_seq := v_seq + 1;
        v_new := encode(sha256(convert_to(v_hash, 'UTF8') || p_pres[i] || p_data[i] || p_node_parts[i] || p_run_part
                               || convert_to(v_seq::text || ',"type":"' || p_types[i] || '"}', 'UTF8')), 'hex');
        INSERT INTO run_events (run_id, tenant_id, seq, event_key, type, schema_version, at, node_id, attempt, data, prev_hash, hash)
        VALUES (p_run, p_tenant, v_seq, p_keys[i], p_types[i], p_schema_version, p_ats[i],
                NULLIF(p_nodes[i], ''), NULLIF(p_attempts[i], 0), convert_from(p_data[i], 'UTF8')::jsonb, v_hash, v_new);
        v_hash := v_new;
        n := n + 1;
    END LOOP;
    v_running := p_running_at IS NOT NULL AND v_status = 'queued';
    IF v_running THEN
        v_status := 'running';
    END IF;
    v_trid := p_temporal_run_id <> '' AND v_no_trid;
    v_final := p_final_status <> '' AND v_status NOT IN ('succeeded', 'failed', 'cancelled');
    IF v_running OR v_trid OR v_final THEN
        UPDATE runs SET last_seq = v_seq, last_hash = v_hash,
               status = CASE WHEN v_final THEN p_final_status WHEN v_running THEN 'running' ELSE status END,
               started_at = CASE WHEN v_running THEN COALESCE(started_at, p_running_at) ELSE started_at END,
               temporal_run_id = CASE WHEN v_trid THEN p_temporal_run_id ELSE temporal_run_id END,
               finished_at = CASE WHEN v_final THEN COALESCE(p_final_at, now()) ELSE finished_at END,
               output = CASE WHEN v_final THEN p_output ELSE output END,
               error = CASE WHEN v_final THEN p_error ELSE error END,
               updated_at = CASE WHEN n > 0 OR v_running OR v_final THEN now() ELSE updated_at END,
               events_through = CASE WHEN v_vouch THEN p_through ELSE events_through END
         WHERE run_id = p_run;
    ELSIF n > 0 OR v_vouch THEN
        UPDATE runs SET last_seq = v_seq, last_hash = v_hash,
               updated_at = CASE WHEN n > 0 THEN now() ELSE updated_at END,
               events_through = CASE WHEN v_vouch THEN p_through ELSE events_through END
         WHERE run_id = p_run;
    END IF;
    -- Notify only a run someone streams (see run_event_watches): a
    -- transaction that notifies holds PostgreSQL's cluster-wide notify
    -- lock from its commit's start until its WAL is flushed, so notifying
    -- every append made every append commit one after the other, each
    -- with its own WAL flush. The check runs under the run row lock,
    -- which a watch's registration waits for (FOR SHARE), so an append
    -- either sees the watch or committed before the registration did.
    IF n > 0 AND EXISTS (SELECT 1 FROM run_event_watches w WHERE w.run_id = p_run AND w.expires_at > now()) THEN
        PERFORM pg_notify(p_channel, p_run);
    END IF;
    IF v_final THEN
        v_status := p_final_status;
    END IF;
    run_found := true; run_status := v_status; appended := n; was_terminal := v_closed; gap := false;
    RETURN NEXT;
END
$$;
-- +goose StatementEnd
