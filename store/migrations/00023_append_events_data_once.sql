-- +goose Up
-- weft_append_events, second signature: each event's data crosses the wire
-- once, and what every event of a call shares, once per call. The first
-- signature (migration 00012) took the data twice, as the jsonb to store
-- and inside the canonical head it hashes, and the run id and the type
-- again inside the head and tail. Here the caller (store.AppendEvents)
-- sends the canonical form in pieces around what the database has or
-- assigns: canonical(event) = pre || data || node || run || seq || type,
-- where pre is `{"at":...,"attempt":N,"data":`, data the event's canonical
-- JSON (stored as jsonb), node `,"nodeId":"..."`, run (one per call)
-- `,"runId":"...","schemaVersion":N,"seq":`, and the type member
-- `,"type":"<type>"}` is written here: an event type is dotted lowercase
-- names (store.prepareEvents refuses any other), whose canonical JSON
-- string is the type in quotes. The hash is the same
-- sha256(prev_hash || canonical(event)) that store.VerifyChain recomputes,
-- and everything else (the row lock,
-- keys the run holds skipped, the move to running, the forward-only
-- terminal projection, the stream wake-up) is 00012's, statement for
-- statement.
--
-- The first signature stays: a worker of the previous release, still
-- running during a rolling deploy, calls it, and both write the same rows
-- and chain. A later migration drops it once no release calls it.
-- +goose StatementBegin
CREATE FUNCTION weft_append_events(
    p_run text, p_tenant text, p_only_active boolean, p_schema_version integer,
    p_keys text[], p_types text[], p_nodes text[], p_attempts integer[], p_ats timestamptz[], p_data bytea[],
    p_pres bytea[], p_node_parts bytea[], p_run_part bytea, p_running_at timestamptz, p_temporal_run_id text, p_channel text,
    p_final_status text, p_output jsonb, p_error jsonb, p_final_at timestamptz)
RETURNS TABLE (run_found boolean, run_status text, appended integer, was_terminal boolean)
LANGUAGE plpgsql AS $$
DECLARE
    v_seq    bigint;
    v_hash   text;
    v_status text;
    v_new    text;
    v_closed boolean;
    n        integer := 0;
BEGIN
    SELECT r.last_seq, r.last_hash, r.status INTO v_seq, v_hash, v_status
      FROM runs r WHERE r.run_id = p_run AND r.tenant_id = p_tenant FOR UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT false, ''::text, 0, false;
        RETURN;
    END IF;
    v_closed := v_status IN ('succeeded', 'failed', 'cancelled');
    IF p_only_active AND v_closed THEN
        RETURN QUERY SELECT true, v_status, 0, true;
        RETURN;
    END IF;
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
    IF n > 0 THEN
        UPDATE runs SET last_seq = v_seq, last_hash = v_hash, updated_at = now() WHERE run_id = p_run;
        PERFORM pg_notify(p_channel, p_run);
    END IF;
    IF p_running_at IS NOT NULL AND v_status = 'queued' THEN
        UPDATE runs SET status = 'running', started_at = COALESCE(started_at, p_running_at), updated_at = now()
         WHERE run_id = p_run;
        v_status := 'running';
    END IF;
    IF p_temporal_run_id <> '' THEN
        UPDATE runs SET temporal_run_id = p_temporal_run_id WHERE run_id = p_run AND temporal_run_id IS NULL;
    END IF;
    IF p_final_status <> '' AND v_status NOT IN ('succeeded', 'failed', 'cancelled') THEN
        UPDATE runs SET status = p_final_status, finished_at = COALESCE(p_final_at, now()), output = p_output,
               error = p_error, updated_at = now()
         WHERE run_id = p_run;
        v_status := p_final_status;
    END IF;
    RETURN QUERY SELECT true, v_status, n, v_closed;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION weft_append_events(text, text, boolean, integer, text[], text[], text[], integer[], timestamptz[],
    bytea[], bytea[], bytea[], bytea, timestamptz, text, text, text, jsonb, jsonb, timestamptz);
