/*
 * src/pg/errors.cpp
 *
 * The one table from statuses to ereport calls.  Messages follow the
 * PostgreSQL style guide: short lower-case primary message, detail and hint
 * as full sentences, an SQLSTATE on every error.
 */
#include "pg/errors.hpp"

#include <cmath>

namespace ratelimit::pg {

namespace {

/* Formats a float8 the way PostgreSQL prints it (NaN, Infinity, 1e+300). */
const char *
Show(double value)
{
	return float8out_internal(value);
}

} /* namespace */

namespace {

/* The advice of a "cost exceeds burst" error, by the form of the call. */
const char *
CostExceedsBurstHint(CallForm form)
{
	switch (form) {
	case CallForm::kPerSecond:
		return "Raise burst, lower cost, or pass reserve => true to borrow from future refill.";
	case CallForm::kPerPeriod:
		return "Raise burst, lower cost, or pass max_wait to borrow from future refill.";
	case CallForm::kPolicy:
		break;
	}
	return "Raise the policy's burst, lower cost, or define the policy with max_reserved and pass "
	       "max_wait to borrow from future refill.";
}

/* A reservation that could never be granted, for the forms that take max_wait. */
[[noreturn]] void
ReportCostExceedsTimedDebtCap(const core::Limit &limit, const core::Request &request, CallForm form)
{
	core::Request untimed = request;
	untimed.debt_capped = false;
	const double repaid = core::DebtCap(limit, untimed);
	const char *owner = form == CallForm::kPolicy ? "the policy's max_reserved" : "max_reserved";
	const char *tokens = request.debt_capped
	                         ? psprintf("%s is %s", owner, Show(request.max_reserved))
	                         : psprintf("%s is not given", owner);
	const char *hint =
	    form == CallForm::kPerPeriod
	        ? "Lower cost, pass a longer max_wait, or raise burst or max_reserved."
	    : request.max_reserved > 0.0
	        ? "Lower cost, pass a longer max_wait, or define the policy with a larger burst or "
	          "max_reserved."
	        : "The policy allows no reserved debt: define it with max_reserved to reserve, raise "
	          "its "
	          "burst, or lower cost.";
	ereport(ERROR,
	        (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
	         errmsg("cost exceeds burst plus the debt allowed"),
	         errdetail("A cost of %s can never be taken from a bucket of burst %s that may "
	                   "owe at most %s tokens: %s, and refill repays %s tokens within the "
	                   "max_wait of %s seconds.",
	                   Show(request.cost), Show(limit.burst), Show(core::DebtCap(limit, request)),
	                   tokens, Show(repaid), Show(request.max_wait)),
	         errhint("%s", hint)));
	pg_unreachable();
}

} /* namespace */

void
ReportInvalidRequest(core::Status status, const core::Limit &limit, const core::Request &request,
                     CallForm form, double rate)
{
	switch (status) {
	case core::Status::kCostInvalid:
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("cost must be a finite number greater than or equal to zero"),
		                errdetail("The cost given was %s.", Show(request.cost)),
		                errhint("Pass the number of tokens the call needs; a cost of 0 only "
		                        "looks at the bucket.")));
		break;
	case core::Status::kRateInvalid:
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("rate must be a finite number greater than or equal to zero"),
		                errdetail("The rate given was %s.", Show(rate)),
		                form == CallForm::kPerSecond
		                    ? errhint("Pass the refill rate in tokens per second; 0 means the "
		                              "bucket never refills.")
		                    : errhint("Pass how many tokens refill per period; 0 means the bucket "
		                              "never refills.")));
		break;
	case core::Status::kBurstInvalid:
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("burst must be a finite number greater than zero"),
		                errdetail("The burst given was %s.", Show(limit.burst)),
		                form == CallForm::kPerSecond
		                    ? errhint("Pass the capacity of the bucket, the most tokens it can "
		                              "hold.")
		                    : errhint("Pass the capacity of the bucket, the most tokens it can "
		                              "hold; without burst it is the rate.")));
		break;
	case core::Status::kMaxReservedInvalid:
		ereport(ERROR,
		        (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		         errmsg("max_reserved must be a finite number greater than or equal to zero"),
		         errdetail("The max_reserved given was %s.", Show(request.max_reserved)),
		         errhint("Pass NULL for reserved debt without a cap.")));
		break;
	case core::Status::kCostExceedsBurst:
		if (limit.sliding)
			ereport(ERROR,
			        (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("cost exceeds max_count"),
			         errdetail("A cost of %s can never be taken under a sliding window that "
			                   "admits at most %s in a window.",
			                   Show(request.cost), Show(limit.burst)),
			         errhint("Lower cost, or define the policy with a larger max_count.")));
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("cost exceeds burst"),
		                errdetail("A cost of %s can never be taken from a bucket that holds at "
		                          "most %s tokens.",
		                          Show(request.cost), Show(limit.burst)),
		                errhint("%s", CostExceedsBurstHint(form))));
		break;
	case core::Status::kCostExceedsDebtCap:
		if (form != CallForm::kPerSecond)
			ReportCostExceedsTimedDebtCap(limit, request, form);
		ereport(ERROR,
		        (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		         errmsg("cost exceeds burst plus max_reserved"),
		         errdetail("A cost of %s can never be taken from a bucket of burst %s "
		                   "that may owe at most %s tokens.",
		                   Show(request.cost), Show(limit.burst), Show(request.max_reserved)),
		         errhint("Raise burst or max_reserved, or lower cost.")));
		break;
	case core::Status::kFloorRateInvalid:
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("floor rate must be a finite number greater than or equal to zero"),
		                errdetail("The floor rate given was %s tokens per second.",
		                          Show(limit.floor_rate)),
		                errhint("Pass 0 for no floor.")));
		break;
	case core::Status::kMaxWaitInvalid:
		ereport(ERROR,
		        (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("max_wait must not be negative"),
		         errdetail("The max_wait given lasts %s seconds.", Show(request.max_wait)),
		         errhint("Pass how long reserved work may wait to start, such as '30 "
		                 "seconds'; NULL or 0 for no reservation.")));
		break;
	case core::Status::kReserveUnsupported:
		ereport(ERROR,
		        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("a sliding window cannot reserve"),
		         errdetail("A max_wait of %s seconds was given; a sliding window counts what was "
		                   "taken and lends nothing ahead of time.",
		                   Show(request.max_wait)),
		         errhint("Pass no max_wait (or 0), or define the policy as a token bucket with "
		                 "max_reserved to reserve.")));
		break;
	case core::Status::kOk:
		break;
	}
	elog(ERROR, "unexpected rate limit status %d", static_cast<int>(status));
	pg_unreachable();
}

