-- +goose Up
-- Human approval (issue 18).
--
-- approval_decisions holds each decision weft's API makes on behalf of an
-- authorized caller, stored before the approve update is sent: the
-- interpreter reads it back by id (the LoadDecision local activity) and
-- believes the actor only then; an update without one is an operator's.
CREATE TABLE approval_decisions (
    decision_id text PRIMARY KEY,
    tenant_id   text NOT NULL,
    run_id      text NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    node_id     text NOT NULL,
    request     integer NOT NULL,
    decision    text NOT NULL CHECK (decision IN ('approve', 'reject')),
    actor       jsonb NOT NULL,
    comment     text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX approval_decisions_run ON approval_decisions (run_id);

-- approvals is every approval request of every run, projected from the
-- event log as it is appended (the trigger below), whoever appends:
-- node.approval.requested opens a pending row, node.approval.decided and
-- node.approval.timed_out settle it, and a wait ended by the run's end
-- (node.cancel.acknowledged of the node, or the run's terminal event)
-- cancels it. GET /v1/approvals lists it; the log stays the truth.
CREATE TABLE approvals (
    tenant_id     text NOT NULL,
    run_id        text NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    node_id       text NOT NULL,
    request       integer NOT NULL,
    status        text NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'timed_out', 'cancelled')),
    attempt       integer,
    timeout_ms    bigint NOT NULL,
    call          jsonb,
    requested_at  timestamptz NOT NULL,
    deadline_at   timestamptz,
    decided_at    timestamptz,
    decision      text,
    actor         jsonb,
    comment       text,
    requested_seq bigint NOT NULL,
    PRIMARY KEY (run_id, node_id, request)
);
CREATE INDEX approvals_tenant ON approvals (tenant_id, requested_at DESC, run_id, node_id, request);
CREATE INDEX approvals_pending ON approvals (tenant_id, requested_at DESC, run_id, node_id, request) WHERE status = 'pending';

-- +goose StatementBegin
CREATE FUNCTION weft_project_approval() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.type = 'node.approval.requested' THEN
        INSERT INTO approvals (tenant_id, run_id, node_id, request, status, attempt, timeout_ms, call,
                               requested_at, deadline_at, requested_seq)
        VALUES (NEW.tenant_id, NEW.run_id, NEW.node_id, (NEW.data->>'request')::integer, 'pending', NEW.attempt,
                COALESCE((NEW.data->>'timeoutMs')::bigint, 0), NEW.data->'call', NEW.at,
                (NEW.data->>'deadlineAt')::timestamptz, NEW.seq)
        ON CONFLICT DO NOTHING;
    ELSIF NEW.type = 'node.approval.decided' THEN
        UPDATE approvals
           SET status = CASE NEW.data->>'decision' WHEN 'approve' THEN 'approved' ELSE 'rejected' END,
               decided_at = NEW.at, decision = NEW.data->>'decision', actor = NEW.data->'actor',
               comment = NEW.data->>'comment'
         WHERE run_id = NEW.run_id AND node_id = NEW.node_id AND request = (NEW.data->>'request')::integer;
    ELSIF NEW.type = 'node.approval.timed_out' THEN
        UPDATE approvals SET status = 'timed_out', decided_at = NEW.at
         WHERE run_id = NEW.run_id AND node_id = NEW.node_id AND request = (NEW.data->>'request')::integer;
    ELSIF NEW.type = 'node.cancel.acknowledged' THEN
        UPDATE approvals SET status = 'cancelled', decided_at = NEW.at
         WHERE run_id = NEW.run_id AND node_id = NEW.node_id AND status = 'pending';
    ELSE -- the run's terminal event
        UPDATE approvals SET status = 'cancelled', decided_at = NEW.at
         WHERE run_id = NEW.run_id AND status = 'pending';
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER run_events_approvals AFTER INSERT ON run_events FOR EACH ROW
    WHEN (NEW.type IN ('node.approval.requested', 'node.approval.decided', 'node.approval.timed_out',
                       'node.cancel.acknowledged', 'run.succeeded', 'run.failed', 'run.cancelled'))
    EXECUTE FUNCTION weft_project_approval();

-- +goose Down
DROP TRIGGER run_events_approvals ON run_events;
DROP FUNCTION weft_project_approval();
DROP TABLE approvals;
DROP TABLE approval_decisions;
