-- +goose Up
-- Each interpreter event carried once (interpreter version 7). An attempt
-- used to carry every event not yet known to be in the log, so a chain of
-- read actions, whose attempts answer before their appends commit, sent
-- most events several times. From version 7 an attempt may carry only
-- the events no earlier carrier was given (a suffix); such an append is
-- safe only once the events before it are in the log, which this checks.
--
-- runs.events_through is the interpreter ordinal through which appends
-- have vouched that the run's log holds every event: a carried append
-- gives its batch's last ordinal (p_through) when it holds the whole
-- unconfirmed prefix, or when it is a suffix that passed the check; the
-- row keeps the highest. A flush (a local activity of a workflow task that
-- may yet fail and be executed again, numbering its events otherwise)
-- never vouches, nor does a worker of an earlier release (00023's
-- signature, untouched): both only make the column lag, which refuses
-- more suffixes, never fewer.
--
-- weft_append_events' third signature is 00025's with p_after and
-- p_through: p_after > 0 makes the call a suffix, refused (gap, nothing
-- written, no row version) unless events_through >= p_after; it then does
-- exactly what 00025's does, and advances events_through to p_through in
-- the same UPDATE of the run row. Down drops the signature and the column.
ALTER TABLE runs ADD COLUMN events_through integer NOT NULL DEFAULT 0;

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
    IF n > 0 THEN
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
DROP FUNCTION weft_append_events(text, text, boolean, integer, text[], text[], text[], integer[], timestamptz[], bytea[],
    bytea[], bytea[], bytea, timestamptz, text, text, text, jsonb, jsonb, timestamptz, integer, integer);
ALTER TABLE runs DROP COLUMN events_through;
