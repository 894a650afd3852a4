-- portable/errors.sql
--
-- The user-facing errors of src/pg/errors.cpp in PL/pgSQL, for servers that
-- cannot load the C module: each function raises what its C counterpart
-- raises, with the same SQLSTATE, message, detail and hint.  Numbers are
-- shown as float8::text shows them (float8out, as the C module's Show), and
-- intervals as interval::text.  Needs the types and rl_debt_cap of core.sql,
-- run before it.  The reports run only on the way to an error: each has
-- its search_path set to pg_catalog and names the limiter's own objects
-- with @extschema@.  The checks on every call's way (rl_check_request,
-- rl_check_name_and_key) have no SET clause and qualify all they name, as
-- core.sql does.
--
-- The functions are STABLE, not IMMUTABLE: a call of an immutable function
-- on constants is evaluated when its statement is planned, and would raise
-- its error wherever the statement merely mentions it.

-- ReportCostExceedsTimedDebtCap (kCostExceedsDebtCap of a call that takes max_wait)
CREATE FUNCTION rl_report_cost_exceeds_timed_debt_cap(l rl_limit, r rl_request, form text)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    untimed @extschema@.rl_request := r;
    repaid float8;
    owner text := CASE WHEN form = 'policy' THEN 'the policy''s max_reserved'
                       ELSE 'max_reserved' END;
    tokens text;
    advice text;
BEGIN
    untimed.debt_capped := false;
    repaid := @extschema@.rl_debt_cap(l, untimed);
    tokens := CASE WHEN r.debt_capped THEN pg_catalog.format('%s is %s', owner, r.max_reserved)
                   ELSE pg_catalog.format('%s is not given', owner) END;
    -- max_reserved > 0 as C compares: NaN is not (float8 > counts it greater).
    advice := CASE
        WHEN form = 'per_period' THEN
            'Lower cost, pass a longer max_wait, or raise burst or max_reserved.'
        WHEN r.max_reserved > 0 AND r.max_reserved <> 'NaN'::float8 THEN
            'Lower cost, pass a longer max_wait, or define the policy with a larger burst or max_reserved.'
        ELSE
            'The policy allows no reserved debt: define it with max_reserved to reserve, raise its burst, or lower cost.'
        END;
    RAISE EXCEPTION 'cost exceeds burst plus the debt allowed'
        USING ERRCODE = 'invalid_parameter_value',
              DETAIL = pg_catalog.format(
                  'A cost of %s can never be taken from a bucket of burst %s that may owe at most %s tokens: %s, and refill repays %s tokens within the max_wait of %s seconds.',
                  r.cost, l.burst, @extschema@.rl_debt_cap(l, r), tokens, repaid, r.max_wait),
              HINT = advice;
END
$$;

