# ratelimit: PGXS build.  `make && make install`, then `make installcheck`
# against a running server; scripts/test runs every test layer on a
# throwaway cluster.

EXTENSION = ratelimit
EXTVERSION = $(shell sed -n "s/^default_version *= *'\(.*\)'/\1/p" $(EXTENSION).control)

MODULE_big = ratelimit
OBJS = \
	src/core/escrow.o \
	src/core/operation.o \
	src/core/shards.o \
	src/core/sliding_window.o \
	src/core/token_bucket.o \
	src/pg/bucket_keys.o \
	src/pg/clock.o \
	src/pg/engine.o \
	src/pg/errors.o \
	src/pg/fmgr_args.o \
	src/pg/functions.o \
	src/pg/holds.o \
	src/pg/leases.o \
	src/pg/maintenance.o \
	src/pg/memory_engine.o \
	src/pg/memory_table.o \
	src/pg/memory_undo.o \
	src/pg/module.o \
	src/pg/policies.o \
	src/pg/sharding.o \
	src/pg/shmem.o \
	src/pg/stats.o \
	src/pg/storage.o \
	src/pg/take_all.o
# The current version's scripts are made by scripts/sql-script from psql
# scripts that include the shared sources of sql/src/ (see sql/src/README):
# the native install script from sql/ratelimit.sql, the portable limiter's
# (an extension with no C module) from portable/ratelimit.sql, its psql
# script, and the upgrade scripts to the current version from
# update--<from>--<version>.sql in each directory.  The scripts of released
# versions are kept as they were: once a version is released, its scripts
# are committed and its update--*.sql templates go.
NATIVE_SCRIPT = sql/$(EXTENSION)--$(EXTVERSION).sql
PORTABLE_SCRIPT = portable/ratelimit_portable--$(EXTVERSION).sql
NATIVE_UPGRADES = $(patsubst sql/update--%,sql/$(EXTENSION)--%,$(wildcard sql/update--*.sql))
PORTABLE_UPGRADES = $(patsubst portable/update--%,portable/ratelimit_portable--%,$(wildcard portable/update--*.sql))
DATA_built = $(NATIVE_SCRIPT) $(PORTABLE_SCRIPT) $(NATIVE_UPGRADES) $(PORTABLE_UPGRADES)
DATA = $(filter-out $(DATA_built),$(wildcard sql/$(EXTENSION)--*.sql portable/ratelimit_portable--*.sql)) \
	ratelimit_portable.control
