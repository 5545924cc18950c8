-- +goose Up
-- A run is executed by one worker at a time: the worker holds a lease that it renews while it
-- works. A job that River rescues, or re-enqueued by the recovery sweep, waits for the lease to
-- expire, so a run never has two live executors, and a dead executor's run is taken over quickly.
ALTER TABLE runs
    ADD COLUMN lease_owner      text,
    ADD COLUMN lease_expires_at timestamptz,
    ADD COLUMN resumes          integer NOT NULL DEFAULT 0,
    -- resume_span_id is the span of the turn that was interrupted: the resumed execution continues
    -- the same trace under it, with a link to it.
    ADD COLUMN resume_span_id   text;

CREATE INDEX runs_running_lease_idx ON runs (lease_expires_at) WHERE status = 'running';

-- +goose Down
DROP INDEX runs_running_lease_idx;
ALTER TABLE runs DROP COLUMN lease_owner, DROP COLUMN lease_expires_at, DROP COLUMN resumes, DROP COLUMN resume_span_id;
