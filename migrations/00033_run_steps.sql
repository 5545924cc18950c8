-- +goose Up
-- run_steps is a durable flow's journal: one row per op the flow's code made, in its order (seq):
-- a step (loupe.Run) with its result or error, or a generate call with its final response. A
-- re-execution of the flow (resume, takeover) serves the ops recorded here instead of running
-- them again, and fails with a non-determinism error when the flow makes another op at a seq.
CREATE TABLE run_steps (
    run_id      uuid        NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq         integer     NOT NULL,
    kind        text        NOT NULL CHECK (kind IN ('step', 'generate')),
    name        text        NOT NULL DEFAULT '',
    -- generation is a generate op's call number among the flow's generate calls.
    generation  integer,
    output      jsonb,
    error       jsonb,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, seq)
);

-- +goose Down
DROP TABLE run_steps;
