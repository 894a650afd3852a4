/*
 * test/unit/test_helpers.hpp
 *
 * The names of the bucket algebra that every unit test uses, declared once.
 */
#ifndef RATELIMIT_TEST_HELPERS_HPP
#define RATELIMIT_TEST_HELPERS_HPP

#include "token_bucket.hpp"

using ratelimit::core::Admitted;
using ratelimit::core::Bucket;
using ratelimit::core::DebtCap;
using ratelimit::core::Decide;
using ratelimit::core::Decision;
using ratelimit::core::FullAtMicros;
using ratelimit::core::FullBucket;
using ratelimit::core::IsFull;
using ratelimit::core::Limit;
using ratelimit::core::kNotBlocked;
using ratelimit::core::NextWholeToken;
using ratelimit::core::Refill;
using ratelimit::core::Refund;
using ratelimit::core::Request;
using ratelimit::core::Status;
using ratelimit::core::Validate;
using ratelimit::core::ValidateRefund;

#endif
