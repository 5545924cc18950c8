-- +goose Up
-- The action catalogue: which programs sharing this database can execute which actions. Every run
-- service with workers announces itself (one row per process in action_catalogue_workers) and its
-- actions (one row per program and action in action_catalogue) at start and on a heartbeat, and
-- removes its process row when it stops. An entry is live until its expires_at; a program's
-- action rows outlive its processes, so that a run waiting for an action can say when a worker
-- for it was last seen.
CREATE TABLE action_catalogue_workers (
    instance   text PRIMARY KEY,
    program    text        NOT NULL,
    queue      text        NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    seen_at    timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE INDEX action_catalogue_workers_program_idx ON action_catalogue_workers (program, expires_at);

CREATE TABLE action_catalogue (
    key         text        NOT NULL,
    program     text        NOT NULL,
    -- queue is the River queue the program's workers work.
    queue       text        NOT NULL,
    -- description is the action as GET /api/v1/actions shows it (engine.ActionDesc): name, type,
    -- description and JSON schemas, tools' included, so that other programs validate against it.
    description jsonb       NOT NULL,
    seen_at     timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (key, program)
);

-- +goose Down
DROP TABLE action_catalogue;
DROP TABLE action_catalogue_workers;
