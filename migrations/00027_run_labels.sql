-- +goose Up
-- labels are attributes a run's root span carries, as Genkit's telemetryLabels: the genkit CLI's
-- flow:batchRun --label b1 labels each run it starts (batchRun=b1), and eval:extractData finds them
-- by that label.
ALTER TABLE runs ADD COLUMN labels jsonb;

-- +goose Down
ALTER TABLE runs DROP COLUMN labels;