namespace {

const char *
ShowInterval(Interval *given)
{
	return DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(given)));
}

} /* namespace */

void
ReportInvalidPeriod(const char *what, Interval *given, double seconds)
{
	ereport(ERROR,
	        (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
	         errmsg("%s must be a positive interval of at least a microsecond", what),
	         std::isfinite(seconds)
	             ? errdetail("The %s given, %s, lasts %s seconds, counting a year as 365.25 days "
	                         "and a month as 30 days.",
	                         what, ShowInterval(given), Show(seconds))
	             : errdetail("The %s given was %s.", what, ShowInterval(given)),
	         errhint("Pass the period the rate is counted over, such as '1 minute'.")));
	pg_unreachable();
}

void
ReportRateOutOfRange(double rate, Interval *per)
{
	ereport(
	    ERROR,
	    (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("rate per second is out of range"),
	     errdetail("%s tokens per %s is more or fewer tokens per second than a float8 can hold.",
	               Show(rate), ShowInterval(per)),
	     errhint("Pass a rate and period that come to about 5e-324 to 1.8e308 tokens per "
	             "second, or a rate of 0.")));
	pg_unreachable();
}

void
ReportNegativeMaxWait(Interval *given)
{
	ereport(ERROR,
	        (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("max_wait must not be negative"),
	         errdetail("The max_wait given was %s.", ShowInterval(given)),
	         errhint("Pass how long reserved work may wait to start, such as '30 seconds'; "
	                 "NULL or 0 for no reservation.")));
	pg_unreachable();
}

