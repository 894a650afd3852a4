/*
 * bench/noop_decision.c
 *
 * The floor of a rate limit call: a C function that answers every call with
 * the same rate_limit_decision row, without reading its arguments, a policy
 * or a bucket.  bench/run builds it into its throwaway cluster only and
 * calls it as the memory engine's hot key is called: what PostgreSQL costs
 * for any C function whose row is read in FROM (a catalog lookup for the
 * function, the row type's descriptor, a tuplestore), which no engine can
 * go below.  Its row type's descriptor is looked up once, as the
 * extension keeps its own.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

PG_MODULE_MAGIC;

PG_FUNCTION_INFO_V1(noop_decision);

Datum
noop_decision(PG_FUNCTION_ARGS)
{
	/* The row type, looked up once: the bench never alters it. */
	static TupleDesc desc = NULL;
	Interval per = {0};
	Datum values[9];
	bool nulls[9] = {false};

	if (desc == NULL) {
		TupleDesc found;
		MemoryContext old;

		if (get_call_result_type(fcinfo, NULL, &found) != TYPEFUNC_COMPOSITE || found->natts != 9)
			ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
			                errmsg("noop_decision must return rate_limit_decision")));
		old = MemoryContextSwitchTo(TopMemoryContext);
		desc = BlessTupleDesc(CreateTupleDescCopy(found));
		MemoryContextSwitchTo(old);
	}
	per.time = USECS_PER_SEC;
	values[0] = BoolGetDatum(true);  /* allowed */
	values[1] = Float8GetDatum(1.0); /* remaining */
	values[2] = Float8GetDatum(0.0); /* retry_after */
	values[3] = Float8GetDatum(0.0); /* reset_after */
	values[4] = Float8GetDatum(1.0); /* capacity */
	values[5] = PG_GETARG_DATUM(0);  /* name (the function is STRICT) */
	values[6] = Float8GetDatum(1.0); /* quota */
	values[7] = IntervalPGetDatum(&per);
	values[8] = Float8GetDatum(0.0); /* refill_after */
	return HeapTupleGetDatum(heap_form_tuple(desc, values, nulls));
}
