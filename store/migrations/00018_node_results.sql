-- +goose Up
-- Recordings of live runs (issue 21).
--
-- A node's value reaches its event inline up to 6 KiB
-- (execution.MaxEventValueBytes) and is claim-checked into run_values
-- above 32 KiB; in between the event says only truncated and outputSize.
-- node_results keeps exactly those values, for live runs, one row per node
-- attempt that produced one, so every live result stays recoverable for as
-- long as its run (retention deletes the rows with the run). Values are
-- redacted like event data. redispatch is the attempt's re-dispatch count
-- (execution.NodeInput.Redispatch): a later dispatch of the same attempt
-- overwrites an earlier one's row, never the reverse, so a zombie attempt
-- finishing late cannot replace the result the interpreter accepted.
CREATE TABLE node_results (
    tenant_id  text NOT NULL,
    run_id     text NOT NULL,
    node_id    text NOT NULL,
    attempt    integer NOT NULL,
    redispatch integer NOT NULL DEFAULT 0,
    port       text NOT NULL,
    value      jsonb NOT NULL,
    size       integer NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, run_id, node_id, attempt)
);

-- +goose Down
DROP TABLE node_results;