void
ReportNullArgument(const char *function, const char *argument, const char *hint)
{
	ereport(ERROR,
	        (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("%s must not be null", argument),
	         errdetail("%s() requires a value for %s.", function, argument), errhint("%s", hint)));
	pg_unreachable();
}

void
ReportEmptyName()
{
	ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("name must not be empty"),
	                errdetail("The name identifies the limit, such as 'api' or 'login'."),
	                errhint("Pass a non-empty name; use key '' for a limit shared by every "
	                        "caller.")));
	pg_unreachable();
}

void
ReportTooLong(const char *what, int bytes, int max_bytes)
{
	ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED), errmsg("%s is too long", what),
	                errdetail("The %s is %d bytes long; at most %d bytes are allowed.", what, bytes,
	                          max_bytes),
	                errhint("Hash long values first, for example with md5().")));
	pg_unreachable();
}

void
ReportReadOnly(const char *function)
{
	ereport(ERROR, (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
	                errmsg("cannot execute %s() in a read-only transaction", function),
	                errdetail("%s() writes the bucket's state.", function),
	                errhint("Call it in a read-write transaction; rate_limit_check() "
	                        "works in read-only ones.")));
	pg_unreachable();
}

void
ReportReadOnlyDelete(const char *function)
{
	ereport(ERROR, (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
	                errmsg("cannot execute %s() in a read-only transaction", function),
	                errdetail("%s() deletes rows of bucket state.", function),
	                errhint("Call it in a read-write transaction.")));
	pg_unreachable();
}

void
ReportAtomicCall(const char *function, const char *batch)
{
	ereport(ERROR,
	        (errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
	         errmsg("%s() cannot run inside a transaction block or a function", function),
	         errdetail("It commits after each batch of %s, so that no batch holds its row locks "
	                   "for long.",
	                   batch),
	         errhint("Run CALL %s(...) as a statement of its own, outside BEGIN and COMMIT and "
	                 "not from a function.",
	                 function)));
	pg_unreachable();
}

void
ReportStatsUnavailable()
{
	ereport(ERROR,
	        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
	         errmsg("rate limit statistics need ratelimit in \"shared_preload_libraries\""),
	         errdetail("Before PostgreSQL 17 an extension gets shared memory only when the server "
	                   "starts, so no take has been counted."),
	         errhint("Add ratelimit to shared_preload_libraries and restart the server.")));
	pg_unreachable();
}

void
ReportMemoryUnavailable()
{
	ereport(
	    ERROR,
	    (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
	     errmsg("policies with storage 'memory' need ratelimit in \"shared_preload_libraries\""),
	     errdetail("Before PostgreSQL 17 an extension gets shared memory only when the server "
	               "starts, so the memory engine has no place for its buckets."),
	     errhint("Add ratelimit to shared_preload_libraries and restart the server, or define "
	             "the policy with storage => 'table'.")));
	pg_unreachable();
}

void
ReportMemoryFull(int capacity)
{
	ereport(ERROR,
	        (errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
	         errmsg("no room for another memory bucket on a standby"),
	         errdetail("The memory engine holds %d buckets; the places this key may use all "
	                   "hold buckets that are not full or that open transactions took from, and "
	                   "a standby cannot keep the key in the table instead.",
	                   capacity),
	         errhint("Raise ratelimit.memory_buckets and restart the standby.")));
	pg_unreachable();
}

