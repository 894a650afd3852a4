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

/* Limits on the key columns, well under a btree entry's maximum size. */
constexpr int kMaxNameBytes = 256;
constexpr int kMaxKeyBytes = 1024;

/* Raises the error for a core status other than kOk. */
[[noreturn]] void ReportInvalidRequest(core::Status status, const core::Limit &limit,
                                       const core::Request &request);

/* 22004: `argument` of `function` was NULL; `hint` says what may be. */
[[noreturn]] void ReportNullArgument(const char *function, const char *argument, const char *hint);

/* 22023 / 54000: an empty or over-long name, an over-long key. */
[[noreturn]] void ReportEmptyName();
[[noreturn]] void ReportTooLong(const char *what, int bytes, int max_bytes);

/* 25006 / 0A000: the transaction or server cannot run `function`. */
[[noreturn]] void ReportReadOnly(const char *function);
[[noreturn]] void ReportRecovery(const char *function);
[[noreturn]] void ReportParallelMode(const char *function);

/* 22023 / 54000: bad arrays for rate_limit_take_all. */
[[noreturn]] void ReportBadLimitList(const char *why);
[[noreturn]] void ReportTooManyLimits(int count, int max_count);

/* 22023: a cost two shards of a sharded policy cannot hold;
 * 0A000: take_all over a sharded policy. */
[[noreturn]] void ReportShardedCost(double cost, double pair_capacity, int shards);
[[noreturn]] void ReportShardedTakeAll(const char *name);

/* 42501: an explicit rate and burst for the buckets of a policy. */
[[noreturn]] void ReportGovernedName(const char *name, const char *function);

/* 22023: the costs rate_limit_take_all adds up for one bucket exceed its
 * burst (or float8). */
[[noreturn]] void ReportMergedCostExceedsBurst(const char *name, const char *key, double burst);

/* 42704: no policy of that name; 22023: a bad refund amount. */
[[noreturn]] void ReportUndefinedPolicy(const char *name);
[[noreturn]] void ReportInvalidAmount(double amount);

/* 55000: a table of the extension (`table`, in schema ratelimit) is missing or no longer has the
 * expected shape. */
[[noreturn]] void ReportStateTableMissing(const char *table);
[[noreturn]] void ReportStateTableAltered(const char *why);

} /* namespace ratelimit::pg */

#endif
