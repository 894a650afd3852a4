/*
 * src/pg/errors.hpp
 *
 * Every user-facing error of the extension, in one place: core statuses and
 * boundary checks mapped to SQLSTATE, message, detail and hint.  All of these
 * raise ERROR and do not return.  A denied request is a result, not an error.
 */
#ifndef RATELIMIT_PG_ERRORS_HPP
#define RATELIMIT_PG_ERRORS_HPP

#include "pg/pg_includes.hpp"

#include "core/token_bucket.hpp"

namespace ratelimit::pg {

/* Limits on the key columns, well under a btree entry's maximum size: the
 * values of sql/src/limits.sql, which the SQL scripts read too (the Makefile
 * passes them). */
#if !defined(RATELIMIT_MAX_NAME_BYTES) || !defined(RATELIMIT_MAX_KEY_BYTES)
#error "RATELIMIT_MAX_NAME_BYTES and _KEY_BYTES undefined: build with the project's Makefile"
#endif
constexpr int kMaxNameBytes = RATELIMIT_MAX_NAME_BYTES;
constexpr int kMaxKeyBytes = RATELIMIT_MAX_KEY_BYTES;

/* The forms of a call, whose errors give different advice. */
enum class CallForm {
	kPerSecond, /* explicit rate in tokens per second, burst, reserve, max_reserved (0.1.0) */
	kPerPeriod, /* explicit rate per period, burst, max_wait, max_reserved */
	kPolicy     /* the limit, and the debt it allows, of a policy; max_wait */
};

/* Raises the error for a core status other than kOk of a call of `form`;
 * `rate` is the rate as the call gave it (per period for kPerPeriod). */
[[noreturn]] void ReportInvalidRequest(core::Status status, const core::Limit &limit,
                                       const core::Request &request, CallForm form, double rate);

/* 22023: a period (`what`: per) that lasts less than a microsecond or
 * forever, or tokens per second beyond float8; a negative max_wait. */
[[noreturn]] void ReportInvalidPeriod(const char *what, Interval *given, double seconds);
[[noreturn]] void ReportRateOutOfRange(double rate, Interval *per);
[[noreturn]] void ReportNegativeMaxWait(Interval *given);

/* 22004: `argument` of `function` was NULL; `hint` says what may be. */
[[noreturn]] void ReportNullArgument(const char *function, const char *argument, const char *hint);

/* 22023 / 54000: an empty or over-long name, an over-long key. */
[[noreturn]] void ReportEmptyName();
[[noreturn]] void ReportTooLong(const char *what, int bytes, int max_bytes);

/* 25006 / 0A000: the transaction or server cannot run `function`. */
[[noreturn]] void ReportReadOnly(const char *function);
[[noreturn]] void ReportRecovery(const char *function, bool state_logged);
[[noreturn]] void ReportParallelMode(const char *function);

/* 25006: `function` deletes bucket state, in a read-only transaction;
 * 25001: procedure `function` commits after each `batch` ("128 table
 * pages"), and was called where it cannot (inside a transaction block or a
 * function). */
[[noreturn]] void ReportReadOnlyDelete(const char *function);
[[noreturn]] void ReportAtomicCall(const char *function, const char *batch);

/* 55000: the take counters have no shared memory (before PostgreSQL 17,
 * without shared_preload_libraries). */
[[noreturn]] void ReportStatsUnavailable();

/* The memory engine: 55000 without shared memory (before PostgreSQL 17,
 * without shared_preload_libraries); 53400 when a new key's set has no
 * room on a standby, where the table cannot take the key instead; 25006
 * when a key it has no room for (`new_key`), or keeps in the table, would
 * be written there in a read-only transaction; 0A000 for PREPARE
 * TRANSACTION after a memory take or after writing a memory policy with
 * another limit. */
[[noreturn]] void ReportMemoryUnavailable();
[[noreturn]] void ReportMemoryFull(int capacity);
/* 54000 when a memory bucket is held by more open records than it counts
 * (2^32 - 1); 53400 when a memory bucket is judged by a limit that finds
 * no entry free in the engine's limits. */
[[noreturn]] void ReportMemoryTooManyHolds();
[[noreturn]] void ReportMemoryNoLimit();
[[noreturn]] void ReportMemoryTableReadOnly(bool new_key);
[[noreturn]] void ReportMemoryPrepare();
[[noreturn]] void ReportMemoryPolicyPrepare();
/* rate_limit_take_all over policies of two engines: each name with where
 * its engine keeps buckets ("memory", "the table"). */
[[noreturn]] void ReportMixedStorage(const char *name, const char *holds, const char *other_name,
                                     const char *other_holds);
/* 22023 / 54000: bad arrays for rate_limit_take_all. */
[[noreturn]] void ReportBadLimitList(const char *why);
[[noreturn]] void ReportTooManyLimits(int count, int max_count);

/* 22023: a cost two shards of a sharded policy cannot hold;
 * 0A000: take_all over a sharded policy. */
[[noreturn]] void ReportShardedCost(double cost, double pair_capacity, int shards, bool reserving);
[[noreturn]] void ReportShardedTakeAll(const char *name);

/* 42501: an explicit rate and burst for the buckets of a policy. */
[[noreturn]] void ReportGovernedName(const char *name, const char *function);

/* 22023: the costs rate_limit_take_all adds up for one bucket exceed its
 * burst (or float8). */
[[noreturn]] void ReportMergedCostExceedsBurst(const char *name, const char *key, double burst,
                                               double debt_cap);
/* 22023: the same for a sliding window, whose costs add up past its
 * max_count. */
[[noreturn]] void ReportMergedCostExceedsMaxCount(const char *name, const char *key,
                                                  double max_count);

/* 42704: no policy of that name (`table_exists`: ratelimit.policies exists);
 * 22023: a bad refund amount. */
[[noreturn]] void ReportUndefinedPolicy(const char *name, bool table_exists);
[[noreturn]] void ReportInvalidAmount(double amount);
/* A concurrency limit: a cost that is not a whole number of places from 0
 * to max_held, and a refund, which it has no tokens for. */
[[noreturn]] void ReportBadPlaces(const char *name, double cost, int max_held);
[[noreturn]] void ReportConcurrencyRefund(const char *name, bool lease);
/* 22023: rate_limit_lease of a policy that keeps no leases. */
[[noreturn]] void ReportNoLease(const char *name, bool concurrency);
[[noreturn]] void ReportHoldOutsideBlock(const char *function, const char *name);
[[noreturn]] void ReportHoldRecovery(const char *function);
/* 25006: a call of a concurrency limit with a lease, or a release, on a
 * standby, which has no unlogged table. */
[[noreturn]] void ReportLeaseRecovery(const char *function);
/* 25006: `function` writes a lease (or deletes one: `release`) in a
 * read-only transaction. */
[[noreturn]] void ReportLeaseReadOnly(const char *function, bool release);

/* What a check of a table of the extension found changed.  `object`, where
 * given, names what was found: a trigger, a constraint, a column. */
enum class TableChange {
	kNotPlainTable,   /* no longer an ordinary heap table */
	kTrigger,         /* has trigger `object` */
	kRowSecurity,     /* has row-level security enabled */
	kCheckConstraint, /* has check constraint `object` */
	kColumns,         /* columns added, dropped or changed (read by position) */
	kIndexes,         /* indexes besides the primary key */
	kPrimaryKey,      /* primary key changed or gone */
	kColumnMissing,   /* no column `object` (of type `type`) */
	kColumnType,      /* column `object` is not of type `type` */
	kNullValue,       /* a row has NULL in column `object` */
	kBadValue,        /* a row has an impossible value in column `object` */
};

/* 55000: table ratelimit.`table` is missing, or was changed in a way the
 * limiter cannot work with; the hint says how to undo it. */
[[noreturn]] void ReportStateTableMissing(const char *table);
[[noreturn]] void ReportStateTableAltered(const char *table, TableChange change,
                                          const char *object = NULL, Oid type = InvalidOid);

/* A column of a result row type, as the extension creates it: of type
 * `type`, or when that is InvalidOid (a type of the extension's own), of the
 * type named `type_name`. */
struct ResultColumn {
	const char *name;
	Oid type;
	const char *type_name = NULL;
};

/* 55000: result row type `type_id` no longer has the attributes `columns`:
 * attribute `attribute` (of type `found_type`) is where the column at
 * `position` belongs, or is one too many (position -1); or (attribute NULL)
 * only `position` of them remain. */
[[noreturn]] void ReportResultTypeAltered(Oid type_id, const char *attribute, Oid found_type,
                                          const ResultColumn *columns, int count, int position);

} /* namespace ratelimit::pg */

#endif
