/*
 * src/core/operation.hpp
 *
 * What a call does to a bucket, and the core's answer for it: the one
 * place where a check, a take, a refund, a first sighting and a penalty
 * meet the bucket algebra, for every engine.  Pure C++17, noexcept, no
 * heap, time passed in.
 */
#ifndef RATELIMIT_CORE_OPERATION_HPP
#define RATELIMIT_CORE_OPERATION_HPP

#include <cstdint>

#include "token_bucket.hpp"

namespace ratelimit::core {

/* What a call does to a bucket. */
struct Operation {
	enum Kind {
		kCheck,     /* decide `request` only: never locks, never writes */
		kTake,      /* decide `request` and store what it consumes */
		kRefund,    /* give `amount` tokens back (capped at burst) and store it */
		kPeek,      /* like kCheck, but never waits for an in-flight writer */
		kRecordNew, /* store a key never seen before at its starting balance;
		               leave an existing bucket alone, without waiting */
		kPenalize   /* decide `request` again and store only a denial that
		               starts the limit's penalty box (a denied
		               rate_limit_take_all): never a grant */
	} kind;
	Request request; /* kCheck, kTake, kPeek, kPenalize */
	double amount;   /* kRefund */
};

/* The core's answer for `operation` on `bucket` (as stored: Apply refills
 * it) under `limit` at `now_us`.  Requires Validate() == kOk for the
 * request, ValidateRefund() == kOk for a refund's amount. */
Decision Apply(const Operation &operation, const Bucket &bucket, const Limit &limit,
               std::int64_t now_us) noexcept;

} /* namespace ratelimit::core */

#endif
