-- +goose Up
-- Replays (issue 21): a draft replayed against recorded live runs.
--
-- replays is one replay request: the draft it runs, who asked (the actor,
-- tenant name and permission snapshot its simulation runs are enqueued
-- with; never a secret) and the fixtures the request supplies for
-- unrecorded nodes. status is running until every replay_runs row has a
-- verdict. Retention deletes a replay like a run: once it finished before
-- the cut-off (its replay_runs go with it).
CREATE TABLE replays (
    replay_id      text PRIMARY KEY,
    tenant_id      text NOT NULL,
    tenant_name    text NOT NULL DEFAULT '',
    workflow_key   text NOT NULL,
    draft_revision integer NOT NULL,
    status         text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'done')),
    fixtures       jsonb,
    actor          jsonb NOT NULL,
    permissions    text[] NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    finished_at    timestamptz
);
CREATE INDEX replays_list ON replays (tenant_id, workflow_key, created_at DESC, replay_id DESC);
CREATE INDEX replays_finished ON replays (finished_at) WHERE finished_at IS NOT NULL;

-- replay_runs is one recorded live run of a replay and, once compared, its
-- verdict ('' while pending). run_id is not a foreign key: retention may
-- delete the recorded run before the replay, whose verdict stays.
CREATE TABLE replay_runs (
    replay_id         text NOT NULL REFERENCES replays (replay_id) ON DELETE CASCADE,
    tenant_id         text NOT NULL,
    ordinal           integer NOT NULL,
    run_id            text NOT NULL,
    verdict           text NOT NULL DEFAULT '' CHECK (verdict IN ('', 'same', 'output-changed', 'path-changed',
                          'now-fails', 'now-succeeds', 'not-replayable')),
    reason            text NOT NULL DEFAULT '',
    simulation_run_id text NOT NULL DEFAULT '',
    recorded_status   text NOT NULL DEFAULT '',
    simulated_status  text NOT NULL DEFAULT '',
    diff              jsonb,
    finished_at       timestamptz,
    PRIMARY KEY (replay_id, run_id)
);

-- +goose Down
DROP TABLE replay_runs;
DROP TABLE replays;
