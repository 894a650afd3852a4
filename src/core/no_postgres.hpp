/*
 * src/core/no_postgres.hpp
 *
 * Compile-time guard: the bucket algebra must stay free of PostgreSQL.
 * Every source file in src/core includes this header after all its other
 * includes, so a PostgreSQL header reached from the core, directly or through
 * a core header, stops the build.  (The boundary in src/pg includes core
 * headers after postgres.h, so the guard lives in core sources, not headers.)
 * The unit tests also compile src/core without PostgreSQL's include path.
 */
#ifndef RATELIMIT_CORE_NO_POSTGRES_HPP
#define RATELIMIT_CORE_NO_POSTGRES_HPP

#if defined(POSTGRES_H) || defined(PG_VERSION_NUM) || defined(FMGR_H)
#error "src/core must not include PostgreSQL headers"
#endif

#endif