SQL_SOURCES = $(wildcard sql/src/*.sql) scripts/sql-script
NATIVE_SOURCES = sql/names.sql sql/memory_stats.sql sql/concurrency.sql sql/sliding.sql sql/buckets.sql \
	$(SQL_SOURCES)
PORTABLE_SOURCES = $(filter-out portable/ratelimit_portable--%,$(wildcard portable/*.sql)) $(SQL_SOURCES)
PGFILEDESC = "ratelimit - transactional rate limiter"

# Regression tests live by what they cover, each directory of test/sql with
# its expected output in the same directory of expected/:
#   contract/  the API as every limiter gives it: run against the native
#              extension's table engine (installcheck), the portable limiter
#              (installcheck-portable) and the memory engine (installcheck-memory)
#   native/    the native extension alone: its C module, GUCs, shared memory,
#              catalog and upgrades, and the portable limiter compared with it
#   portable/  the portable limiter's own, in its run
#   memory/    the memory engine's run's own
# A run takes its tests in the order of their names, whichever directory
# holds them (a name is in one directory only).
regress_tests = $(patsubst test/sql/%.sql,%,$(wildcard $(foreach d,$(1),test/sql/$(d)/*.sql)))
by_name = $(foreach n,$(sort $(notdir $(1))),$(filter %/$(n),$(1)))
REGRESS_DIRS = contract native portable memory
REGRESS = $(call by_name,$(call regress_tests,contract native))
# pg_regress writes results/<directory>/<name>.out, in directories it does
# not make.
REGRESS_PREP = regress-results
REGRESS_OPTS = --inputdir=test --load-extension=$(EXTENSION)
# memory_escrow needs the library preloaded: test/cluster/memory.sh runs it.
ISOLATION = $(filter-out memory_escrow,$(patsubst test/specs/%.spec,%,$(sort $(wildcard test/specs/*.spec))))
ISOLATION_OPTS = --inputdir=test --load-extension=$(EXTENSION)

# The control file is the one version source: the module's magic block
# (PostgreSQL 18) reads it through RATELIMIT_VERSION.  sql/src/limits.sql is
# the one source of the longest name and key, in the SQL scripts and here.
rl_limit = $(shell sed -n 's/^\\set $(1) \([0-9][0-9]*\)$$/\1/p' sql/src/limits.sql)
PG_CPPFLAGS = -Isrc -DRATELIMIT_VERSION='"$(EXTVERSION)"' \
	-DRATELIMIT_MAX_NAME_BYTES=$(call rl_limit,rl_max_name_bytes) \
	-DRATELIMIT_MAX_KEY_BYTES=$(call rl_limit,rl_max_key_bytes) \
	-DRATELIMIT_MAX_HELD=$(call rl_limit,rl_max_held)
PG_CXXFLAGS = -std=c++17 -fno-exceptions -fno-rtti -Wno-register
SHLIB_LINK += -lstdc++
# JIT bitcode would need clang and ignores PG_CXXFLAGS; inlining a function
# that locks and does buffer I/O gains nothing.
override with_llvm = no

PG_CONFIG ?= pg_config
# Against a server built with assertions, the core checks what it relies on
# too (RL_CORE_ASSERT in src/core/check.hpp); the unit tests always do.
ifneq ($(findstring --enable-cassert,$(shell $(PG_CONFIG) --configure)),)
PG_CPPFLAGS += -DRATELIMIT_CORE_ASSERTS
endif
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)
# A server built by g++ 13 or later passes -fexcess-precision=standard for
# C++ too, which older g++ refuses; it only affects x87 arithmetic (32-bit
# x86), not x86-64's.
override CXXFLAGS := $(filter-out -fexcess-precision=standard,$(CXXFLAGS))

$(OBJS): $(wildcard src/core/*.hpp src/pg/*.hpp) sql/src/limits.sql

$(NATIVE_SCRIPT): sql/$(EXTENSION).sql $(NATIVE_SOURCES)
	scripts/sql-script $< > $@.tmp && mv $@.tmp $@

$(NATIVE_UPGRADES): sql/$(EXTENSION)--%: sql/update--% $(NATIVE_SOURCES)
	scripts/sql-script --upgrade $< > $@.tmp && mv $@.tmp $@

$(PORTABLE_SCRIPT): portable/ratelimit.sql $(PORTABLE_SOURCES)
	scripts/sql-script $< rl_schema=@extschema@ > $@.tmp && mv $@.tmp $@

$(PORTABLE_UPGRADES): portable/ratelimit_portable--%: portable/update--% $(PORTABLE_SOURCES)
	scripts/sql-script --upgrade $< rl_schema=@extschema@ > $@.tmp && mv $@.tmp $@

regress-results:
	mkdir -p $(addprefix results/,$(REGRESS_DIRS))

# --- the contract against the portable limiter and the memory engine ---
# overlaid_run RUN TESTS [OPTIONS]: the tests into output_RUN, with the
# expected output of expected/ but where expected/RUN/contract/ has a file
# of the same name: the documented differences of RUN (see the README
# there).  hostile_schema, which reinstalls the native extension so that
# the tests after it start afresh, has RUN/RUN_reinstall in its place.
# pg_regress takes expected files from its input directory before
# PostgreSQL 16, from --expecteddir (by default the current one) since.
expected_in = $(if $(filter 13 14 15,$(MAJORVERSION)),,--expecteddir=$(1))
overlaid_run = rm -rf output_$(1) && mkdir -p output_$(1)/input $(addprefix output_$(1)/results/,$(REGRESS_DIRS)) && \
	ln -s $(CURDIR)/test/sql output_$(1)/input/sql && cp -R expected output_$(1)/input/expected && \
	if [ -d expected/$(1)/contract ]; then cp expected/$(1)/contract/*.out output_$(1)/input/expected/contract/; fi && \
	$(pg_regress_installcheck) --inputdir=output_$(1)/input $(call expected_in,output_$(1)/input) \
		--outputdir=output_$(1) $(3) \
		$(2) $(patsubst native/hostile_schema,$(1)/$(1)_reinstall,$(filter contract/% native/hostile_schema,$(REGRESS)))

# The extension ratelimit_portable in place of ratelimit: portable_setup
# (which creates it) and portable_maintenance first.  psql runs without
# CONTEXT lines: the portable limiter's errors are raised in PL/pgSQL.
installcheck-portable: $(PORTABLE_SCRIPT)
	$(call overlaid_run,portable,portable/portable_setup portable/portable_maintenance portable/portable_yugabytedb \
		portable/portable_concurrency_holds portable/portable_concurrency_leases portable/portable_sliding_window,\
		--launcher=$(CURDIR)/test/portable/psql-launcher)

# Every policy's buckets in the memory engine where it can hold them:
# memory_setup first.  Before PostgreSQL 17 the server must preload the
# library (test/cluster/memory.sh runs this on such a server).
installcheck-memory:
	$(call overlaid_run,memory,memory/memory_setup memory/memory_concurrency_holds memory/memory_concurrency_leases memory/memory_sliding_window,--load-extension=$(EXTENSION))

# Tests of what older servers lack: GRANT SET ON PARAMETER is 15's.
REGRESS_SINCE_15 = native/fixed_clock_grant
ifeq ($(shell test $(MAJORVERSION) -lt 15 && echo older),older)
REGRESS := $(filter-out $(REGRESS_SINCE_15),$(REGRESS))
endif

# --- unit tests: src/core alone, no PostgreSQL include path, sanitizers on ---
UNIT_CXXFLAGS = -std=c++17 -g -O1 -Wall -Wextra -Werror -fno-omit-frame-pointer -DRATELIMIT_CORE_ASSERTS \
	-fsanitize=address,undefined -fno-sanitize-recover=all
UNIT_BIN = test/unit/ratelimit_unit

$(UNIT_BIN): $(wildcard src/core/*.cpp src/core/*.hpp test/unit/*.cpp test/unit/*.hpp)
	$(CXX) $(UNIT_CXXFLAGS) -Isrc/core -o $@ $(wildcard src/core/*.cpp) \
		$(wildcard test/unit/*.cpp) -lgtest -lgtest_main -pthread

unit: $(UNIT_BIN)
	$(UNIT_BIN)

# --- load generator (libpq) ---
LOAD_BIN = test/load/ratelimit_load

$(LOAD_BIN): $(wildcard test/load/*.cpp test/load/*.hpp)
	$(CXX) -std=c++17 -O2 -Wall -Wextra -I$(shell $(PG_CONFIG) --includedir) \
		-o $@ $(wildcard test/load/*.cpp) -L$(shell $(PG_CONFIG) --libdir) -lpq -pthread

load: $(LOAD_BIN)

# --- isolation specs at one isolation level (every session's default) ---
# PGOPTIONS is exported (the PGXS macro is "echo ... && pg_isolation_regress")
# with the space escaped as libpq expects; the level actually in force is
# checked before the run.
empty :=
space := $(empty) $(empty)
ISOLATION_LEVEL ?= read committed
ISOLATION_OUTPUT = output_iso/$(subst $(space),_,$(ISOLATION_LEVEL))
isolationcheck:
	@mkdir -p $(ISOLATION_OUTPUT)
	export PGOPTIONS="$$PGOPTIONS -c default_transaction_isolation=$(subst $(space),\ ,$(ISOLATION_LEVEL))"; \
	level=$$(psql -X -A -t -d postgres -c 'SHOW default_transaction_isolation') || exit 1; \
	if [ "$$level" != "$(ISOLATION_LEVEL)" ]; then \
		echo "isolationcheck: sessions run at '$$level', not '$(ISOLATION_LEVEL)'" >&2; exit 1; \
	fi; \
	$(pg_isolation_regress_installcheck) $(ISOLATION_OPTS) \
		--outputdir=$(ISOLATION_OUTPUT) $(ISOLATION)

# --- the release archive, as uploaded to PGXN: the tracked files of DIST_REF ---
DIST_REF ?= HEAD
DIST_DIR ?= .
dist:
	git archive --format=tar.gz --prefix=$(EXTENSION)-$(EXTVERSION)/ \
		-o $(DIST_DIR)/$(EXTENSION)-$(EXTVERSION).tar.gz $(DIST_REF)

demo:
	scripts/demo

bench:
	bench/run

bench-instructions:
	bench/instructions

bench-portable:
	bench/portable

test:
	scripts/test

EXTRA_CLEAN = $(UNIT_BIN) $(LOAD_BIN) output_iso output_portable output_memory

.PHONY: unit load isolationcheck installcheck-portable installcheck-memory regress-results dist demo test bench bench-instructions bench-portable
