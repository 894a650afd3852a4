-- sql/buckets.sql: included by ratelimit.sql and by the upgrade to 0.4.0
--
-- The buckets of a limit, as takes see them: read without waiting and
-- without SSI predicate locks, so that a SERIALIZABLE reader makes no take
-- fail (reading ratelimit.buckets itself would).  Withheld from PUBLIC: it
-- shows every key of the limit.  previous (0.4.0) is last, after the
-- columns of 0.3.0.
\ir src/buckets_columns.sql
CREATE FUNCTION @extschema@.rate_limit_buckets(:rl_buckets_params)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rate_limit_buckets'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rate_limit_buckets(text) IS
    'the buckets of limit name in key order: key, shard (of a policy that splits keys), balance now and when it is full (by the policy; without one, no balance and full_at as last stored), the stored tokens and last_refill, until when a penalty box denies the key, and a sliding window''s count of the window before (previous)';
REVOKE ALL ON FUNCTION @extschema@.rate_limit_buckets(text) FROM PUBLIC;
