/*
 * src/pg/engine.cpp
 *
 * Finding an engine by its storage value, and what every engine decides
 * through: a new bucket's balance and the core's answer for each kind of
 * operation.
 */
#include "pg/engine.hpp"

#include "core/operation.hpp"

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

namespace {

/* `limit` with the start balance `has_initial` and `initial` give a new
 * key, as the core keeps it. */
core::Limit
StartingWith(const core::Limit &limit, bool has_initial, double initial)
{
	core::Limit starting = limit;
	starting.has_initial = has_initial;
	starting.initial = initial;
	return starting;
}

} /* namespace */

bool
StartsBelowFull(const Operation &operation, const core::Limit &limit)
{
	return core::StartsBelowFull(StartingWith(limit, operation.has_initial, operation.initial));
}

core::Bucket
NewBucket(const core::Limit &limit, bool has_initial, double initial, TimestampTz now)
{
	return core::NewBucket(StartingWith(limit, has_initial, initial), now);
}

/* Operation's kinds are the core's, in its order. */
static_assert(Operation::kCheck == static_cast<int>(core::Operation::kCheck) &&
                  Operation::kTake == static_cast<int>(core::Operation::kTake) &&
                  Operation::kRefund == static_cast<int>(core::Operation::kRefund) &&
                  Operation::kPeek == static_cast<int>(core::Operation::kPeek) &&
                  Operation::kRecordNew == static_cast<int>(core::Operation::kRecordNew) &&
                  Operation::kPenalize == static_cast<int>(core::Operation::kPenalize),
              "Operation::Kind and core::Operation::Kind differ");

core::Decision
Evaluate(const Operation &operation, const core::Bucket &bucket, const core::Limit &limit,
         TimestampTz now)
{
	const core::Operation call{static_cast<core::Operation::Kind>(operation.kind),
	                           operation.request, operation.amount};
	return core::Apply(call, bucket, limit, now);
}

} /* namespace ratelimit::pg */
