/*
 * src/pg/engine.cpp
 *
 * Finding an engine by its storage value.  What every engine decides
 * through is the core's: core::Apply, core::NewBucket, core::StartsBelowFull.
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

} /* namespace ratelimit::pg */
