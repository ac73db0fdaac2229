-- +goose Up
-- A replay's workflow start, once issued, is noted (started_at), so the
-- replay sweeper re-issues only the starts that were lost (the API died
-- between storing the replay and starting it) instead of every replay
-- still running a minute after it was stored.
ALTER TABLE replays ADD COLUMN started_at timestamptz;
CREATE INDEX replays_unstarted ON replays (created_at) WHERE started_at IS NULL AND status = 'running';

-- +goose Down
DROP INDEX replays_unstarted;
ALTER TABLE replays DROP COLUMN started_at;
