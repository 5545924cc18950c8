-- River's job queue schema, version 008 (job id autoincrement), from github.com/riverqueue/river v0.51.2's
-- rivermigrate, so that goose owns the whole schema. River's version 001 only creates rivermigrate's
-- own bookkeeping table, which goose replaces.
-- +goose Up
-- +goose StatementBegin
-- No-op. Postgres sequences already prevent automatically generated job IDs
-- from being reused.
SELECT 1;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
-- No-op. Postgres sequences already prevent automatically generated job IDs
-- from being reused.
SELECT 1;
-- +goose StatementEnd
