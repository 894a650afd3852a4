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
	src/core/token_bucket.o \
	src/pg/bucket_keys.o \
	src/pg/clock.o \
	src/pg/engine.o \
	src/pg/errors.o \
	src/pg/fmgr_args.o \
	src/pg/functions.o \
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
# The portable limiter as an extension with no C module: the current
# version's script made from portable/*.sql (portable/ratelimit.sql is the
# psql script); the scripts of released versions are kept as they were.
PORTABLE_SCRIPT = portable/ratelimit_portable--$(EXTVERSION).sql
DATA = $(wildcard sql/$(EXTENSION)--*.sql) ratelimit_portable.control \
	$(filter-out $(PORTABLE_SCRIPT),$(wildcard portable/ratelimit_portable--*.sql))
DATA_built = $(PORTABLE_SCRIPT)
PGFILEDESC = "ratelimit - transactional rate limiter"

# Regression inputs live in test/sql, expected output in ./expected.  No test
# may be named like a file in ./sql: pg_regress looks there first.
REGRESS = $(filter-out portable_setup portable_reinstall portable_maintenance,$(patsubst test/sql/%.sql,%,$(sort $(wildcard test/sql/*.sql))))
REGRESS_OPTS = --inputdir=test --load-extension=$(EXTENSION)
# memory_escrow needs the library preloaded: test/cluster/memory.sh runs it.
ISOLATION = $(filter-out memory_escrow,$(patsubst test/specs/%.spec,%,$(sort $(wildcard test/specs/*.spec))))
ISOLATION_OPTS = --inputdir=test --load-extension=$(EXTENSION)

# The control file is the one version source: the module's magic block
# (PostgreSQL 18) reads it through RATELIMIT_VERSION.
PG_CPPFLAGS = -Isrc -DRATELIMIT_VERSION='"$(EXTVERSION)"'
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

$(OBJS): $(wildcard src/core/*.hpp src/pg/*.hpp)

$(PORTABLE_SCRIPT): $(filter-out $(PORTABLE_SCRIPT),$(wildcard portable/*.sql)) portable/extension-script
	portable/extension-script > $@

# --- the shared regression suite against the portable limiter ---
# The extension ratelimit_portable in place of ratelimit: portable_setup
# (which creates it) first, then every test of the contract.  NATIVE_ONLY tests are of what the
# portable limiter does not have (the C module, its GUCs and shared memory,
# upgrades of the native scripts) or the algebra compared against itself;
# portable_reinstall takes the place of hostile_schema, which reinstalls the
# native extension.
# Expected output is shared; test/portable/expected holds the files of
# documented differences, laid over it.
NATIVE_ONLY = portable_setup portable_reinstall portable_maintenance portable_core portable_api install upgrade old_signatures \
	table_shape schema_ratelimit stats logged_state fixed_clock_grant policy_lookup result_types \
	state_guard parallel legacy_shapes memory
PORTABLE_OUTPUT = output_portable
installcheck-portable: $(PORTABLE_SCRIPT)
	rm -rf $(PORTABLE_OUTPUT) && mkdir -p $(PORTABLE_OUTPUT)/input/expected
	ln -s $(CURDIR)/test/sql $(PORTABLE_OUTPUT)/input/sql
	cp expected/*.out $(PORTABLE_OUTPUT)/input/expected/
	cp test/portable/expected/*.out $(PORTABLE_OUTPUT)/input/expected/ 2>/dev/null || true
	$(pg_regress_installcheck) --inputdir=$(PORTABLE_OUTPUT)/input --outputdir=$(PORTABLE_OUTPUT) \
		--launcher=$(CURDIR)/test/portable/psql-launcher \
		portable_setup portable_maintenance $(patsubst hostile_schema,portable_reinstall,$(filter-out $(NATIVE_ONLY),$(REGRESS)))

# Tests of what older servers lack: GRANT SET ON PARAMETER is 15's.
REGRESS_SINCE_15 = fixed_clock_grant
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

test:
	scripts/test

EXTRA_CLEAN = $(UNIT_BIN) $(LOAD_BIN) output_iso output_portable

.PHONY: unit load isolationcheck installcheck-portable dist demo test bench
