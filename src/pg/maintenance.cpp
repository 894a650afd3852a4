/*
 * src/pg/maintenance.cpp
 *
 * The operator's side of bucket state: rate_limit_purge(), which forgets
 * the buckets whose deletion changes no answer, in batches that each commit.
 * Which rows those are is the core's to say (core::IsFull); storage deletes
 * them without waiting for anyone (SweepBuckets).  Only plain data is alive
 * here: a PostgreSQL error is a longjmp that skips C++ destructors.
 */
#include "pg/pg_includes.hpp"

#include "core/shards.hpp"
#include "core/token_bucket.hpp"
#include "pg/errors.hpp"
#include "pg/fmgr_args.hpp"
#include "pg/policies.hpp"
#include "pg/sharding.hpp"
#include "pg/storage.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(rate_limit_purge);
}

namespace ratelimit::pg {

namespace {

/* Heap pages per batch: 1 MB of the table, some thousands of rows.  Each
 * batch is a transaction of its own, so a row it deleted is locked for
 * no longer than one batch takes. */
constexpr BlockNumber kPurgeBatchBlocks = 128;

/* Which rows a purge looks at. */
struct PurgeScope {
	text *name; /* NULL: every name */
};

/* Whether a row of policy `policy` can be forgotten: the policy does not
 * remember first sightings, and refilled to now under the policy as it is
 * defined now (which may differ from when the row was written) the bucket
 * is full.  A row the policy does not read (a shard number it no longer
 * has) is judged by what it was written with. */
bool
PolicyRowIsFull(const Policy &policy, const StoredBucket &row, TimestampTz now)
{
	if (policy.has_initial && policy.initial < policy.limit.burst)
		return false;
	if (policy.shards == 1)
		return core::IsFull(row.bucket, PolicyLimit(policy, row.name, row.key), now);
	text *key;
	int shard;
	if (!SplitShardKey(row.key, policy.shards, &key, &shard))
		return row.full_at <= now;
	const core::ShardShare share =
	    core::ShareOfShard(PolicyLimit(policy, row.name, key), policy.initial, policy.shards);
	pfree(key);
	return core::IsFull(row.bucket, share.limit, now);
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
	const int name_bytes = VARSIZE_ANY_EXHDR(row.name);
	Policy policy;
	if (name_bytes >= 1 && name_bytes <= kMaxNameBytes && FindPolicy(row.name, &policy))
		return PolicyRowIsFull(policy, row, now);
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

/* Ends the batch's transaction and starts the next. */
void
CommitBatch()
{
	SPI_commit();
#if PG_VERSION_NUM < 150000
	SPI_start_transaction();
#endif
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
	pg::PurgeCall call = pg::DecodePurgeCall(fcinfo);
	pg::RequirePrimary(pg::kPurgeSignature);
	if (!pg::MayCommit(fcinfo))
		pg::ReportAtomicCall(pg::kPurgeSignature.function, pg::kPurgeBatchBlocks);

	if (SPI_connect_ext(SPI_OPT_NONATOMIC) != SPI_OK_CONNECT)
		elog(ERROR, "could not connect to SPI");
	/* Allocated in SPI's procedure context, which outlives the commits. */
	pg::PurgeScope scope = {call.name == NULL ? NULL : pg::CopyText(call.name)};
	MemoryContext batch_context = AllocSetContextCreate(
	    CurrentMemoryContext, "rate_limit_purge batch", ALLOCSET_DEFAULT_SIZES);

	int64 purged = 0;
	BlockNumber next = 0;
	for (;;) {
		if (XactReadOnly)
			pg::ReportReadOnlyDelete(pg::kPurgeSignature.function);
		MemoryContext outer = MemoryContextSwitchTo(batch_context);
		PushActiveSnapshot(GetTransactionSnapshot());
		pg::SweepProgress progress =
		    pg::SweepBuckets(next, pg::kPurgeBatchBlocks, pg::Forgettable, &scope);
		PopActiveSnapshot();
		MemoryContextSwitchTo(outer);
		MemoryContextReset(batch_context);
		purged += progress.deleted;
		next = progress.next_block;
		pg::CommitBatch();
		if (progress.finished)
			break;
	}

	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "could not disconnect from SPI");
	return pg::PurgeResultDatum(fcinfo, purged);
}