void
ReportMemoryTooManyHolds()
{
	ereport(ERROR,
	        (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
	         errmsg("too many open operations on one memory bucket"),
	         errdetail("Open transactions hold a memory bucket by %u operations, the most it "
	                   "counts.",
	                   PG_UINT32_MAX),
	         errhint("Commit or roll back some of the transactions that take from it.")));
	pg_unreachable();
}

void
ReportMemoryNoLimit()
{
	ereport(ERROR,
	        (errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
	         errmsg("no room for another limit in the memory engine"),
	         errdetail("The buckets of the memory engine are judged by as many distinct limits "
	                   "as it keeps."),
	         errhint("Raise ratelimit.memory_buckets and restart the server, or reset the "
	                 "buckets of limits redefined since.")));
	pg_unreachable();
}

void
ReportMemoryTableReadOnly(bool new_key)
{
	ereport(ERROR,
	        (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
	         errmsg("cannot store a memory bucket in the table in a read-only transaction"),
	         new_key ? errdetail("The memory engine has no room for this key, so it would be kept "
	                             "in the table ratelimit.buckets, which a read-only transaction "
	                             "cannot write.")
	                 : errdetail("The memory engine had no room for this key, so it is kept in "
	                             "the table ratelimit.buckets, which a read-only transaction "
	                             "cannot write."),
	         errhint("Take in a read-write transaction.")));
	pg_unreachable();
}

void
ReportMemoryPrepare()
{
	ereport(ERROR,
	        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
	         errmsg("cannot prepare a transaction that took from memory buckets"),
	         errdetail("The memory engine gives a take back when its transaction aborts, and a "
	                   "prepared transaction outlives the session that would do so."),
	         errhint("Take from memory buckets outside the prepared transaction, or define the "
	                 "policy with storage => 'table'.")));
	pg_unreachable();
}

void
ReportMemoryPolicyPrepare()
{
	ereport(ERROR,
	        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
	         errmsg("cannot prepare a transaction that defined a memory policy"),
	         errdetail("Until a transaction that defines a memory policy ends, the memory engine "
	                   "keeps the buckets stored under the definition it replaces, and a prepared "
	                   "transaction ends in another session, unknown to this one."),
	         errhint("Define memory policies outside the prepared transaction.")));
	pg_unreachable();
}

void
ReportMixedStorage(const char *name, const char *holds, const char *other_name,
                   const char *other_holds)
{
	ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
	                errmsg("rate_limit_take_all() does not take from both storage engines at once"),
	                errdetail("Policy \"%s\" keeps its buckets in %s and policy \"%s\" in %s.",
	                          name, holds, other_name, other_holds),
	                errhint("Give the policies the same storage, or take them in two calls.")));
	pg_unreachable();
}

void
ReportRecovery(const char *function, bool state_logged)
{
	if (state_logged)
		ereport(ERROR, (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
		                errmsg("cannot execute %s() during recovery", function),
		                errdetail("A standby server holds bucket state but cannot change it."),
		                errhint("Call it on the primary server; rate_limit_check() and "
		                        "rate_limit_buckets() answer on a standby.")));
	ereport(ERROR, (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
	                errmsg("cannot execute %s() during recovery", function),
	                errdetail("Bucket state lives in an unlogged table, which standby "
	                          "servers do not have."),
	                errhint("Call it on the primary server, or keep bucket state in a logged "
	                        "table (rate_limit_set_logged) to read it on a standby.")));
	pg_unreachable();
}

void
ReportParallelMode(const char *function)
{
	ereport(ERROR, (errcode(ERRCODE_INVALID_TRANSACTION_STATE),
	                errmsg("cannot execute %s() during a parallel operation", function),
	                errdetail("%s() writes the bucket's state, which cannot be done in parallel "
	                          "mode.",
	                          function),
	                errhint("Mark the function that calls it PARALLEL UNSAFE.")));
	pg_unreachable();
}

void
ReportBadLimitList(const char *why)
{
	ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("invalid list of limits"),
	                errdetail("%s", why),
	                errhint("Pass one-dimensional arrays of equal length: names[i], keys[i] "
	                        "and costs[i] describe one limit.")));
	pg_unreachable();
}

