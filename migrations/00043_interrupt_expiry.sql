-- +goose Up
-- expires_at is when a policy's deadline decides a pending interrupt nobody decided (deny: fail
-- safe); the recovery sweep applies it, through the same exactly-once resolution as a reviewer's.
ALTER TABLE interrupts ADD COLUMN expires_at timestamptz;
CREATE INDEX interrupts_expiry_idx ON interrupts (expires_at) WHERE status = 'pending' AND expires_at IS NOT NULL;

-- +goose Down
DROP INDEX interrupts_expiry_idx;
ALTER TABLE interrupts DROP COLUMN expires_at;
