/*
 * src/pg/shmem.cpp
 *
 * Shared memory set aside at server start for the segments requested while
 * the library is preloaded, and named DSM segments (PostgreSQL 17 and
 * later) for the others (see shmem.hpp).  One shmem_request_hook and one
 * shmem_startup_hook serve every segment, in the order they were requested.
 *
 * Locking rules
 * - Requests and hooks run in the postmaster while it starts, before any
 *   backend exists: the list of segments needs no lock.
 * - Each segment is created or attached under AddinShmemInitLock
 *   (ShmemInitStruct), its init and startup callbacks with it; a named DSM
 *   segment is created under the DSM registry's own lock.
 * - What a segment holds has locking rules of its own, in the file that
 *   defines it.
 */
#include "pg/shmem.hpp"

namespace ratelimit::pg {

namespace {

/* Segments requested at server start, in order. */
constexpr int kMaxSegments = 4;
SharedSegment *segments[kMaxSegments];
int segment_count = 0;

RlShmemRequestHook prev_shmem_request_hook = NULL;
shmem_startup_hook_type prev_shmem_startup_hook = NULL;

[[maybe_unused]] void
RequestSegments()
{
	RlChainShmemRequest(prev_shmem_request_hook);
	for (int i = 0; i < segment_count; i++)
		RequestAddinShmemSpace(segments[i]->size());
}

void
StartSegments()
{
	if (prev_shmem_startup_hook != NULL)
		prev_shmem_startup_hook();
	for (int i = 0; i < segment_count; i++) {
		SharedSegment *segment = segments[i];
		bool found;
		LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
		void *memory = ShmemInitStruct(segment->name, segment->size(), &found);
		if (!found)
			segment->init(memory);
		if (segment->startup != NULL)
			segment->startup(memory, !found);
		LWLockRelease(AddinShmemInitLock);
		segment->memory = memory;
	}
}

} /* namespace */

void
RequestSharedSegment(SharedSegment *segment)
{
	Assert(process_shared_preload_libraries_in_progress);
	if (segment_count == kMaxSegments)
		elog(ERROR, "ratelimit requests more than %d shared memory segments", kMaxSegments);
	if (segment_count == 0) {
		RlHookShmemRequest(prev_shmem_request_hook, RequestSegments);
		prev_shmem_startup_hook = shmem_startup_hook;
		shmem_startup_hook = StartSegments;
	}
	segments[segment_count++] = segment;
	segment->preloaded = true;
	if (!kRlShmemFromHook)
		RequestAddinShmemSpace(segment->size());
}

void *
SharedSegmentMemory(SharedSegment *segment)
{
	if (segment->memory == NULL && !segment->preloaded)
		segment->memory = RlNamedSegment(segment->name, segment->size(), segment->init);
	return segment->memory;
}

} /* namespace ratelimit::pg */
