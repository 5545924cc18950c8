-- +goose Up
-- Approval routing (README, "Approval policies"): a user belongs to named groups, which a policy
-- rule may require of the reviewers who decide an interrupt (role: and group: on the rule, kept
-- in the interrupt's policy record, checked by every resolution, and read by the inbox's
-- "for me" filter).
ALTER TABLE users ADD COLUMN groups text[] NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE users DROP COLUMN groups;
