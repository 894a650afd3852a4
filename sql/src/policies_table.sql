-- sql/src/policies_table.sql
--
-- The named policies: rate and burst stored once, used by calls that give
-- only a name, a key and a cost.  :rl_policies is the table (native:
-- ratelimit.policies; portable: rl_policies in the limiter's schema); the
-- router makes its row type rate_limit_policy from it.  Every operator is
-- qualified and every literal exactly typed, so that nothing in the schema
-- the limiter is installed into can be bound in its place.  Periods count in
-- seconds as date_part('epoch', ...) counts them.  A concurrency limit
-- (kind 'concurrency', defined by rate_limit_define_concurrency) holds at
-- most burst places at once per key, until the transaction ends or, with a
-- lease, until it expires; its bucket options keep their defaults.  A
-- sliding window (kind 'sliding', defined by
-- rate_limit_define_sliding_window) admits at most burst (= rate) in any
-- window of per, estimated from the window before and this one; its bucket
-- options keep their defaults too.  Who may read or write it,
-- its comment and whether pg_dump keeps it are each target's own.
\ir kind_check.sql
CREATE TABLE :rl_policies (
    name              text COLLATE pg_catalog."C" NOT NULL,
    rate              float8 NOT NULL,
    per               interval NOT NULL,
    burst             float8 NOT NULL,
    tokens_per_second float8 NOT NULL
        GENERATED ALWAYS AS (rate OPERATOR(pg_catalog./) pg_catalog.date_part('epoch', per)) STORED,
    initial           float8,
    jitter            float8 NOT NULL DEFAULT '0'::float8,
    fixed_window      boolean NOT NULL DEFAULT false,
    window_start      interval,
    window_us         bigint NOT NULL
        GENERATED ALWAYS AS (pg_catalog.round(pg_catalog.date_part('epoch', per)
                                              OPERATOR(pg_catalog.*) '1000000'::float8)::bigint) STORED,
    window_start_us   bigint
        GENERATED ALWAYS AS (pg_catalog.round(pg_catalog.date_part('epoch', window_start)
                                              OPERATOR(pg_catalog.*) '1000000'::float8)::bigint) STORED,
    floor_rate        float8 NOT NULL DEFAULT '0'::float8,
    floor_per_second  float8 NOT NULL
        GENERATED ALWAYS AS (floor_rate OPERATOR(pg_catalog./) pg_catalog.date_part('epoch', per)) STORED,
    shards            integer NOT NULL DEFAULT 1,
    max_reserved      float8 NOT NULL DEFAULT '0'::float8,
    penalty           interval,
    penalty_us        bigint
        GENERATED ALWAYS AS (pg_catalog.round(pg_catalog.date_part('epoch', penalty)
                                              OPERATOR(pg_catalog.*) '1000000'::float8)::bigint) STORED,
    storage           text COLLATE pg_catalog."C" NOT NULL DEFAULT 'table'::text,
    enforce           boolean NOT NULL DEFAULT true,
    kind              text COLLATE pg_catalog."C" NOT NULL DEFAULT 'bucket'::text,
    lease             interval,
    lease_us          bigint
        GENERATED ALWAYS AS (pg_catalog.round(pg_catalog.date_part('epoch', lease)
                                              OPERATOR(pg_catalog.*) '1000000'::float8)::bigint) STORED,
    PRIMARY KEY (name),
    CONSTRAINT policies_name_check CHECK (pg_catalog.octet_length(name) OPERATOR(pg_catalog.>=) 1
                                          AND pg_catalog.octet_length(name) OPERATOR(pg_catalog.<=) :rl_max_name_bytes),
    CONSTRAINT policies_rate_check CHECK (rate OPERATOR(pg_catalog.>=) '0'::float8
                                          AND rate OPERATOR(pg_catalog.<) 'Infinity'::float8),
    CONSTRAINT policies_per_check CHECK (window_us OPERATOR(pg_catalog.>=) '1'::bigint),
    CONSTRAINT policies_burst_check CHECK (burst OPERATOR(pg_catalog.>) '0'::float8
                                           AND burst OPERATOR(pg_catalog.<) 'Infinity'::float8),
    CONSTRAINT policies_initial_check CHECK (initial OPERATOR(pg_catalog.>=) '0'::float8
                                             AND initial OPERATOR(pg_catalog.<=) burst),
    CONSTRAINT policies_jitter_check CHECK (jitter OPERATOR(pg_catalog.>=) '0'::float8
                                            AND jitter OPERATOR(pg_catalog.<=) '1'::float8),
    CONSTRAINT policies_window_start_check CHECK (window_start_us OPERATOR(pg_catalog.>=) '0'::bigint),
    CONSTRAINT policies_shards_check CHECK (shards OPERATOR(pg_catalog.>=) 1
                                            AND shards OPERATOR(pg_catalog.<=) 64),
    CONSTRAINT policies_floor_rate_check CHECK (floor_rate OPERATOR(pg_catalog.>=) '0'::float8
                                                AND floor_rate OPERATOR(pg_catalog.<) 'Infinity'::float8
                                                AND (floor_rate OPERATOR(pg_catalog.=) '0'::float8
                                                     OR NOT fixed_window)),
    CONSTRAINT policies_max_reserved_check
        CHECK (max_reserved OPERATOR(pg_catalog.>=) '0'::float8
               AND max_reserved OPERATOR(pg_catalog.<) 'Infinity'::float8),
    CONSTRAINT policies_penalty_check
        CHECK (penalty_us OPERATOR(pg_catalog.>=) '0'::bigint
               AND (penalty_us OPERATOR(pg_catalog.=) '0'::bigint
                    OR shards OPERATOR(pg_catalog.=) 1)),
    CONSTRAINT policies_storage_check
        CHECK (storage OPERATOR(pg_catalog.=) ANY ('{table,memory}'::text[])
               AND (storage OPERATOR(pg_catalog.=) 'table'::text
                    OR shards OPERATOR(pg_catalog.=) 1)),
    :rl_kind_check
);
REVOKE ALL ON TABLE :rl_policies FROM PUBLIC;
