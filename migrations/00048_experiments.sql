-- +goose Up
-- Datasets and experiments (DESIGN.md, "Evaluate").
--
-- A dataset is versioned: every change (examples added, edited, deleted) makes a new version, and an
-- example row belongs to the versions [added_in, removed_in). Editing an example removes its row from
-- the new version and adds a new row with the same key, so an experiment that ran version 3 keeps
-- the exact examples of version 3, and experiments over different versions line up by key.
CREATE TABLE datasets (
    id          uuid PRIMARY KEY,
    name        text        NOT NULL UNIQUE CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$'),
    description text        NOT NULL DEFAULT '',
    version     int         NOT NULL DEFAULT 0,
    created_by  text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE dataset_examples (
    id            uuid PRIMARY KEY,
    dataset_id    uuid        NOT NULL REFERENCES datasets (id) ON DELETE CASCADE,
    key           uuid        NOT NULL,
    added_in      int         NOT NULL,
    removed_in    int,
    input         jsonb       NOT NULL,
    reference     jsonb,
    tags          text[]      NOT NULL DEFAULT '{}',
    -- The run the example came from: its recording (model calls, tool ledger, reviewers' decisions)
    -- serves an experiment's tools.
    source_run_id uuid        REFERENCES runs (id) ON DELETE SET NULL,
    created_by    text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    CHECK (removed_in IS NULL OR removed_in > added_in)
);

CREATE INDEX dataset_examples_key_idx ON dataset_examples (dataset_id, key);
CREATE UNIQUE INDEX dataset_examples_current_key ON dataset_examples (dataset_id, key) WHERE removed_in IS NULL;

-- An experiment runs an action over one version of a dataset and scores each example's run.
CREATE TABLE experiments (
    id               uuid PRIMARY KEY,
    name             text        NOT NULL,
    dataset_id       uuid        NOT NULL REFERENCES datasets (id) ON DELETE CASCADE,
    dataset_version  int         NOT NULL,
    action           text        NOT NULL,
    evaluators       text[]      NOT NULL,
    tools            text        NOT NULL CHECK (tools IN ('recorded', 'live')),
    overrides        jsonb,
    concurrency      int         NOT NULL CHECK (concurrency BETWEEN 1 AND 256),
    baseline_id      uuid        REFERENCES experiments (id) ON DELETE SET NULL,
    status           text        NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'finished', 'cancelled')),
    total            int         NOT NULL,
    -- The process driving the experiment (starting its runs, scoring them), until lease_expires_at;
    -- another takes over after it.
    lease_owner      text,
    lease_expires_at timestamptz,
    created_by       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz
);

CREATE INDEX experiments_dataset_idx ON experiments (dataset_id, created_at DESC);
CREATE INDEX experiments_running_idx ON experiments (lease_expires_at) WHERE status = 'running';

-- One row per example of an experiment: pending, then its run, then scored.
CREATE TABLE experiment_results (
    experiment_id uuid        NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    example_id    uuid        NOT NULL REFERENCES dataset_examples (id) ON DELETE CASCADE,
    example_key   uuid        NOT NULL,
    ord           int         NOT NULL,
    status        text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'running', 'scored')),
    run_id        uuid        REFERENCES runs (id) ON DELETE SET NULL,
    -- What the run ended as, copied when it was scored (the run may be deleted later).
    run_status    text,
    output        jsonb,
    error         text,
    latency_ms    bigint,
    input_tokens  bigint,
    output_tokens bigint,
    cost_usd      double precision,
    scored_at     timestamptz,
    PRIMARY KEY (experiment_id, example_id)
);

CREATE INDEX experiment_results_status_idx ON experiment_results (experiment_id, status, ord);
CREATE UNIQUE INDEX experiment_results_run_idx ON experiment_results (run_id) WHERE run_id IS NOT NULL;

CREATE TABLE experiment_scores (
    experiment_id uuid             NOT NULL,
    example_id    uuid             NOT NULL,
    evaluator     text             NOT NULL,
    score         double precision,
    pass          boolean          NOT NULL,
    explanation   text             NOT NULL DEFAULT '',
    trace_id      text,
    PRIMARY KEY (experiment_id, example_id, evaluator),
    FOREIGN KEY (experiment_id, example_id) REFERENCES experiment_results (experiment_id, example_id) ON DELETE CASCADE
);

-- A re-execution may serve its tools from the recording of its source run ("recorded": matched by
-- tool and input, since a live model's call refs differ), and apply its reviewers' decisions:
-- what an experiment's runs do so that they never repeat an effect.
ALTER TABLE run_replays DROP CONSTRAINT run_replays_tools_check;
ALTER TABLE run_replays DROP CONSTRAINT run_replays_check;
ALTER TABLE run_replays DROP CONSTRAINT run_replays_check1;
ALTER TABLE run_replays ADD CONSTRAINT run_replays_tools_check CHECK (tools IN ('live', 'cassette', 'recorded'));
ALTER TABLE run_replays ADD CONSTRAINT run_replays_modes_check CHECK (
    (tools <> 'cassette' OR mode = 'exact') AND (tools <> 'recorded' OR mode = 'rerun')
    AND (apply_resolutions = false OR mode = 'exact' OR tools = 'recorded'));

-- +goose Down
DELETE FROM run_replays WHERE tools = 'recorded';
ALTER TABLE run_replays DROP CONSTRAINT run_replays_modes_check;
ALTER TABLE run_replays DROP CONSTRAINT run_replays_tools_check;
ALTER TABLE run_replays ADD CONSTRAINT run_replays_tools_check CHECK (tools IN ('live', 'cassette'));
ALTER TABLE run_replays ADD CONSTRAINT run_replays_check CHECK (apply_resolutions = false OR mode = 'exact');
ALTER TABLE run_replays ADD CONSTRAINT run_replays_check1 CHECK (tools = 'live' OR mode = 'exact');
DROP TABLE experiment_scores;
DROP TABLE experiment_results;
DROP TABLE experiments;
DROP TABLE dataset_examples;
DROP TABLE datasets;
