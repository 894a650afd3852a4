/*
 * src/pg/maintenance.cpp
 *
 * The operator's side of bucket state, as procedures that commit as they go
 * so that no transaction of theirs holds row locks for long:
 * - rate_limit_purge() forgets the buckets whose deletion changes no answer.
 *   Which rows those are is the core's to say (core::IsFull); storage deletes
 *   them without waiting for anyone (SweepBuckets).
 * - rate_limit_reset_limit() forgets every bucket of a limit: first, in key
 *   order, each one no transaction is writing or locking; then each of the
 *   others in a transaction of its own, waiting for its writer while holding
 *   no other row, so that it cannot deadlock with a caller holding several.
 * - rate_limit_buckets() lists the buckets of a limit as takes see them,
 *   without waiting and without SSI predicate locks (VisitBuckets).
 * - rate_limit_stats() and its companions read and reset the per-limit
 *   counters of takes (src/pg/stats.cpp); rate_limit_memory_stats() reads
 *   the memory engine's counters of places per policy (memory_table.cpp).
 * Purge and reset of a limit go through every engine (engine.hpp), each in
 * the batches the procedure commits; the listing reads the engine of the
 * name's policy.
 * Only plain data is alive here: a PostgreSQL error is a longjmp that skips
 * C++ destructors.
 */
#include "pg/pg_includes.hpp"

#include "core/shards.hpp"
#include "core/token_bucket.hpp"
#include "pg/clock.hpp"
#include "pg/errors.hpp"
#include "pg/leases.hpp"
#include "pg/fmgr_args.hpp"
#include "pg/engine.hpp"
#include "pg/memory_table.hpp"
#include "pg/policies.hpp"
#include "pg/sharding.hpp"
#include "pg/stats.hpp"
#include "pg/storage.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(rate_limit_purge);
PG_FUNCTION_INFO_V1(rate_limit_reset_limit);
PG_FUNCTION_INFO_V1(rate_limit_buckets);
PG_FUNCTION_INFO_V1(rate_limit_stats);
PG_FUNCTION_INFO_V1(rate_limit_stats_info);
PG_FUNCTION_INFO_V1(rate_limit_stats_reset);
PG_FUNCTION_INFO_V1(rate_limit_memory_stats);
}

