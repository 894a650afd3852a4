/*
 * src/core/operation.cpp
 *
 * Each kind of call as the bucket algebra answers it.
 */
#include "operation.hpp"

#include "no_postgres.hpp"

namespace ratelimit::core {

Decision
Apply(const Operation &operation, const Bucket &bucket, const Limit &limit,
      std::int64_t now_us) noexcept
{
	switch (operation.kind) {
	case Operation::kRefund:
		return Refund(bucket, limit, operation.amount, now_us);
	case Operation::kRecordNew:
		return Decide(bucket, limit, Request::Plain(0.0), now_us);
	case Operation::kPenalize: {
		/* The call as a whole was denied: a take that would now be granted
		 * takes nothing and starts no box. */
		Decision decision = Decide(bucket, limit, operation.request, now_us);
		if (decision.allowed) {
			decision.allowed = false;
			decision.write = false;
		}
		return decision;
	}
	case Operation::kCheck:
	case Operation::kTake:
	case Operation::kPeek:
		break;
	}
	return Decide(bucket, limit, operation.request, now_us);
}

} /* namespace ratelimit::core */
