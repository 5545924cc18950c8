-- +goose Up
-- lease_epoch fences a run's executions: every acquisition of the lease increments it, and every
-- write an execution makes carries the epoch it acquired. A paused worker whose lease was taken
-- over writes with an old epoch, and its writes are refused instead of landing in a run that
-- another execution continued or finished.
ALTER TABLE runs ADD COLUMN lease_epoch bigint NOT NULL DEFAULT 0;

-- loupe_fence raises LR001 unless execution `epoch` still holds run `run_id`: the epoch matches
-- and, when `active` is set, the run is still running (not cancelled, finished or interrupted).
-- It locks the run's row as an UPDATE would (FOR NO KEY UPDATE), so a takeover or a cancellation
-- waits for the fenced transaction to commit, and the check stays true until the writes it guards
-- are durable. Every fenced transaction takes this lock first, so none waits on a lock upgrade.
-- +goose StatementBegin
CREATE FUNCTION loupe_fence(p_run uuid, p_epoch bigint, p_active boolean) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM 1 FROM runs WHERE id = p_run AND lease_epoch = p_epoch AND (NOT p_active OR status = 'running')
		FOR NO KEY UPDATE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'run % is no longer held by execution %', p_run, p_epoch USING ERRCODE = 'LR001';
	END IF;
END $$;
-- +goose StatementEnd

-- Tool calls that finished after their execution lost the run: what they returned, kept apart
-- from the ledger, which belongs to the execution that holds the run.
CREATE TABLE superseded_tool_calls (
	run_id      uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
	turn        integer NOT NULL,
	ref         text NOT NULL,
	tool        text NOT NULL,
	lease_epoch bigint NOT NULL,
	status      text NOT NULL,
	output      jsonb,
	error       jsonb,
	finished_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX superseded_tool_calls_run ON superseded_tool_calls (run_id);

-- +goose Down
DROP TABLE superseded_tool_calls;
DROP FUNCTION loupe_fence(uuid, bigint, boolean);
ALTER TABLE runs DROP COLUMN lease_epoch;