void
ReportTooManyLimits(int count, int max_count)
{
	ereport(ERROR,
	        (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED), errmsg("too many limits"),
	         errdetail("%d limits were given; at most %d can be taken at once.", count, max_count),
	         errhint("Split the limits over several calls in one transaction, in a "
	                 "consistent order.")));
	pg_unreachable();
}

void
ReportShardedCost(double cost, double pair_capacity, int shards, bool reserving)
{
	ereport(ERROR,
	        (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("cost exceeds what two shards hold"),
	         errdetail("A take from a key split over %d shards draws on two of them, which hold "
	                   "at most %s tokens together; the cost was %s.",
	                   shards, Show(pair_capacity), Show(cost)),
	         reserving ? errhint("Use fewer shards for this policy, or a smaller cost; a "
	                             "reservation is made on one shard, within its share of "
	                             "max_reserved and max_wait.")
	                   : errhint("Use fewer shards for this policy, or a smaller cost.")));
	pg_unreachable();
}

void
ReportShardedTakeAll(const char *name)
{
	ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
	                errmsg("rate_limit_take_all() does not take from sharded policies"),
	                errdetail("Policy \"%s\" splits its keys over several rows.", name),
	                errhint("Take from the sharded limit in a call of its own.")));
	pg_unreachable();
}

void
ReportGovernedName(const char *name, const char *function)
{
	ereport(ERROR,
	        (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
	         errmsg("rate limit \"%s\" is governed by a policy", name),
	         errdetail("The buckets of policy \"%s\" take their rate and burst from it; %s() "
	                   "with a rate and burst of its own could refill them or lock them out.",
	                   name, function),
	         errhint("Call %s() without rate and burst to use the policy's, or give the limit "
	                 "with explicit parameters a name of its own.",
	                 function)));
	pg_unreachable();
}

void
ReportMergedCostExceedsBurst(const char *name, const char *key, double burst, double debt_cap)
{
	ereport(ERROR,
	        (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("costs of one bucket exceed burst"),
	         debt_cap > 0.0
	             ? errdetail("The costs given for bucket (\"%s\", \"%s\") add up to more than its "
	                         "burst of %s tokens and the %s tokens it may owe, so they could never "
	                         "be taken together.",
	                         name, key, Show(burst), Show(debt_cap))
	             : errdetail("The costs given for bucket (\"%s\", \"%s\") add up to more than its "
	                         "burst of %s tokens, so they could never be taken together.",
	                         name, key, Show(burst)),
	         errhint("Name each bucket once, or lower the costs.")));
	pg_unreachable();
}

void
ReportMergedCostExceedsMaxCount(const char *name, const char *key, double max_count)
{
	ereport(ERROR,
	        (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
	         errmsg("costs of one bucket exceed max_count"),
	         errdetail("The costs given for bucket (\"%s\", \"%s\") add up to more than its "
	                   "max_count of %s, the most its sliding window admits in a window, so they "
	                   "could never be taken together.",
	                   name, key, Show(max_count)),
	         errhint("Name each bucket once, or lower the costs.")));
	pg_unreachable();
}

void
ReportUndefinedPolicy(const char *name, bool table_exists)
{
	if (!table_exists)
		ereport(ERROR,
		        (errcode(ERRCODE_UNDEFINED_OBJECT),
		         errmsg("rate limit policy \"%s\" does not exist", name),
		         errdetail("This database has no table ratelimit.policies, where policies are "
		                   "kept."),
		         errhint("Policies arrive with version 0.2.0 of the extension: run ALTER EXTENSION "
		                 "ratelimit UPDATE. If the table was renamed or moved, give it back its "
		                 "name.")));
	ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
	                errmsg("rate limit policy \"%s\" does not exist", name),
	                errdetail("A call without rate and burst takes them from a policy defined "
	                          "with rate_limit_define()."),
	                errhint("Define the policy first, or pass rate and burst in the call.")));
	pg_unreachable();
}

