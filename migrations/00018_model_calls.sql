-- +goose Up
-- model_calls: the ledger of model responses, one per run and turn, written before the turn's tools
-- run. A run taken over after a crash replays the recorded response instead of calling the model
-- again, so the same tool requests (same refs) come back and completed tools are reused. Exact
-- replay serves the original run's responses from here too.
CREATE TABLE model_calls (
    run_id     uuid        NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    turn       integer     NOT NULL,
    model      text        NOT NULL,
    request    json        NOT NULL, -- json, not jsonb: the whole history, read back whole
    response   jsonb       NOT NULL,
    latency_ms double precision NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, turn)
);

-- +goose Down
DROP TABLE model_calls;
