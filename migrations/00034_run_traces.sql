-- +goose Up
-- run_traces links a run to the trace of each of its executions that another program recorded (a
-- Genkit app's: Loupe learns its id when it calls the app), for the programs whose spans carry no
-- loupe.run.id (Genkit Go's root spans take no telemetry labels). execution counts from 1.
CREATE TABLE run_traces (
    run_id      uuid        NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    trace_id    text        NOT NULL CHECK (trace_id ~ '^[0-9a-f]{32}$'),
    execution   integer     NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, trace_id)
);
CREATE INDEX run_traces_trace_idx ON run_traces (trace_id);

-- +goose Down
DROP TABLE run_traces;
