/*
 * src/pg/engine.cpp
 *
 * Finding an engine by its storage value, and the subtransaction an
 * all-or-nothing take runs in.  What every engine decides through is the
 * core's: core::Apply, core::NewBucket, core::StartsBelowFull.
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
InSubtransaction(bool (*body)(void *context), void *context)
{
	MemoryContext memory = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(memory);
	bool kept = false;
	PG_TRY();
	{
		kept = body(context);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(memory);
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(memory);
		CurrentResourceOwner = owner;
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (kept)
		ReleaseCurrentSubTransaction();
	else
		RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(memory);
	CurrentResourceOwner = owner;
	return kept;
}

} /* namespace ratelimit::pg */