void
ReportInvalidAmount(double amount)
{
	ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
	                errmsg("amount must be a finite number greater than or equal to zero"),
	                errdetail("The amount given was %s.", Show(amount)),
	                errhint("Pass the number of tokens to give back; the bucket never holds more "
	                        "than its burst.")));
	pg_unreachable();
}

void
ReportBadPlaces(const char *name, double cost, int max_held)
{
	ereport(ERROR,
	        (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
	         errmsg("cost must be a whole number of places from 0 to max_held"),
	         errdetail("Policy \"%s\" is a concurrency limit holding at most %d at once; the "
	                   "cost given was %s.",
	                   name, max_held, Show(cost)),
	         errhint("Pass the number of places to hold, such as 1.")));
	pg_unreachable();
}

void
ReportConcurrencyRefund(const char *name, bool lease)
{
	ereport(
	    ERROR,
	    (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("a concurrency limit cannot be refunded"),
	     lease ? errdetail("Policy \"%s\" leases places, which come back when the lease expires "
	                       "or is released, not tokens.",
	                       name)
	           : errdetail("Policy \"%s\" holds places, which come back when the transaction "
	                       "that took them ends, not tokens.",
	                       name),
	     lease ? errhint("Release the lease with rate_limit_release to give its places back early.")
	           : errhint("Roll back to a savepoint taken before the take to give its places "
	                     "back early.")));
	pg_unreachable();
}

void
ReportNoLease(const char *name, bool concurrency)
{
	/* A rate limit is not offered to be redefined: that would replace it. */
	ereport(ERROR,
	        (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("policy \"%s\" has no lease", name),
	         concurrency ? errdetail("Policy \"%s\" holds places until the transaction that took "
	                                 "them ends.",
	                                 name)
	                     : errdetail("Policy \"%s\" is a rate limit, which holds no places.", name),
	         concurrency ? errhint("Define the concurrency limit with a lease, such as "
	                               "rate_limit_define_concurrency('%s', 3, lease => '30 seconds'), "
	                               "or take it with rate_limit_take.",
	                               name)
	                     : errhint("Take a rate limit with rate_limit_take; rate_limit_lease takes "
	                               "places of a concurrency limit defined with a lease.")));
	pg_unreachable();
}

void
ReportHoldOutsideBlock(const char *function, const char *name)
{
	ereport(ERROR,
	        (errcode(ERRCODE_NO_ACTIVE_SQL_TRANSACTION),
	         errmsg("%s() of a concurrency limit can only be used in transaction blocks", function),
	         errdetail("Policy \"%s\" holds places until the transaction ends, and this "
	                   "transaction ends with the statement.",
	                   name),
	         errhint("Take it after BEGIN, in the transaction that does the work it "
	                 "limits.")));
	pg_unreachable();
}

void
ReportLeaseRecovery(const char *function)
{
	ereport(ERROR,
	        (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
	         errmsg("cannot execute %s() of a concurrency limit with a lease during recovery",
	                function),
	         errdetail("Leases are kept in an unlogged table, which standby servers do not have."),
	         errhint("Call it on the primary server.")));
	pg_unreachable();
}

void
ReportLeaseReadOnly(const char *function, bool release)
{
	ereport(ERROR,
	        (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
	         errmsg("cannot execute %s() in a read-only transaction", function),
	         release ? errdetail("%s() deletes the lease's row from ratelimit.leases.", function)
	                 : errdetail("%s() writes a lease row in ratelimit.leases.", function),
	         release ? errhint("Call it in a read-write transaction.")
	                 : errhint("Call it in a read-write transaction; rate_limit_check() "
	                           "works in read-only ones.")));
	pg_unreachable();
}

