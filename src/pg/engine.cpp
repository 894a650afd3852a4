/*
 * src/pg/engine.cpp
 *
 * Finding an engine by its storage value, and what every engine decides
 * through: a new bucket's balance and the core's answer for each kind of
 * operation.
 */
#include "pg/engine.hpp"

namespace ratelimit::pg {

const BucketEngine *
EngineNamed(const char *storage, int bytes)
{
	for (const BucketEngine *engine : kEngines)
		if (static_cast<int>(strlen(engine->storage)) == bytes &&
		    memcmp(engine->storage, storage, bytes) == 0)
			return engine;
	return NULL;
}

bool
StartsBelowFull(const Operation &operation, const core::Limit &limit)
{
	return operation.has_initial && operation.initial < limit.burst;
}

core::Bucket
NewBucket(const core::Limit &limit, bool has_initial, double initial, TimestampTz now)
{
	core::Bucket fresh = core::FullBucket(limit, now);
	if (has_initial)
		fresh.tokens = initial;
	return fresh;
}

core::Decision
Evaluate(const Operation &operation, const core::Bucket &bucket, const core::Limit &limit,
         TimestampTz now)
{
	if (operation.kind == Operation::kRefund)
		return core::Refund(bucket, limit, operation.amount, now);
	if (operation.kind == Operation::kRecordNew)
		return core::Decide(bucket, limit, core::Request::Plain(0.0), now);
	if (operation.kind == Operation::kPenalize) {
		/* The call as a whole was denied: a take that would now be granted
		 * takes nothing and starts no box. */
		core::Decision decision = core::Decide(bucket, limit, operation.request, now);
		if (decision.allowed) {
			decision.allowed = false;
			decision.write = false;
		}
		return decision;
	}
	return core::Decide(bucket, limit, operation.request, now);
}

} /* namespace ratelimit::pg */
