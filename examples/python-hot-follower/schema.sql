-- The hot follower's fenced writes (examples/python-hot-follower), after pgleader migrate.
CREATE TABLE IF NOT EXISTS hot_writes (
    id      bigserial PRIMARY KEY,
    scope   text NOT NULL,
    epoch   bigint NOT NULL,
    replica text NOT NULL,
    seq     bigint NOT NULL,
    at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
