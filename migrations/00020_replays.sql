-- +goose Up
-- run_replays: how a replay, re-execution or fork was asked for, one row per derived run. The
-- lineage itself (replay_of, replay_mode, fork_of, fork_turn) lives on runs; this row holds what
-- the worker needs to execute the run the same way after a resume or a takeover (tool mode,
-- recorded resolutions, overrides), the edits a fork applied, and the first divergence an exact
-- replay found.
CREATE TABLE run_replays (
    run_id            uuid PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    source_run_id     uuid REFERENCES runs (id) ON DELETE SET NULL,
    mode              text        NOT NULL CHECK (mode IN ('exact', 'rerun', 'fork')),
    tools             text        NOT NULL DEFAULT 'live' CHECK (tools IN ('live', 'cassette')),
    apply_resolutions boolean     NOT NULL DEFAULT false,
    overrides         jsonb,
    edits             jsonb,
    divergence        jsonb,
    created_at        timestamptz NOT NULL DEFAULT now(),
    CHECK (apply_resolutions = false OR mode = 'exact'),
    CHECK (tools = 'live' OR mode = 'exact')
);

CREATE INDEX run_replays_source_idx ON run_replays (source_run_id);

-- A replayed interrupt offers the original reviewer's decision as the default; it is applied only
-- when an exact replay asked for the recorded resolutions.
ALTER TABLE interrupts ADD COLUMN suggested_resolution jsonb;

-- Cassette-mode replays serve a tool's recorded output instead of running it.
ALTER TABLE tool_calls DROP CONSTRAINT tool_calls_source_check;
ALTER TABLE tool_calls ADD CONSTRAINT tool_calls_source_check
    CHECK (source IN ('executed', 'reexecuted', 'reused', 'reviewer', 'cassette'));

-- +goose Down
UPDATE tool_calls SET source = 'reused' WHERE source = 'cassette';
ALTER TABLE tool_calls DROP CONSTRAINT tool_calls_source_check;
ALTER TABLE tool_calls ADD CONSTRAINT tool_calls_source_check
    CHECK (source IN ('executed', 'reexecuted', 'reused', 'reviewer'));
ALTER TABLE interrupts DROP COLUMN suggested_resolution;
DROP TABLE run_replays;