void
ReportHoldRecovery(const char *function)
{
	ereport(ERROR, (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
	                errmsg("cannot execute %s() of a concurrency limit during recovery", function),
	                errdetail("Places are held in the server's lock table, and a standby server's "
	                          "lock table is not the primary's."),
	                errhint("Call it on the primary server.")));
	pg_unreachable();
}

void
ReportStateTableMissing(const char *table)
{
	ereport(ERROR,
	        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
	         errmsg("table ratelimit.%s does not exist", table),
	         errdetail("The limiter keeps its state in the table ratelimit.%s, which was not found "
	                   "in this database.",
	                   table),
	         errhint("If the table was renamed or moved, give it back its name. Otherwise, as a "
	                 "last resort that keeps the policies: copy ratelimit.policies to a table of "
	                 "your own, run DROP EXTENSION ratelimit; CREATE EXTENSION ratelimit; and "
	                 "insert the policies back; every bucket then starts full.")));
	pg_unreachable();
}

namespace {

/* Detail and hint for a change to table ratelimit.`table`. */
void
DescribeTableChange(const char *table, TableChange change, const char *object, Oid type,
                    const char **detail, const char **hint)
{
	const char *bypassed = "the limiter reads and writes the table directly, bypassing it";
	const char *id = object != NULL ? quote_identifier(object) : "";
	const char *type_name = OidIsValid(type) ? format_type_be(type) : "";
	switch (change) {
	case TableChange::kNotPlainTable:
		*detail = psprintf("The table ratelimit.%s is no longer an ordinary heap table.", table);
		*hint = "If another relation has taken its name, rename that relation and give the table "
		        "back its name; otherwise give the table back its heap storage.";
		return;
	case TableChange::kTrigger:
		*detail = psprintf("The table ratelimit.%s has trigger %s, and %s.", table, id, bypassed);
		*hint = psprintf("Drop the trigger: DROP TRIGGER %s ON ratelimit.%s;", id, table);
		return;
	case TableChange::kRowSecurity:
		*detail = psprintf("The table ratelimit.%s has row-level security enabled, and %s.", table,
		                   bypassed);
		*hint = psprintf("Disable it: ALTER TABLE ratelimit.%s DISABLE ROW LEVEL SECURITY;", table);
		return;
	case TableChange::kCheckConstraint:
		*detail = psprintf("The table ratelimit.%s has check constraint %s, and %s.", table, id,
		                   bypassed);
		*hint = psprintf("Drop the constraint: ALTER TABLE ratelimit.%s DROP CONSTRAINT %s;", table,
		                 id);
		return;
	case TableChange::kColumns:
		*detail = psprintf("The table ratelimit.%s has columns added, dropped or changed, and the "
		                   "limiter reads its columns by position.",
		                   table);
		*hint = "Give the table back exactly the columns the extension created: name text "
		        "COLLATE \"C\", key text COLLATE \"C\", tokens double precision, last_refill "
		        "timestamp with time zone, full_at timestamp with time zone and blocked_until "
		        "timestamp with time zone, in that order, all NOT NULL. Bucket state may be "
		        "emptied to do so (TRUNCATE): every bucket then starts full.";
		return;
	case TableChange::kIndexes:
		*detail = psprintf("The table ratelimit.%s has indexes other than its primary key and "
		                   "copies of it, and the limiter, which writes the table directly, "
		                   "maintains only those.",
		                   table);
		*hint = "Drop the indexes added to it.";
		return;
	case TableChange::kPrimaryKey:
		*detail = psprintf("The primary key of table ratelimit.%s has been changed or dropped, and "
		                   "the limiter finds rows through it.",
		                   table);
		*hint = strcmp(table, "buckets") == 0
		            ? "Drop any index that replaced it, then restore it: ALTER TABLE "
		              "ratelimit.buckets ADD CONSTRAINT buckets_pkey PRIMARY KEY (name, key);"
		            : "Drop any index that replaced it, then restore it: ALTER TABLE "
		              "ratelimit.policies ADD CONSTRAINT policies_pkey PRIMARY KEY (name);";
		return;
	case TableChange::kColumnMissing:
		*detail = psprintf("The table ratelimit.%s has no column %s of type %s, which the limiter "
		                   "reads.",
		                   table, id, type_name);
		*hint = "Add the column back as the extension's script ratelimit--0.1.0--0.2.0.sql "
		        "defines it, or give it back its name.";
		return;
	case TableChange::kColumnType:
		*detail = psprintf("The column %s of table ratelimit.%s is not of type %s, which the "
		                   "limiter reads.",
		                   id, table, type_name);
		*hint = psprintf("Restore its type: ALTER TABLE ratelimit.%s ALTER COLUMN %s TYPE %s;",
		                 table, id, type_name);
		return;
	case TableChange::kNullValue:
		*detail = psprintf("A row of table ratelimit.%s has no value in column %s, which the "
		                   "limiter needs.",
		                   table, id);
		*hint = psprintf("Redefine that policy with rate_limit_define(), and restore the "
		                 "constraint: ALTER TABLE ratelimit.%s ALTER COLUMN %s SET NOT NULL;",
		                 table, id);
		return;
	case TableChange::kBadValue:
		*detail = psprintf("A row of table ratelimit.%s has a value in column %s that the limiter "
		                   "cannot use.",
		                   table, id);
		*hint = "Redefine that policy with rate_limit_define().";
		return;
	}
	*detail = psprintf("The table ratelimit.%s has been changed.", table);
	*hint = "Undo the change.";
}

} /* namespace */