-- ReportInvalidRequest; status: 'cost_invalid' ... 'max_wait_invalid' (core::Status)
CREATE FUNCTION rl_report_invalid_request(status text, l rl_limit, r rl_request, form text,
                                          rate float8)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    CASE status
    WHEN 'cost_invalid' THEN
        RAISE EXCEPTION 'cost must be a finite number greater than or equal to zero'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('The cost given was %s.', r.cost),
                  HINT = 'Pass the number of tokens the call needs; a cost of 0 only looks at the bucket.';
    WHEN 'rate_invalid' THEN
        RAISE EXCEPTION 'rate must be a finite number greater than or equal to zero'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('The rate given was %s.', rate),
                  HINT = CASE WHEN form = 'per_second'
                              THEN 'Pass the refill rate in tokens per second; 0 means the bucket never refills.'
                              ELSE 'Pass how many tokens refill per period; 0 means the bucket never refills.'
                              END;
    WHEN 'burst_invalid' THEN
        RAISE EXCEPTION 'burst must be a finite number greater than zero'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('The burst given was %s.', l.burst),
                  HINT = CASE WHEN form = 'per_second'
                              THEN 'Pass the capacity of the bucket, the most tokens it can hold.'
                              ELSE 'Pass the capacity of the bucket, the most tokens it can hold; without burst it is the rate.'
                              END;
    WHEN 'max_reserved_invalid' THEN
        RAISE EXCEPTION 'max_reserved must be a finite number greater than or equal to zero'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('The max_reserved given was %s.', r.max_reserved),
                  HINT = 'Pass NULL for reserved debt without a cap.';
    WHEN 'cost_exceeds_burst' THEN
        RAISE EXCEPTION 'cost exceeds burst'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format(
                      'A cost of %s can never be taken from a bucket that holds at most %s tokens.',
                      r.cost, l.burst),
                  HINT = CASE form
                         WHEN 'per_second' THEN
                             'Raise burst, lower cost, or pass reserve => true to borrow from future refill.'
                         WHEN 'per_period' THEN
                             'Raise burst, lower cost, or pass max_wait to borrow from future refill.'
                         ELSE
                             'Raise the policy''s burst, lower cost, or define the policy with max_reserved and pass max_wait to borrow from future refill.'
                         END;
    WHEN 'cost_exceeds_debt_cap' THEN
        IF form IS DISTINCT FROM 'per_second' THEN
            PERFORM @extschema@.rl_report_cost_exceeds_timed_debt_cap(l, r, form);
        END IF;
        RAISE EXCEPTION 'cost exceeds burst plus max_reserved'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format(
                      'A cost of %s can never be taken from a bucket of burst %s that may owe at most %s tokens.',
                      r.cost, l.burst, r.max_reserved),
                  HINT = 'Raise burst or max_reserved, or lower cost.';
    WHEN 'floor_rate_invalid' THEN
        RAISE EXCEPTION 'floor rate must be a finite number greater than or equal to zero'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('The floor rate given was %s tokens per second.',
                                             l.floor_rate),
                  HINT = 'Pass 0 for no floor.';
    WHEN 'max_wait_invalid' THEN
        RAISE EXCEPTION 'max_wait must not be negative'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('The max_wait given lasts %s seconds.', r.max_wait),
                  HINT = 'Pass how long reserved work may wait to start, such as ''30 seconds''; NULL or 0 for no reservation.';
    ELSE
        NULL;
    END CASE;
    -- kOk, or no status at all: the C module's elog, with the status's number.
    RAISE EXCEPTION 'unexpected rate limit status %',
        coalesce((pg_catalog.array_position(
                      ARRAY['ok', 'cost_invalid', 'rate_invalid', 'burst_invalid',
                            'max_reserved_invalid', 'cost_exceeds_burst', 'cost_exceeds_debt_cap',
                            'floor_rate_invalid', 'max_wait_invalid'], status) - 1)::text,
                 status, 'NULL')
        USING ERRCODE = 'internal_error';
END
$$;

-- CheckRequest: core::Validate's checks in its order (CheckRequest passes l.rate as rate)
CREATE FUNCTION rl_check_request(l rl_limit, r rl_request, form text, rate float8)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
DECLARE
    cap pg_catalog.float8;
    total pg_catalog.float8;
BEGIN
    -- Finite and >= 0: NaN passes >= 0 in SQL, but not < 'Infinity'.
    IF NOT (r.cost OPERATOR(pg_catalog.>=) '0'::pg_catalog.float8 AND r.cost OPERATOR(pg_catalog.<) 'Infinity'::pg_catalog.float8) THEN
        PERFORM @extschema@.rl_report_invalid_request('cost_invalid'::pg_catalog.text, l, r, form, rate);
    END IF;
    IF NOT (l.rate OPERATOR(pg_catalog.>=) '0'::pg_catalog.float8 AND l.rate OPERATOR(pg_catalog.<) 'Infinity'::pg_catalog.float8) THEN
        PERFORM @extschema@.rl_report_invalid_request('rate_invalid'::pg_catalog.text, l, r, form, rate);
    END IF;
    IF NOT (l.burst OPERATOR(pg_catalog.>) '0'::pg_catalog.float8 AND l.burst OPERATOR(pg_catalog.<) 'Infinity'::pg_catalog.float8) THEN
        PERFORM @extschema@.rl_report_invalid_request('burst_invalid'::pg_catalog.text, l, r, form, rate);
    END IF;
    IF r.debt_capped AND NOT (r.max_reserved OPERATOR(pg_catalog.>=) '0'::pg_catalog.float8
                              AND r.max_reserved OPERATOR(pg_catalog.<) 'Infinity'::pg_catalog.float8) THEN
        PERFORM @extschema@.rl_report_invalid_request('max_reserved_invalid'::pg_catalog.text, l, r, form, rate);
    END IF;
    IF NOT (l.floor_rate OPERATOR(pg_catalog.>=) '0'::pg_catalog.float8 AND l.floor_rate OPERATOR(pg_catalog.<) 'Infinity'::pg_catalog.float8) THEN
        PERFORM @extschema@.rl_report_invalid_request('floor_rate_invalid'::pg_catalog.text, l, r, form, rate);
    END IF;
    IF NOT (r.max_wait OPERATOR(pg_catalog.>=) '0'::pg_catalog.float8 AND r.max_wait OPERATOR(pg_catalog.<>) 'NaN'::pg_catalog.float8) THEN
        PERFORM @extschema@.rl_report_invalid_request('max_wait_invalid'::pg_catalog.text, l, r, form, rate);
    END IF;
    IF NOT r.reserve AND r.cost OPERATOR(pg_catalog.>) l.burst THEN
        PERFORM @extschema@.rl_report_invalid_request('cost_exceeds_burst'::pg_catalog.text, l, r, form, rate);
    END IF;
    IF r.reserve THEN
        cap := @extschema@.rl_debt_cap(l, r);
        -- burst + cap as C adds them: a sum beyond float8 is Infinity there,
        -- where float8 + raises 22003; only that near the top of the range.
        IF l.burst OPERATOR(pg_catalog.<) '8e307'::pg_catalog.float8
           AND (cap OPERATOR(pg_catalog.<) '8e307'::pg_catalog.float8 OR cap OPERATOR(pg_catalog.=) 'Infinity'::pg_catalog.float8) THEN
            total := l.burst OPERATOR(pg_catalog.+) cap;
        ELSE
            BEGIN
                total := l.burst OPERATOR(pg_catalog.+) cap;
            EXCEPTION WHEN numeric_value_out_of_range THEN
                total := 'Infinity';
            END;
        END IF;
        IF r.cost OPERATOR(pg_catalog.>) total THEN
            PERFORM @extschema@.rl_report_invalid_request('cost_exceeds_debt_cap'::pg_catalog.text, l, r, form, rate);
        END IF;
    END IF;