namespace ratelimit::pg {

namespace {

/* Which rows a purge looks at, and the policy of the name it saw last
 * (rows of one name come in runs), valid for one batch. */
struct PurgeScope {
	text *name; /* NULL: every name */
	text *last_name;
	bool last_has_policy;
	Policy last_policy;
};

/* The limit row (name, row_key) has under `policy` as it is defined now:
 * a key's own row (*shard -1), or shard *shard of key *key.  False for a row
 * the policy does not read (a shard number it no longer has). */
bool
PolicyRowLimit(const Policy &policy, text *name, text *row_key, core::Limit *limit, text **key,
               int *shard)
{
	*key = row_key;
	*shard = -1;
	if (policy.shards == 1) {
		*limit = PolicyLimit(policy, name, row_key);
		return true;
	}
	if (!SplitShardKey(row_key, policy.shards, key, shard))
		return false;
	*limit = core::ShareOfShard(PolicyLimit(policy, name, *key), policy.shards);
	return true;
}

/* Whether a row of policy `policy` can be forgotten: the policy does not
 * remember first sightings, and refilled to now under the policy as it is
 * defined now (which may differ from when the row was written) the bucket
 * is full.  A row the policy does not read is judged by what it was
 * written with. */
bool
PolicyRowIsFull(const Policy &policy, const StoredBucket &row, TimestampTz now)
{
	if (core::StartsBelowFull(policy.limit))
		return false;
	core::Limit limit;
	text *key;
	int shard;
	if (!PolicyRowLimit(policy, row.name, row.key, &limit, &key, &shard))
		return row.full_at <= now;
	return core::IsFull(row.bucket, limit, now);
}

/* SweepFilter of rate_limit_purge: rows whose deletion changes no answer.
 * A policy's rows are judged by the policy; other rows by full_at, which
 * every write stores from the limit it was given. */
bool
Forgettable(const StoredBucket &row, TimestampTz now, void *context)
{
	const PurgeScope *scope = static_cast<const PurgeScope *>(context);
	if (scope->name != NULL && CompareText(row.name, scope->name) != 0)
		return false;
	if (row.bucket.stamp_us > now)
		return false;
	PurgeScope *cache = static_cast<PurgeScope *>(context);
	if (cache->last_name == NULL || CompareText(cache->last_name, row.name) != 0) {
		const int name_bytes = VARSIZE_ANY_EXHDR(row.name);
		cache->last_name = CopyText(row.name);
		cache->last_has_policy = name_bytes >= 1 && name_bytes <= kMaxNameBytes &&
		                         FindPolicy(row.name, &cache->last_policy);
	}
	if (cache->last_has_policy)
		return PolicyRowIsFull(cache->last_policy, row, now);
	return row.full_at <= now;
}

/* Whether the procedure was called where it may commit: by CALL at top
 * level, not in a transaction block or from a function. */
bool
MayCommit(FunctionCallInfo fcinfo)
{
	return fcinfo->context != NULL && IsA(fcinfo->context, CallContext) &&
	       !castNode(CallContext, fcinfo->context)->atomic;
}

/* Before a procedure's first batch: where and whether it may write, and a
 * connection to SPI (procedure context: outlives the commits). */
void
BeginBatches(FunctionCallInfo fcinfo, const Signature &signature, const char *batch)
{
	RequirePrimary(signature);
	if (!MayCommit(fcinfo))
		ReportAtomicCall(signature.function, batch);
	if (SPI_connect_ext(SPI_OPT_NONATOMIC) != SPI_OK_CONNECT)
		elog(ERROR, "could not connect to SPI");
}

/* A procedure's batches (engine.hpp's Batches): each a transaction that
 * may delete, allocating in a context that is reset when it commits. */
struct BatchRun {
	const Signature *signature;
	MemoryContext context;
	MemoryContext outer;
	PurgeScope *scope; /* a purge's, whose cached policy a commit forgets */
};

void
BeginBatch(void *arg)
{
	BatchRun *run = static_cast<BatchRun *>(arg);
	if (XactReadOnly)
		ReportReadOnlyDelete(run->signature->function);
	run->outer = MemoryContextSwitchTo(run->context);
	PushActiveSnapshot(GetTransactionSnapshot());
}

/* Ends a batch: commits its transaction and starts the next. */
void
CommitBatch(void *arg)
{
	BatchRun *run = static_cast<BatchRun *>(arg);
	PopActiveSnapshot();
	MemoryContextSwitchTo(run->outer);
	SPI_commit();
	RlStartNextTransaction();
	MemoryContextReset(run->context);
	if (run->scope != NULL)
		run->scope->last_name = NULL; /* a policy may change between batches */
}

void
EndBatches()
{
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "could not disconnect from SPI");
}

/* One row of rate_limit_stats. */
void
ListStats(const LimitStats &stats, void *context)
{
	const ResultSet *set = static_cast<const ResultSet *>(context);
	Datum values[6] = {PointerGetDatum(stats.name),       Int64GetDatum(stats.grants),
	                   Int64GetDatum(stats.denials),      Float8GetDatum(stats.tokens_granted),
	                   Int64GetDatum(stats.reservations), Float8GetDatum(stats.lock_wait_seconds)};
	bool nulls[6] = {};
	tuplestore_putvalues(set->store, set->desc, values, nulls);
}

/* One row of rate_limit_memory_stats: the database's name too, NULL once
 * it is dropped (and for the policies beyond the engine's entries). */
void
ListPolicyCounts(const memory::PolicyCounts &counts, void *context)
{
	const ResultSet *set = static_cast<const ResultSet *>(context);
	const char *database = OidIsValid(counts.database) ? get_database_name(counts.database) : NULL;
	Datum values[7] = {
	    ObjectIdGetDatum(counts.database), database != NULL ? CStringGetDatum(database) : (Datum)0,
	    PointerGetDatum(counts.name),      Int64GetDatum(counts.buckets),
	    Int64GetDatum(counts.evictions),   Int64GetDatum(counts.overflows),
	    BoolGetDatum(counts.in_table)};
	bool nulls[7] = {!OidIsValid(counts.database), database == NULL, counts.name == NULL};
	NameData name;
	if (database != NULL) {
		namestrcpy(&name, database);
		values[1] = NameGetDatum(&name);
	}
	tuplestore_putvalues(set->store, set->desc, values, nulls);
}

/* The columns of rate_limit_buckets. */
enum BucketColumn {
	kColKey,
	kColShard,
	kColBalance,
	kColFullAt,
	kColTokens,
	kColLastRefill,
	kColBlockedUntil,
	kColPrevious,
	kBucketColumns
};

/* What rate_limit_buckets lists, and where. */
struct Listing {
	text *name;
	bool has_policy;
	Policy policy;
	TimestampTz now;
	ResultSet set;
};

/* One row of rate_limit_buckets.  Under a policy, the balance refilled to
 * now and when it is full, by the policy as it is defined now (a shard row
 * by its share); otherwise no balance (the table holds no rate) and the
 * full_at that the last write stored. */
void
ListBucket(const StoredBucket &row, void *context)
{
	Listing *listing = static_cast<Listing *>(context);
	Datum values[kBucketColumns];
	bool nulls[kBucketColumns] = {};
	text *key = row.key;
	int shard = -1;
	core::Limit limit{};
	const bool known = listing->has_policy &&
	                   PolicyRowLimit(listing->policy, row.name, row.key, &limit, &key, &shard);
	values[kColKey] = PointerGetDatum(key);
	values[kColShard] = Int32GetDatum(shard);
	nulls[kColShard] = shard < 0;
	values[kColTokens] = Float8GetDatum(row.bucket.tokens);
	values[kColLastRefill] = TimestampTzGetDatum(row.bucket.stamp_us);
	/* Only a box that still holds the key. */
	values[kColBlockedUntil] = TimestampTzGetDatum(row.bucket.blocked_until_us);
	nulls[kColBlockedUntil] = row.bucket.blocked_until_us <= listing->now;
	values[kColPrevious] = Float8GetDatum(row.bucket.previous);
	if (known) {
		const core::Decision look =
		    core::Decide(row.bucket, limit, core::Request::Plain(0.0), listing->now);
		values[kColBalance] = Float8GetDatum(look.remaining);
		values[kColFullAt] = TimestampTzGetDatum(core::FullAtMicros(look, listing->now));
	} else {
		nulls[kColBalance] = true;
		values[kColFullAt] = TimestampTzGetDatum(row.full_at);
	}
	tuplestore_putvalues(listing->set.store, listing->set.desc, values, nulls);
}

} /* namespace */

} /* namespace ratelimit::pg */

