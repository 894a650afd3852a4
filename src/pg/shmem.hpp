/*
 * src/pg/shmem.hpp
 *
 * Named pieces of shared memory of the extension (the memory engine's
 * table, the counters of rate_limit_stats), each described once by a
 * SharedSegment: set aside at server start when the library is preloaded
 * (shared_preload_libraries), else, from PostgreSQL 17, a named DSM segment
 * created by the first backend that needs it.
 */
#ifndef RATELIMIT_PG_SHMEM_HPP
#define RATELIMIT_PG_SHMEM_HPP

#include "pg/pg_includes.hpp"

namespace ratelimit::pg {

/* A named piece of shared memory: plain data, one static instance for each,
 * whose last two fields are this backend's. */
struct SharedSegment {
	const char *name;
	Size (*size)();             /* its size, from settings fixed at server start */
	void (*init)(void *memory); /* sets up memory just created */
	/* Preloaded only, or NULL: called in the postmaster (and in any process
	 * that attaches at its start), under AddinShmemInitLock, once the memory
	 * is attached; `created`: init has just set it up. */
	void (*startup)(void *memory, bool created);
	void *memory;   /* this backend's view: NULL until attached */
	bool preloaded; /* set aside at server start */
};

/* Sets `segment` aside at server start: from _PG_init while the library is
 * being preloaded (process_shared_preload_libraries_in_progress). */
void RequestSharedSegment(SharedSegment *segment);

/* The memory of `segment`, attaching to it (from PostgreSQL 17 without
 * preloading, creating it) if this backend has not yet; NULL when there is
 * none for it (before 17, without preloading).  Attaching a DSM segment can
 * raise an error. */
void *SharedSegmentMemory(SharedSegment *segment);

} /* namespace ratelimit::pg */

#endif
