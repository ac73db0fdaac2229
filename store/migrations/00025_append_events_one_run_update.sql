-- +goose Up
-- weft_append_events (its second signature, migration 00023) with the
-- same arguments, rows, chain and answers, and one UPDATE of the run row
-- per call instead of up to four. 00023's body updated the row once for
-- the chain head, then again for the move to running, the Temporal run id
-- and the terminal projection: each a statement the executor starts and
-- ends, a new version of the row (runs rows are wide: input, actor,
-- permissions) and its WAL. Here the chain head and whatever of the three
-- applies go into one UPDATE (each as before: running only from queued,
-- the Temporal run id only where the row has none, the terminal status
-- only over an open run, updated_at when anything but the Temporal run
-- id changes); a call that only advances the chain head updates just
-- those columns, so runs_slot_freed (AFTER UPDATE OF status) is not even
-- considered. The answer row is returned without a query (RETURN NEXT).
-- The events' loop is 00023's, statement for statement: the key probe and
-- the INSERT per event are each an index lookup and one row (a set-based
-- probe and one INSERT of the batch, tried, cost as much or more: see
-- docs/benchmarks.md, session 10), and the per-row triggers on run_events
-- (the foreign key, the approvals projection) fire in the same order.
-- runs_slot_freed sees the same transition: a queued run settled in one
-- call moves queued -> terminal, as the two UPDATEs it replaces did
-- between them.
--
-- The signature is 00023's, so a worker of the previous release, still
-- running during a rolling deploy, gets the same answers from it; 00012's
-- first signature is untouched. Down restores 00023's body.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION weft_append_events(
    p_run text, p_tenant text, p_only_active boolean, p_schema_version integer,
    p_keys text[], p_types text[], p_nodes text[], p_attempts integer[], p_ats timestamptz[], p_data bytea[],
    p_pres bytea[], p_node_parts bytea[], p_run_part bytea, p_running_at timestamptz, p_temporal_run_id text, p_channel text,
    p_final_status text, p_output jsonb, p_error jsonb, p_final_at timestamptz)
RETURNS TABLE (run_found boolean, run_status text, appended integer, was_terminal boolean)
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
    n         integer := 0;
BEGIN
    SELECT r.last_seq, r.last_hash, r.status, r.temporal_run_id IS NULL INTO v_seq, v_hash, v_status, v_no_trid
      FROM runs r WHERE r.run_id = p_run AND r.tenant_id = p_tenant FOR UPDATE;
    IF NOT FOUND THEN
        run_found := false; run_status := ''; appended := 0; was_terminal := false;
        RETURN NEXT;
        RETURN;
    END IF;
    v_closed := v_status IN ('succeeded', 'failed', 'cancelled');
    IF p_only_active AND v_closed THEN
        run_found := true; run_status := v_status; appended := 0; was_terminal := true;
        RETURN NEXT;
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
               updated_at = CASE WHEN n > 0 OR v_running OR v_final THEN now() ELSE updated_at END
         WHERE run_id = p_run;
    ELSIF n > 0 THEN
        UPDATE runs SET last_seq = v_seq, last_hash = v_hash, updated_at = now() WHERE run_id = p_run;
    END IF;
    IF n > 0 THEN
        PERFORM pg_notify(p_channel, p_run);
    END IF;
    IF v_final THEN
        v_status := p_final_status;
    END IF;
    run_found := true; run_status := v_status; appended := n; was_terminal := v_closed;
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