namespace pg = ratelimit::pg;

/*
 * CALL rate_limit_purge(name => NULL, purged => NULL): forgets, in batches
 * of table pages that each commit, every bucket (of `name`, or of every
 * name) whose deletion changes no answer; `purged` is how many.
 */
Datum
rate_limit_purge(PG_FUNCTION_ARGS)
{
	pg::NameCall call = pg::DecodeNameCall(fcinfo, pg::kPurgeSignature);
	pg::BeginBatches(fcinfo, pg::kPurgeSignature,
	                 psprintf("%u table pages", pg::kPurgeBatchBlocks));
	pg::PurgeScope scope = {call.name == NULL ? NULL : pg::CopyText(call.name)};
	pg::BatchRun run{&pg::kPurgeSignature,
	                 AllocSetContextCreate(CurrentMemoryContext, "rate_limit_purge batch",
	                                       ALLOCSET_DEFAULT_SIZES),
	                 NULL, &scope};
	const pg::Batches batches{pg::BeginBatch, pg::CommitBatch, &run};
	int64 purged = 0;
	/* Every engine's buckets, judged the same way. */
	for (const pg::BucketEngine *engine : pg::kEngines)
		if (engine->available())
			purged += engine->purge(scope.name, pg::Forgettable, &scope, batches);
	/* Then the expired leases, in one more batch. */
	pg::BeginBatch(&run);
	purged += pg::PurgeLeases(scope.name);
	pg::CommitBatch(&run);
	pg::EndBatches();
	return pg::CountResultDatum(fcinfo, pg::kPurgeSignature, purged);
}

/*
 * CALL rate_limit_reset_limit(name, reset => NULL): forgets every bucket of
 * limit `name`, so that each key starts afresh (full, or at its policy's
 * initial balance); `reset` is how many buckets (rows) were forgotten.  A
 * take that comes while it runs is kept if it finds its bucket forgotten
 * already, and forgotten otherwise.
 */