END
$$;

-- ReportInvalidPeriod
CREATE FUNCTION rl_report_invalid_period(what text, given interval, seconds float8)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION '% must be a positive interval of at least a microsecond', what
        USING ERRCODE = 'invalid_parameter_value',
              DETAIL = CASE WHEN seconds > '-Infinity'::float8 AND seconds < 'Infinity'::float8
                            THEN pg_catalog.format(
                                'The %s given, %s, lasts %s seconds, counting a year as 365.25 days and a month as 30 days.',
                                what, given, seconds)
                            ELSE pg_catalog.format('The %s given was %s.', what, given)
                            END,
              HINT = 'Pass the period the rate is counted over, such as ''1 minute''.';
END
$$;

-- ReportRateOutOfRange
CREATE FUNCTION rl_report_rate_out_of_range(rate float8, per interval)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'rate per second is out of range'
        USING ERRCODE = 'invalid_parameter_value',
              DETAIL = pg_catalog.format(
                  '%s tokens per %s is more or fewer tokens per second than a float8 can hold.',
                  rate, per),
              HINT = 'Pass a rate and period that come to about 5e-324 to 1.8e308 tokens per second, or a rate of 0.';
END
$$;

-- ReportNegativeMaxWait
CREATE FUNCTION rl_report_negative_max_wait(given interval)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'max_wait must not be negative'
        USING ERRCODE = 'invalid_parameter_value',
              DETAIL = pg_catalog.format('The max_wait given was %s.', given),
              HINT = 'Pass how long reserved work may wait to start, such as ''30 seconds''; NULL or 0 for no reservation.';
END
$$;

-- ReportNullArgument
CREATE FUNCTION rl_report_null_argument(function_name text, argument text, hint text)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION '% must not be null', argument
        USING ERRCODE = 'null_value_not_allowed',
              DETAIL = pg_catalog.format('%s() requires a value for %s.', function_name, argument),
              HINT = hint;
END
$$;

