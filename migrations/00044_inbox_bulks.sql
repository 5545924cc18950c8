-- +goose Up
-- inbox_bulks is one bulk decision of the inbox (approve or deny the selected items): its result
-- page is read from here, so that the POST can redirect to a GET that a reload does not re-post,
-- and so that the script can apply it a slice at a time and show progress. Each item is still
-- resolved through the interrupt's own exactly-once path; this only says what became of it.
CREATE TABLE inbox_bulks (
    id          uuid        PRIMARY KEY,
    actor       text        NOT NULL,
    action      text        NOT NULL CHECK (action IN ('approve', 'deny')),
    reason      text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE inbox_bulk_items (
    bulk_id      uuid        NOT NULL REFERENCES inbox_bulks (id) ON DELETE CASCADE,
    pos          integer     NOT NULL,
    interrupt_id uuid        NOT NULL,
    -- started_at is set when a step takes the item, so that two steps never apply it twice.
    started_at   timestamptz,
    done_at      timestamptz,
    ok           boolean     NOT NULL DEFAULT false,
    status       text        NOT NULL DEFAULT '',
    tool         text        NOT NULL DEFAULT '',
    run_id       uuid,
    message      text        NOT NULL DEFAULT '',
    PRIMARY KEY (bulk_id, pos)
);

-- +goose Down
DROP TABLE inbox_bulk_items;
DROP TABLE inbox_bulks;