Datum
rate_limit_reset_limit(PG_FUNCTION_ARGS)
{
	pg::NameCall call = pg::DecodeNameCall(fcinfo, pg::kResetLimitSignature);
	pg::BeginBatches(fcinfo, pg::kResetLimitSignature, psprintf("%d keys", pg::kResetBatchKeys));
	text *name = pg::CopyText(call.name);
	pg::BatchRun run{&pg::kResetLimitSignature,
	                 AllocSetContextCreate(CurrentMemoryContext, "rate_limit_reset_limit batch",
	                                       ALLOCSET_DEFAULT_SIZES),
	                 NULL, NULL};
	const pg::Batches batches{pg::BeginBatch, pg::CommitBatch, &run};
	int64 reset = 0;
	for (const pg::BucketEngine *engine : pg::kEngines)
		if (engine->available())
			reset += engine->reset_limit(name, batches);
	pg::EndBatches();
	return pg::CountResultDatum(fcinfo, pg::kResetLimitSignature, reset);
}

/*
 * SELECT * FROM rate_limit_buckets(name): the buckets of limit `name`, in
 * key order: key, shard (NULL unless the policy splits keys), balance now
 * (NULL without a policy), when it is full, the stored tokens and stamp,
 * the penalty box and a sliding window's count of the window before.
 */
Datum
rate_limit_buckets(PG_FUNCTION_ARGS)
{
	pg::NameCall call = pg::DecodeNameCall(fcinfo, pg::kBucketsSignature);
	pg::Listing listing{};
	listing.name = call.name;
	listing.has_policy = pg::FindPolicy(call.name, &listing.policy);
	/* A policy's buckets are in its engine (those of explicit calls in the
	 * table), where a standby may read them or not. */
	const pg::BucketEngine &engine = listing.has_policy ? *listing.policy.engine : pg::kTableEngine;
	pg::RequireEngine(engine, pg::kBucketsSignature, false);
	listing.now = pg::ClockNow();
	listing.set = pg::BeginResultSet(fcinfo, pg::kBucketsSignature);
	if (listing.set.desc->natts != pg::kBucketColumns)
		elog(ERROR, "rate_limit_buckets must return %d columns", pg::kBucketColumns);
	engine.visit(call.name, pg::ListBucket, &listing);
	return (Datum)0;
}

/*
 * SELECT * FROM rate_limit_stats(): per limit, the takes counted since the
 * last reset: grants, denials, tokens granted, reservations and seconds
 * spent waiting for other transactions' row locks.
 */
Datum
rate_limit_stats(PG_FUNCTION_ARGS)
{
	pg::ResultSet set = pg::BeginResultSet(fcinfo, pg::kStatsSignature);
	if (set.desc->natts != 6)
		elog(ERROR, "rate_limit_stats must return 6 columns");
	pg::VisitStats(pg::ListStats, &set);
	return (Datum)0;
}

/*
 * SELECT * FROM rate_limit_memory_stats(): per database and memory policy,
 * the places its buckets hold in the memory engine now, its full buckets
 * evicted to make room for others and its keys stored in the table for
 * want of room since the server started, and whether its keys may be in
 * the table.
 */
Datum
rate_limit_memory_stats(PG_FUNCTION_ARGS)
{
	pg::ResultSet set = pg::BeginResultSet(fcinfo, pg::kMemoryStatsSignature);
	if (set.desc->natts != 7)
		elog(ERROR, "rate_limit_memory_stats must return 7 columns");
	pg::memory::VisitPolicyCounts(pg::ListPolicyCounts, &set);
	return (Datum)0;
}

/* rate_limit_stats_info(): takes not counted for want of room, and when
 * the counters were last reset. */
Datum
rate_limit_stats_info(PG_FUNCTION_ARGS)
{
	TupleDesc desc;
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE || desc->natts != 2)
		elog(ERROR, "rate_limit_stats_info must return 2 columns");
	Datum values[2] = {Int64GetDatum(pg::StatsDropped()), TimestampTzGetDatum(pg::StatsResetAt())};
	bool nulls[2] = {false, false};
	return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls));
}

/* rate_limit_stats_reset(name => NULL): zeroes the counters of limit name,
 * or of every limit. */
Datum
rate_limit_stats_reset(PG_FUNCTION_ARGS)
{
	pg::NameCall call = pg::DecodeNameCall(fcinfo, pg::kStatsResetSignature);
	pg::ResetStats(call.name);
	PG_RETURN_VOID();
}
