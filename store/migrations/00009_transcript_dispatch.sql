-- +goose Up
-- An attempt re-dispatched after an infrastructure fault (a lost worker
-- lease) keeps its attempt number; agent_transcripts.dispatch counts the
-- re-dispatches so that a save from the earlier dispatch, still running on
-- a worker presumed lost, is refused as stale (store.SaveAgentTranscript).
ALTER TABLE agent_transcripts ADD COLUMN dispatch int NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE agent_transcripts DROP COLUMN dispatch;
