-- +goose Up
-- The sessions page reads each session's runs from the index alone.
CREATE INDEX traces_session_runs ON traces (session, run_id) WHERE session IS NOT NULL AND run_id IS NOT NULL;

-- +goose Down
DROP INDEX traces_session_runs;