-- ReportEmptyName
CREATE FUNCTION rl_report_empty_name()
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'name must not be empty'
        USING ERRCODE = 'invalid_parameter_value',
              DETAIL = 'The name identifies the limit, such as ''api'' or ''login''.',
              HINT = 'Pass a non-empty name; use key '''' for a limit shared by every caller.';
END
$$;

-- ReportTooLong
CREATE FUNCTION rl_report_too_long(what text, bytes integer, max_bytes integer)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION '% is too long', what
        USING ERRCODE = 'program_limit_exceeded',
              DETAIL = pg_catalog.format('The %s is %s bytes long; at most %s bytes are allowed.',
                                         what, bytes, max_bytes),
              HINT = 'Hash long values first, for example with md5().';
END
$$;

-- CheckNameAndKey (kMaxNameBytes and kMaxKeyBytes: ../sql/src/limits.sql)
CREATE FUNCTION rl_check_name_and_key(name text, key text)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
DECLARE
    name_bytes integer := pg_catalog.octet_length(name);
    key_bytes integer := pg_catalog.octet_length(key);
BEGIN
    IF name_bytes OPERATOR(pg_catalog.=) 0 THEN
        PERFORM @extschema@.rl_report_empty_name();
    END IF;
    IF name_bytes OPERATOR(pg_catalog.>) @rl_max_name_bytes@ THEN
        PERFORM @extschema@.rl_report_too_long('name'::pg_catalog.text, name_bytes, @rl_max_name_bytes@);
    END IF;
    IF key_bytes OPERATOR(pg_catalog.>) @rl_max_key_bytes@ THEN
        PERFORM @extschema@.rl_report_too_long('key'::pg_catalog.text, key_bytes, @rl_max_key_bytes@);
    END IF;
END
$$;

-- ReportReadOnly
CREATE FUNCTION rl_report_read_only(function_name text)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'cannot execute %() in a read-only transaction', function_name
        USING ERRCODE = 'read_only_sql_transaction',
              DETAIL = pg_catalog.format('%s() writes the bucket''s state.', function_name),
              HINT = 'Call it in a read-write transaction; rate_limit_check() works in read-only ones.';
END
$$;

-- ReportRecovery
CREATE FUNCTION rl_report_recovery(function_name text, state_logged boolean)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF state_logged THEN
        RAISE EXCEPTION 'cannot execute %() during recovery', function_name
            USING ERRCODE = 'read_only_sql_transaction',
                  DETAIL = 'A standby server holds bucket state but cannot change it.',
                  HINT = 'Call it on the primary server; rate_limit_check() and rate_limit_buckets() answer on a standby.';
    END IF;
    RAISE EXCEPTION 'cannot execute %() during recovery', function_name
        USING ERRCODE = 'read_only_sql_transaction',
              DETAIL = 'Bucket state lives in an unlogged table, which standby servers do not have.',
              HINT = 'Call it on the primary server, or keep bucket state in a logged table (rate_limit_set_logged) to read it on a standby.';
END
$$;

-- ReportReadOnlyDelete
CREATE FUNCTION rl_report_read_only_delete(function_name text)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'cannot execute %() in a read-only transaction', function_name
        USING ERRCODE = 'read_only_sql_transaction',
              DETAIL = pg_catalog.format('%s() deletes rows of bucket state.', function_name),
              HINT = 'Call it in a read-write transaction.';
END
$$;

-- ReportAtomicCall
CREATE FUNCTION rl_report_atomic_call(function_name text, batch text)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION '%() cannot run inside a transaction block or a function', function_name
        USING ERRCODE = 'active_sql_transaction',
              DETAIL = pg_catalog.format(
                  'It commits after each batch of %s, so that no batch holds its row locks for long.',
                  batch),
              HINT = pg_catalog.format(
                  'Run CALL %s(...) as a statement of its own, outside BEGIN and COMMIT and not from a function.',
                  function_name);
END
$$;

-- ReportBadLimitList
CREATE FUNCTION rl_report_bad_limit_list(why text)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'invalid list of limits'
        USING ERRCODE = 'invalid_parameter_value',
              DETAIL = why,
              HINT = 'Pass one-dimensional arrays of equal length: names[i], keys[i] and costs[i] describe one limit.';
END
$$;

-- ReportTooManyLimits
CREATE FUNCTION rl_report_too_many_limits(count integer, max_count integer)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'too many limits'
        USING ERRCODE = 'program_limit_exceeded',
              DETAIL = pg_catalog.format('%s limits were given; at most %s can be taken at once.',
                                         count, max_count),
              HINT = 'Split the limits over several calls in one transaction, in a consistent order.';
END
$$;

-- ReportShardedCost
CREATE FUNCTION rl_report_sharded_cost(cost float8, pair_capacity float8, shards integer,
                                       reserving boolean)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'cost exceeds what two shards hold'
        USING ERRCODE = 'invalid_parameter_value',
              DETAIL = pg_catalog.format(
                  'A take from a key split over %s shards draws on two of them, which hold at most %s tokens together; the cost was %s.',
                  shards, pair_capacity, cost),
              HINT = CASE WHEN reserving
                          THEN 'Use fewer shards for this policy, or a smaller cost; a reservation is made on one shard, within its share of max_reserved and max_wait.'
                          ELSE 'Use fewer shards for this policy, or a smaller cost.'
                          END;
END
$$;

-- ReportShardedTakeAll
CREATE FUNCTION rl_report_sharded_take_all(name text)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'rate_limit_take_all() does not take from sharded policies'
        USING ERRCODE = 'feature_not_supported',
              DETAIL = pg_catalog.format('Policy "%s" splits its keys over several rows.', name),
              HINT = 'Take from the sharded limit in a call of its own.';
END
$$;

-- ReportGovernedName
CREATE FUNCTION rl_report_governed_name(name text, function_name text)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'rate limit "%" is governed by a policy', name
        USING ERRCODE = 'insufficient_privilege',
              DETAIL = pg_catalog.format(
                  'The buckets of policy "%s" take their rate and burst from it; %s() with a rate and burst of its own could refill them or lock them out.',
                  name, function_name),
              HINT = pg_catalog.format(
                  'Call %s() without rate and burst to use the policy''s, or give the limit with explicit parameters a name of its own.',
                  function_name);
END
$$;

-- ReportMergedCostExceedsBurst
CREATE FUNCTION rl_report_merged_cost_exceeds_burst(name text, key text, burst float8,
                                                    debt_cap float8)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'costs of one bucket exceed burst'
        USING ERRCODE = 'invalid_parameter_value',
              -- debt_cap > 0 as C compares: NaN is not.
              DETAIL = CASE WHEN debt_cap > 0 AND debt_cap <> 'NaN'::float8
                            THEN pg_catalog.format(
                                'The costs given for bucket ("%s", "%s") add up to more than its burst of %s tokens and the %s tokens it may owe, so they could never be taken together.',
                                name, key, burst, debt_cap)
                            ELSE pg_catalog.format(
                                'The costs given for bucket ("%s", "%s") add up to more than its burst of %s tokens, so they could never be taken together.',
                                name, key, burst)
                            END,
              HINT = 'Name each bucket once, or lower the costs.';
END
$$;

-- ReportUndefinedPolicy
CREATE FUNCTION rl_report_undefined_policy(name text, table_exists boolean)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT table_exists THEN
        RAISE EXCEPTION 'rate limit policy "%" does not exist', name
            USING ERRCODE = 'undefined_object',
                  DETAIL = 'This database has no table ratelimit.policies, where policies are kept.',
                  HINT = 'Policies arrive with version 0.2.0 of the extension: run ALTER EXTENSION ratelimit UPDATE. If the table was renamed or moved, give it back its name.';
    END IF;
    RAISE EXCEPTION 'rate limit policy "%" does not exist', name
        USING ERRCODE = 'undefined_object',
              DETAIL = 'A call without rate and burst takes them from a policy defined with rate_limit_define().',
              HINT = 'Define the policy first, or pass rate and burst in the call.';
END
$$;

-- A policy whose definition in the caller's snapshot was replaced or
-- removed by a transaction that has committed since: the portable
-- limiter's own error (the native one reads the latest definition).
CREATE FUNCTION rl_report_policy_changed(name text)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'could not serialize access due to a concurrent change of policy "%"', name
        USING ERRCODE = 'serialization_failure',
              DETAIL = 'A transaction that committed after this transaction''s snapshot was taken redefined or dropped the policy, and the limiter uses only its latest definition.',
              HINT = 'Retry the transaction.';
END
$$;

-- No policy called name in the caller's snapshot, which is older than
-- the latest definition or removal of a policy (rl_find_policy): the
-- portable limiter's own error.
CREATE FUNCTION rl_report_policies_changed(name text)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'could not serialize access due to a concurrent change of policies'
        USING ERRCODE = 'serialization_failure',
              DETAIL = pg_catalog.format('A transaction that committed after this transaction''s snapshot was taken defined, redefined or dropped a policy, so the snapshot cannot tell whether policy "%s" exists, and the limiter uses only the latest policies.', name),
              HINT = 'Retry the transaction.';
END
$$;

-- ReportInvalidAmount
CREATE FUNCTION rl_report_invalid_amount(amount float8)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'amount must be a finite number greater than or equal to zero'
        USING ERRCODE = 'invalid_parameter_value',
              DETAIL = pg_catalog.format('The amount given was %s.', amount),
              HINT = 'Pass the number of tokens to give back; the bucket never holds more than its burst.';
END
$$;
