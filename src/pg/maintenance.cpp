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
 * Only plain data is alive here: a PostgreSQL error is a longjmp that skips
 * C++ destructors.
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
PG_FUNCTION_INFO_V1(rate_limit_reset_limit);
}

namespace ratelimit::pg {

namespace {

/* Heap pages per batch: 1 MB of the table, some thousands of rows.  Each
 * batch is a transaction of its own, so a row it deleted is locked for
 * no longer than one batch takes. */
constexpr BlockNumber kPurgeBatchBlocks = 128;

/* Keys per batch of rate_limit_reset_limit's first pass. */
constexpr int kResetBatchKeys = 1000;

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

/* Starts a batch in `context`: a transaction that may delete. */
MemoryContext
BeginBatch(const Signature &signature, MemoryContext context)
{
	if (XactReadOnly)
		ReportReadOnlyDelete(signature.function);
	MemoryContext outer = MemoryContextSwitchTo(context);
	PushActiveSnapshot(GetTransactionSnapshot());
	return outer;
}

/* Ends a batch: commits its transaction and starts the next. */
void
CommitBatch(MemoryContext outer)
{
	PopActiveSnapshot();
	MemoryContextSwitchTo(outer);
	SPI_commit();
#if PG_VERSION_NUM < 150000
	SPI_start_transaction();
#endif
}

void
EndBatches()
{
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "could not disconnect from SPI");
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
	MemoryContext batch_context = AllocSetContextCreate(
	    CurrentMemoryContext, "rate_limit_purge batch", ALLOCSET_DEFAULT_SIZES);

	int64 purged = 0;
	for (BlockNumber next = 0;;) {
		MemoryContext outer = pg::BeginBatch(pg::kPurgeSignature, batch_context);
		pg::SweepProgress progress =
		    pg::SweepBuckets(next, pg::kPurgeBatchBlocks, pg::Forgettable, &scope);
		pg::CommitBatch(outer);
		MemoryContextReset(batch_context);
		purged += progress.deleted;
		next = progress.next_block;
		if (progress.finished)
			break;
	}
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
	MemoryContext procedure_context = CurrentMemoryContext;
	MemoryContext batch_context = AllocSetContextCreate(
	    procedure_context, "rate_limit_reset_limit batch", ALLOCSET_DEFAULT_SIZES);
	/* Keys some transaction was writing or locking: reset one at a time
	 * once the first pass is over. */
	List *busy = NIL;
	text *after = NULL;

	int64 reset = 0;
	for (;;) {
		MemoryContext outer = pg::BeginBatch(pg::kResetLimitSignature, batch_context);
		text **keys = static_cast<text **>(palloc(sizeof(text *) * pg::kResetBatchKeys));
		const int count = pg::ListBucketKeys(name, after, keys, pg::kResetBatchKeys);
		for (int i = 0; i < count; i++) {
			pg::ResetOutcome outcome = pg::ResetBucketUnlessBusy(name, keys[i], false);
			if (outcome == pg::ResetOutcome::kDeleted)
				reset++;
			if (outcome == pg::ResetOutcome::kBusy) {
				MemoryContext inner = MemoryContextSwitchTo(procedure_context);
				busy = lappend(busy, pg::CopyText(keys[i]));
				MemoryContextSwitchTo(inner);
			}
		}
		if (count > 0) {
			MemoryContext inner = MemoryContextSwitchTo(procedure_context);
			if (after != NULL)
				pfree(after);
			after = pg::CopyText(keys[count - 1]);
			MemoryContextSwitchTo(inner);
		}
		pg::CommitBatch(outer);
		MemoryContextReset(batch_context);
		if (count < pg::kResetBatchKeys)
			break;
	}

	ListCell *cell;
	foreach (cell, busy) {
		MemoryContext outer = pg::BeginBatch(pg::kResetLimitSignature, batch_context);
		if (pg::ResetBucket(name, static_cast<text *>(lfirst(cell))))
			reset++;
		pg::CommitBatch(outer);
		MemoryContextReset(batch_context);
	}
	pg::EndBatches();
	return pg::CountResultDatum(fcinfo, pg::kResetLimitSignature, reset);
}
