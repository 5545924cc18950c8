-- +goose Up
-- waited_ms is how long a run has waited for reviewers, in its finished waits: a resume (or a
-- cancel) of an interrupted run adds the time since it stopped to wait. The runs list shows it
-- apart from the time the run ran, and sorts on both.
ALTER TABLE runs ADD COLUMN waited_ms bigint NOT NULL DEFAULT 0;

-- The runs list sorts by tokens and by turns with keyset paging, newest id breaking ties.
CREATE INDEX runs_tokens ON runs ((input_tokens + output_tokens), id);
CREATE INDEX runs_turns ON runs (turns, id);

-- +goose Down
DROP INDEX runs_turns;
DROP INDEX runs_tokens;
ALTER TABLE runs DROP COLUMN waited_ms;
