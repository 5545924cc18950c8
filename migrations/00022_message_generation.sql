-- +goose Up
-- generation numbers the generate calls of a run's flow whose messages these are (0 for the first):
-- a flow may call generate more than once, and a run resumed or recovered inside a later call is
-- handed that call's history alone, while the calls before it replay from the ledgers.
ALTER TABLE run_messages ADD COLUMN generation integer NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE run_messages DROP COLUMN generation;