void
ReportStateTableAltered(const char *table, TableChange change, const char *object, Oid type)
{
	const char *detail;
	const char *hint;
	DescribeTableChange(table, change, object, type, &detail, &hint);
	ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
	                errmsg("table ratelimit.%s has been altered", table), errdetail("%s", detail),
	                errhint("%s", hint)));
	pg_unreachable();
}

namespace {

const char *
ColumnTypeName(const ResultColumn &column)
{
	return OidIsValid(column.type) ? format_type_be(column.type) : column.type_name;
}

} /* namespace */

void
ReportResultTypeAltered(Oid type_id, const char *attribute, Oid found_type,
                        const ResultColumn *columns, int count, int position)
{
	const char *type_name = format_type_be(type_id);
	StringInfoData expected;
	initStringInfo(&expected);
	for (int i = 0; i < count; i++)
		appendStringInfo(&expected, "%s%s %s", i == 0 ? "" : ", ", columns[i].name,
		                 ColumnTypeName(columns[i]));

	if (attribute != NULL && position < 0)
		ereport(ERROR,
		        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		         errmsg("type %s has been altered", type_name),
		         errdetail("Attribute %s of type %s is one the functions do not return; they "
		                   "return %s.",
		                   quote_identifier(attribute), type_name, expected.data),
		         errhint("Drop it: ALTER TYPE %s DROP ATTRIBUTE %s;", type_name,
		                 quote_identifier(attribute))));
	if (attribute != NULL && strcmp(attribute, columns[position].name) == 0)
		ereport(ERROR,
		        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		         errmsg("type %s has been altered", type_name),
		         errdetail("Attribute %s of type %s is of type %s; the functions return %s there.",
		                   quote_identifier(attribute), type_name, format_type_be(found_type),
		                   ColumnTypeName(columns[position])),
		         errhint("Restore its type: ALTER TYPE %s ALTER ATTRIBUTE %s TYPE %s;", type_name,
		                 quote_identifier(attribute), ColumnTypeName(columns[position]))));
	ereport(ERROR,
	        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
	         errmsg("type %s has been altered", type_name),
	         errdetail("The attributes of type %s are not those the functions return: %s.",
	                   type_name, expected.data),
	         errhint("Restore them in this order. ALTER TYPE ... ADD ATTRIBUTE adds at the end: "
	                 "drop the attributes that must follow a missing one, then add them back "
	                 "after it.")));
	pg_unreachable();
}

} /* namespace ratelimit::pg */
