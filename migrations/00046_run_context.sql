-- +goose Up
-- context is a run's action context, as Genkit's runAction takes it (its "context": auth and
-- whatever else the caller says about itself): a JSON object the flow reads, kept so that a resume,
-- a takeover and a replay run under the context the run was started with. Numbered 00046 to leave
-- 00045 to the run usage migration of another branch.
ALTER TABLE runs ADD COLUMN context jsonb;

-- +goose Down
ALTER TABLE runs DROP COLUMN context;
