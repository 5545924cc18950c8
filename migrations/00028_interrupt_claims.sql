-- +goose Up
-- A reviewer claims a pending interrupt (or is assigned it) so that two reviewers do not work on
-- the same one: while claimed_by is someone else, the inbox refuses their decision on it. The
-- history view reads resolved interrupts newest first.
ALTER TABLE interrupts ADD COLUMN claimed_by text, ADD COLUMN claimed_at timestamptz;
CREATE INDEX interrupts_resolved_idx ON interrupts (resolved_at DESC, id DESC) WHERE status <> 'pending';

-- +goose Down
DROP INDEX interrupts_resolved_idx;
ALTER TABLE interrupts DROP COLUMN claimed_at, DROP COLUMN claimed_by;
