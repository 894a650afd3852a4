/*
 * src/pg/take_all.cpp
 *
 * The planning of rate_limit_take_all around an engine's all-or-nothing
 * take: one BucketTake per limit given, sorted into the canonical order and
 * merged per bucket, the engine's take, what follows a denial (boxes, first
 * sightings), then the binding limit and the result row.  Only plain data
 * (palloc'd arrays) is alive here.
 */
#include "pg/take_all.hpp"

#include <cmath>

#include "pg/bucket_keys.hpp"
#include "pg/errors.hpp"
#include "pg/leases.hpp"
#include "pg/policies.hpp"

namespace ratelimit::pg {

namespace {

/* Most limits one rate_limit_take_all call takes: rows it locks at once. */
constexpr int kMaxLimits = 64;

/* Elements of a one-dimensional array argument, none NULL. */
int
ArrayElements(ArrayType *array, Oid type, int16 length, bool by_value, char align, const char *what,
              Datum **elements)
{
	bool *nulls;
	int count;
	if (ARR_NDIM(array) > 1)
		ReportBadLimitList(psprintf("%s has %d dimensions.", what, ARR_NDIM(array)));
	deconstruct_array(array, type, length, by_value, align, elements, &nulls, &count);
	for (int i = 0; i < count; i++)
		if (nulls[i])
			ReportNullArgument(kTakeAllSignature.function, psprintf("%s[%d]", what, i + 1),
			                   "Every element of names, keys and costs needs a value.");
	return count;
}

/* The BucketTake of limit `i` of `list`, under its policy, reserving
 * within `max_wait`; its label into *label. */
BucketTake
ResolveLimit(const LimitList &list, int i, double max_wait, LimitLabel *label, bool *enforce)
{
	text *name = DatumGetTextPP(list.names[i]);
	text *key = DatumGetTextPP(list.keys[i]);
	CheckNameAndKey(name, key);
	Policy policy = LookupPolicyToTake(name, true);
	if (policy.shards > 1)
		ReportShardedTakeAll(text_to_cstring(name));
	core::Limit limit = PolicyLimit(policy, name, key);
	const double cost = list.costs != NULL ? DatumGetFloat8(list.costs[i]) : 1.0;
	core::Request request = PolicyRequest(policy, cost, max_wait);
	if (policy.max_held > 0)
		(void)PolicyPlaces(policy, name, cost);
	else
		CheckRequest(limit, request, CallForm::kPolicy);
	*label = PolicyLabel(policy, name);
	*enforce = policy.enforce;
	return BucketTake{
	    name,           key, limit, request, policy.engine, core::Decision{}, policy.max_held,
	    policy.lease_us};
}

/* qsort_arg comparator over positions into a BucketTake array. */
int
ComparePositions(const void *a, const void *b, void *arg)
{
	const BucketTake *takes = static_cast<const BucketTake *>(arg);
	return CompareBuckets(takes[*static_cast<const int *>(a)], takes[*static_cast<const int *>(b)]);
}

/*
 * The distinct buckets of `given` (one per limit given), in canonical order,
 * into `takes`; `bucket_of[i]` is the bucket of limit i.  The costs of a
 * bucket given more than once add up.  Returns how many buckets there are.
 */
int
MergeRepeats(const BucketTake *given, int count, BucketTake *takes, int *bucket_of)
{
	int *sorted = static_cast<int *>(palloc(sizeof(int) * count));
	for (int i = 0; i < count; i++)
		sorted[i] = i;
	qsort_arg(sorted, count, sizeof(int), ComparePositions, const_cast<BucketTake *>(given));

	int buckets = 0;
	for (int i = 0; i < count; i++) {
		int position = sorted[i];
		if (buckets > 0 && CompareBuckets(takes[buckets - 1], given[position]) == 0) {
			BucketTake &merged = takes[buckets - 1];
			merged.request.cost += given[position].request.cost;
			if (merged.max_held > 0) {
				(void)CheckPlaces(merged.name, merged.request.cost, merged.max_held);
				bucket_of[position] = buckets - 1;
				continue;
			}
			const double debt_cap = core::DebtCap(merged.limit, merged.request);
			if (merged.request.cost > merged.limit.burst + debt_cap) {
				if (merged.limit.sliding)
					ReportMergedCostExceedsMaxCount(text_to_cstring(merged.name),
					                                text_to_cstring(merged.key),
					                                merged.limit.burst);
				ReportMergedCostExceedsBurst(text_to_cstring(merged.name),
				                             text_to_cstring(merged.key), merged.limit.burst,
				                             debt_cap);
			}
		} else {
			takes[buckets++] = given[position];
		}
		bucket_of[position] = buckets - 1;
	}
	for (int b = 0; b < buckets; b++)
		if (takes[b].max_held == 0)
			CheckRequest(takes[b].limit, takes[b].request, CallForm::kPolicy);
	return buckets;
}

/* The limit given (its position) that decided the answer: denied, the one
 * to wait longest for; granted, the one left with the smallest share of its
 * burst.  Ties: the first given. */
int
BindingLimit(const BucketTake *takes, const int *bucket_of, int count, bool allowed)
{
	int binding = 0;
	for (int i = 1; i < count; i++) {
		const BucketTake &t = takes[bucket_of[i]];
		const BucketTake &best = takes[bucket_of[binding]];
		/* Denied, a wait nobody knows (NaN: a place held until a
		 * transaction ends) is the longest. */
		bool better =
		    allowed
		        ? t.decision.remaining / t.limit.burst < best.decision.remaining / best.limit.burst
		        : (!t.decision.allowed && (best.decision.allowed ||
		                                   (!std::isnan(best.decision.retry_after) &&
		                                    (std::isnan(t.decision.retry_after) ||
		                                     t.decision.retry_after > best.decision.retry_after))));
		if (better)
			binding = i;
	}
	return binding;
}

} /* namespace */

bool
TakeEvery(BucketTake *takes, int count)
{
	const BucketEngine &engine = *takes[0].engine;
	if (count == 1) {
		/* One bucket: the single take's protocol. */
		const Operation take{Operation::kTake, takes[0].request, 0.0};
		takes[0].decision = engine.decide(takes[0].name, takes[0].key, takes[0].limit, take);
		return takes[0].decision.allowed;
	}
	if (engine.take_all(takes, count))
		return true;
	/* A limit with a penalty box that denied starts its box; a key never
	 * seen that starts below full starts earning now. */
	for (int i = 0; i < count; i++) {
		BucketTake &take = takes[i];
		Operation record{Operation::kRecordNew, take.request, 0.0};
		if (take.limit.penalty_us > 0 && !take.decision.allowed && take.request.cost > 0.0) {
			record.kind = Operation::kPenalize;
			const core::Decision boxed = engine.decide(take.name, take.key, take.limit, record);
			/* The box stored is the one to wait for. */
			if (boxed.retry_after > take.decision.retry_after)
				take.decision.retry_after = boxed.retry_after;
		} else if (core::StartsBelowFull(take.limit)) {
			(void)engine.decide(take.name, take.key, take.limit, record);
		}
	}
	return false;
}

bool
TakeEnforced(BucketTake *takes, int count, const bool *enforce)
{
	BucketTake *active = static_cast<BucketTake *>(palloc(sizeof(BucketTake) * count));
	int *position = static_cast<int *>(palloc(sizeof(int) * count));
	bool *left_out = static_cast<bool *>(palloc0(sizeof(bool) * count));
	for (;;) {
		int taking = 0;
		for (int b = 0; b < count; b++) {
			if (left_out[b])
				continue;
			active[taking] = takes[b];
			position[taking++] = b;
		}
		const bool allowed = taking == 0 || TakeEvery(active, taking);
		bool would_deny = false;
		bool denied = false; /* by an enforced limit, whatever the others say */
		for (int i = 0; i < taking; i++) {
			takes[position[i]].decision = active[i].decision;
			if (!active[i].decision.allowed) {
				if (enforce[position[i]])
					denied = true;
				else
					would_deny = true;
			}
		}
		if (allowed || denied || !would_deny)
			return allowed;
		/* Only report-only limits denied: the others decide without them. */
		for (int i = 0; i < taking; i++)
			if (!active[i].decision.allowed)
				left_out[position[i]] = true;
	}
}

namespace {

/* Takes (take) or counts the places of concurrency limit `hold`: held
 * until the transaction ends, or as a lease (whose id the call does not
 * return: it ends at its expiry, or by rate_limit_release of the id that
 * rate_limit_lease would have given). */
core::Decision
PlacesDecision(const BucketTake &hold, bool take)
{
	const int places = static_cast<int>(hold.request.cost);
	return hold.lease_us > 0
	           ? LeasePlaces(hold.name, hold.key, hold.max_held, places, hold.lease_us, take, NULL)
	           : hold.engine->hold(hold.name, hold.key, hold.max_held, places, take);
}

/* The limits of one call split by kind: buckets (into TakeEnforced) and
 * places held until the transaction ends. */
struct MixedTake {
	BucketTake *buckets;
	const bool *bucket_enforce;
	int bucket_count;
	BucketTake *holds;
	const bool *hold_enforce;
	int hold_count;
	bool buckets_allowed; /* out */
	int denied_hold;      /* out: the enforced hold that denied, or -1 */
};

/* Takes the buckets, then the places, in the subtransaction of
 * TakeMixed: kept when every enforced limit granted, or when a bucket
 * denied (what a denial records is kept; no place was taken); rolled back
 * when a place was denied, which undoes the buckets' takes. */
bool
TakeBucketsThenHolds(void *context)
{
	MixedTake &mixed = *static_cast<MixedTake *>(context);
	mixed.buckets_allowed = mixed.bucket_count == 0 ||
	                        TakeEnforced(mixed.buckets, mixed.bucket_count, mixed.bucket_enforce);
	if (!mixed.buckets_allowed)
		return true;
	for (int h = 0; h < mixed.hold_count; h++) {
		BucketTake &hold = mixed.holds[h];
		hold.decision = PlacesDecision(hold, true);
		if (!hold.decision.allowed && mixed.hold_enforce[h]) {
			mixed.denied_hold = h;
			return false;
		}
	}
	return true;
}

/* As TakeEnforced, for a call that holds places too: all or nothing over
 * both kinds.  A place that none could give denies the call before any
 * bucket is taken; otherwise the buckets are taken, then the places.  A
 * denied call holds no place; each limit but the one that denied answers
 * as it stands once nothing is taken (a check). */
bool
TakeMixed(BucketTake *takes, int count, const bool *enforce)
{
	BucketTake *buckets = static_cast<BucketTake *>(palloc(sizeof(BucketTake) * count));
	BucketTake *holds = static_cast<BucketTake *>(palloc(sizeof(BucketTake) * count));
	bool *bucket_enforce = static_cast<bool *>(palloc(sizeof(bool) * count));
	bool *hold_enforce = static_cast<bool *>(palloc(sizeof(bool) * count));
	int bucket_count = 0;
	int hold_count = 0;
	for (int b = 0; b < count; b++) {
		if (takes[b].max_held > 0) {
			hold_enforce[hold_count] = enforce[b];
			holds[hold_count++] = takes[b];
		} else {
			bucket_enforce[bucket_count] = enforce[b];
			buckets[bucket_count++] = takes[b];
		}
	}
	MixedTake mixed{buckets,      bucket_enforce, bucket_count, holds,
	                hold_enforce, hold_count,     false,        -1};
	/* A place no transaction can give now denies at once, before any bucket
	 * is taken: a bucket's row may be locked by the very transaction that
	 * holds the place, for as long as it holds it. */
	for (int h = 0; h < hold_count && mixed.denied_hold < 0; h++) {
		BucketTake &hold = holds[h];
		hold.decision = PlacesDecision(hold, false);
		if (!hold.decision.allowed && hold_enforce[h])
			mixed.denied_hold = h;
	}
	const bool kept =
	    mixed.denied_hold < 0 ? InSubtransaction(TakeBucketsThenHolds, &mixed) : false;
	const bool allowed = kept && mixed.buckets_allowed;
	if (!allowed) {
		for (int h = 0; h < hold_count; h++) {
			BucketTake &hold = holds[h];
			if (h != mixed.denied_hold)
				hold.decision = PlacesDecision(hold, false);
		}
		/* Taken, then rolled back with the places, or never taken: each
		 * answers as it stands, without waiting for a writer (a peek at
		 * what the call would take), for the call is denied already. */
		if (!kept)
			for (int b = 0; b < bucket_count; b++) {
				BucketTake &bucket = buckets[b];
				const Operation check{Operation::kPeek, bucket.request, 0.0};
				bucket.decision =
				    bucket.engine->decide(bucket.name, bucket.key, bucket.limit, check);
			}
	}
	bucket_count = 0;
	hold_count = 0;
	for (int b = 0; b < count; b++)
		takes[b].decision =
		    takes[b].max_held > 0 ? holds[hold_count++].decision : buckets[bucket_count++].decision;
	return allowed;
}

} /* namespace */

LimitList
ReadLimitList(const TakeAllCall &call)
{
	LimitList list;
	list.costs = NULL;
	list.count = ArrayElements(call.names, TEXTOID, -1, false, TYPALIGN_INT, "names", &list.names);
	int key_count = ArrayElements(call.keys, TEXTOID, -1, false, TYPALIGN_INT, "keys", &list.keys);
	int cost_count = list.count;
	if (call.costs != NULL)
		cost_count = ArrayElements(call.costs, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
		                           "costs", &list.costs);
	if (list.count == 0)
		ReportBadLimitList("No limit was given.");
	if (key_count != list.count || cost_count != list.count)
		ReportBadLimitList(psprintf("The lengths of names, keys and costs are %d, %d and %d.",
		                            list.count, key_count, cost_count));
	if (list.count > kMaxLimits)
		ReportTooManyLimits(list.count, kMaxLimits);
	return list;
}

AllDecision
TakeAllLimits(const LimitList &list, double max_wait, const Signature &signature)
{
	const int count = list.count;
	BucketTake *given = static_cast<BucketTake *>(palloc0(sizeof(BucketTake) * count));
	LimitLabel *labels = static_cast<LimitLabel *>(palloc0(sizeof(LimitLabel) * count));
	bool *given_enforce = static_cast<bool *>(palloc(sizeof(bool) * count));
	for (int i = 0; i < count; i++)
		given[i] = ResolveLimit(list, i, max_wait, &labels[i], &given_enforce[i]);

	BucketTake *takes = static_cast<BucketTake *>(palloc0(sizeof(BucketTake) * count));
	int *bucket_of = static_cast<int *>(palloc(sizeof(int) * count));
	int buckets = MergeRepeats(given, count, takes, bucket_of);

	for (int b = 1; b < buckets; b++)
		if (takes[b].engine != takes[0].engine)
			ReportMixedStorage(text_to_cstring(takes[0].name), takes[0].engine->holds,
			                   text_to_cstring(takes[b].name), takes[b].engine->holds);
	text *held = NULL; /* the first limit that holds places until the transaction ends */
	bool takes_tokens = false;
	bool leases = false;
	bool holds_places = false;
	for (int b = 0; b < buckets; b++) {
		if (takes[b].max_held > 0 && takes[b].lease_us == 0 && held == NULL)
			held = takes[b].name;
		leases = leases || (takes[b].max_held > 0 && takes[b].lease_us > 0);
		holds_places = holds_places || takes[b].max_held > 0;
		takes_tokens = takes_tokens || takes[b].max_held == 0;
	}
	if (leases && RecoveryInProgress())
		ReportLeaseRecovery(signature.function);
	if (held != NULL)
		RequireHolds(signature, held, true);
	if (takes_tokens)
		RequireEngine(*takes[0].engine, signature, true);
	/* Leases are kept in the table, whichever the storage. */
	if (leases)
		RequireLeaseWrite(signature, false);
	/* A bucket's limits are one policy's: enforced or report-only alike. */
	bool *enforce = static_cast<bool *>(palloc(sizeof(bool) * buckets));
	for (int i = 0; i < count; i++)
		enforce[bucket_of[i]] = given_enforce[i];
	bool allowed =
	    holds_places ? TakeMixed(takes, buckets, enforce) : TakeEnforced(takes, buckets, enforce);

	const BucketTake &bound = takes[bucket_of[BindingLimit(takes, bucket_of, count, allowed)]];
	Datum *remaining = static_cast<Datum *>(palloc(sizeof(Datum) * count));
	core::Decision *decisions =
	    static_cast<core::Decision *>(palloc(sizeof(core::Decision) * count));
	double *capacities = static_cast<double *>(palloc(sizeof(double) * count));
	double longest = 0.0;
	for (int i = 0; i < count; i++) {
		const BucketTake &take = takes[bucket_of[i]];
		remaining[i] = Float8GetDatum(take.decision.remaining);
		decisions[i] = take.decision;
		capacities[i] = take.limit.burst;
		/* Granted, a report-only limit's would-be denial sets no wait. */
		if (take.decision.retry_after > longest && (take.decision.allowed || !allowed))
			longest = take.decision.retry_after;
	}
	AllDecision decision;
	decision.allowed = allowed;
	decision.retry_after = allowed ? longest : bound.decision.retry_after;
	decision.count = count;
	decision.decisions = decisions;
	decision.capacities = capacities;
	decision.labels = labels;
	decision.binding_name = bound.name;
	decision.binding_key = bound.key;
	decision.remaining =
	    construct_array(remaining, count, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
	return decision;
}

} /* namespace ratelimit::pg */
