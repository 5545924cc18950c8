-- River's job queue schema, version 003 (river job tags non null), from github.com/riverqueue/river v0.51.2's
-- rivermigrate, so that goose owns the whole schema. River's version 001 only creates rivermigrate's
-- own bookkeeping table, which goose replaces.
-- +goose Up
-- +goose StatementBegin
ALTER TABLE river_job ALTER COLUMN tags SET DEFAULT '{}';
UPDATE river_job SET tags = '{}' WHERE tags IS NULL;
ALTER TABLE river_job ALTER COLUMN tags SET NOT NULL;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
ALTER TABLE river_job
    ALTER COLUMN tags DROP NOT NULL,
    ALTER COLUMN tags DROP DEFAULT;
-- +goose StatementEnd
