/*
 * src/pg/take_all.hpp
 *
 * rate_limit_take_all: several limits taken all or nothing.  The limits
 * given are checked, resolved to their policies and merged per bucket (the
 * costs of a bucket named twice add up), their engine takes them in one
 * canonical order, and the limit that decided the answer is reported.
 */
#ifndef RATELIMIT_PG_TAKE_ALL_HPP
#define RATELIMIT_PG_TAKE_ALL_HPP

#include "pg/pg_includes.hpp"

#include "pg/engine.hpp"
#include "pg/fmgr_args.hpp"

namespace ratelimit::pg {

/* Takes from every bucket of `takes` or from none, by their engine (one for
 * all), in the caller's transaction: `takes` sorted by CompareBuckets and
 * free of duplicates.  Returns whether all were granted; each decision says
 * how its bucket stands (after the take if granted, as it is otherwise).
 * After a denial, as a single take does, each limit with a penalty box that
 * denied starts its box, and a key never seen that starts below full is
 * recorded, so that it starts earning. */
bool TakeEvery(BucketTake *takes, int count);

/* As TakeEvery, but a report-only bucket (enforce[b] false) that denies
 * refuses nothing: the others are taken without it, or refused by their
 * own denial.  Granted, a bucket left out so still has its denial
 * (decision.allowed false) and nothing was taken from it. */
bool TakeEnforced(BucketTake *takes, int count, const bool *enforce);

/* The limits of one call: (names[i], keys[i], costs[i]) for i < count. */
struct LimitList {
	int count;
	Datum *names;
	Datum *keys;
	Datum *costs; /* NULL: a cost of 1 each */
};

/* The elements of the call's arrays: one-dimensional, without NULLs, of
 * one length, at least one and at most the most one call may take. */
LimitList ReadLimitList(const TakeAllCall &call);

/* Takes every limit of `list` under its policy, or none, in the caller's
 * transaction, each reserving within `max_wait` seconds (0: none) as its
 * policy allows; the binding limit is the one to wait longest for when
 * denied, the one left with the smallest share of its burst when granted.
 * A grant's retry_after is the longest wait of a reservation among them.
 * The policies must all keep their buckets in one engine (0A000); the
 * call must be allowed to write where that engine writes (`signature`
 * names it in the error). */
AllDecision TakeAllLimits(const LimitList &list, double max_wait, const Signature &signature);

} /* namespace ratelimit::pg */

#endif
