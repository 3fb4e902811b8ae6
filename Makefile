# Strata's commands. On a fresh machine: `make bench` runs the main job,
# `make test` runs the tests. Both install liblz4-dev first when it is missing
# (a fresh machine has only the runtime library), and
# the headers of strata-bench's peers: SQLite, LMDB and LevelDB.

SWIFT ?= swift
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: deps postgres-deps build test test-tsan test-postgres bench bench-postgres bench-postgres-report bench-report docs microbench crash-long corruption-long fuzz-build fuzz fuzz-long clean

deps:
	@if ! pkg-config --exists liblz4 2>/dev/null; then \
		echo "make: installing liblz4-dev (the LZ4 headers) ..."; \
		$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq liblz4-dev pkg-config; \
	fi
	@if ! pkg-config --exists sqlite3 2>/dev/null; then \
		echo "make: installing libsqlite3-dev (strata-bench's SQLite baseline) ..."; \
		$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq libsqlite3-dev pkg-config; \
	fi
	@if ! pkg-config --exists lmdb 2>/dev/null || [ ! -f /usr/include/leveldb/c.h ]; then \
		echo "make: installing liblmdb-dev and libleveldb-dev (strata-bench engine's peers) ..."; \
		$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq liblmdb-dev libleveldb-dev pkg-config; \
	fi

build: deps
	$(SWIFT) build

# The object-graph tests run with the concurrency debug switch on: every use
# of a context off its queue would trap, so a green run also proves that
# correct use never trips the checks. They run after the engine's tests, not
# beside them: on two cores the engine's long synchronous tests can occupy
# every dispatch worker, and the main queue (which the object-graph tests
# need) is drained by one of those workers under the test runner. For the
# same reason they run one at a time: side by side, the synchronous ones
# (a performAndWait blocks a worker) left the main queue undrained for 60 s
# in one CI run out of two, and every main-queue test timed out together.
# A run that hangs is stopped by scripts/watchdog.sh, which prints the stacks
# of its processes first (the limits are twice a normal run or more; TSan's
# include its build).
test: deps
	$(SWIFT) build --build-tests
	scripts/watchdog.sh 20 $(SWIFT) test --skip-build --filter StrataStoreTests
	STRATA_CONCURRENCY_DEBUG=1 scripts/watchdog.sh 30 $(SWIFT) test --skip-build --no-parallel --filter 'StrataTests|StrataMacrosTests|StrataDumpTests|StrataBenchTests|StrataFuzzTests'

# The suite under ThreadSanitizer (its own build folder: a sanitized build
# cannot share objects with the normal one). The model and crash tests run
# shorter, as everything is about ten times slower under TSan. TSan finds
# races between threads, so the engine's tests that run on one thread only
# and take minutes there (TSAN_SKIPS: the corruption matrix, the key index
# against a dictionary) are left to `test`, which runs them whole. The
# object-graph tests run one at a time here too: side by side, a main-queue
# test's block went undrained for 60 s in one CI run, as in `test` before.
TSAN_SKIPS = CorruptionMatrixTests/everyTruncationAndBitFlip|KeyIndexTests/(randomizedAgainstDictionary|replaceAllEqualsOneReplacePerKey|insertAscendingEqualsOneInsertPerKey|builderEqualsIncrementalInsert|bulkBuildEqualsIncrementalInsert)
test-tsan: deps
	STRATA_MODEL_OPERATIONS=$${STRATA_MODEL_OPERATIONS:-20000} STRATA_CRASH_CYCLES=$${STRATA_CRASH_CYCLES:-6} \
		STRATA_READER_BATCHES=$${STRATA_READER_BATCHES:-300} scripts/watchdog.sh 50 $(SWIFT) test --sanitize=thread --scratch-path .build-tsan \
		--filter StrataStoreTests --skip '$(TSAN_SKIPS)'
	STRATA_SANITIZED=1 STRATA_CONCURRENCY_DEBUG=1 STRATA_CONTAINER_CRASH_CYCLES=$${STRATA_CONTAINER_CRASH_CYCLES:-20} \
		scripts/watchdog.sh 40 $(SWIFT) test --sanitize=thread --scratch-path .build-tsan --no-parallel --filter 'StrataTests|StrataMacrosTests|StrataDumpTests|StrataBenchTests|StrataFuzzTests'

# PostgreSQL 15 and openssl from Debian: the PostgreSQL store's tests and
# benchmark start a server of their own, with a certificate.
postgres-deps: deps
	@if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || ! command -v openssl >/dev/null; then \
		echo "make: installing postgresql and openssl (the PostgreSQL store's tests and benchmark start a server of their own) ..."; \
		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql openssl; \
	fi

# The PostgreSQL store's package (Postgres/, a package of its own so that
# the root's builds never build NIO): built once, in debug, and tested
# against a PostgreSQL server of their own, started here in a temporary
# directory and stopped after (scripts/postgres-server.sh, which makes a
# certificate with openssl), so Debian's postgresql and openssl are
# installed first when missing. It is not run under ThreadSanitizer: the
# locking it relies on is the coordinator's, which test-tsan covers.
test-postgres: postgres-deps
	$(SWIFT) build --package-path Postgres --build-tests
	@server=$$(mktemp -d); trap 'scripts/postgres-server.sh stop "$$server"; rm -rf "$$server"' EXIT; \
		scripts/postgres-server.sh start "$$server" && \
		STRATA_POSTGRES_SERVER_DIR="$$server" scripts/watchdog.sh 10 $(SWIFT) test --package-path Postgres --skip-build

# The main job: strata-bench in release mode — main-queue stalls per stack
# layout beside SQLite (the default scenario), then reads (a lookup among
# 1,000,000 objects from background contexts, beside SQLite), find-or-create
# and upserts under a uniqueness constraint (beside SQLite), an app's
# catalogue import in five styles and a server's request loop (beside
# SQLite), reader processes following a writer (beside SQLite), persistent
# history's cost, a fetched-results controller's cost, batch requests (beside
# SQLite), the object graph's and the engine's figures; see README.
bench: deps
	$(SWIFT) run -c release strata-bench
	$(SWIFT) run -c release strata-bench reads
	$(SWIFT) run -c release strata-bench lookup
	$(SWIFT) run -c release strata-bench upsert
	$(SWIFT) run -c release strata-bench import
	$(SWIFT) run -c release strata-bench pages
	$(SWIFT) run -c release strata-bench server
	$(SWIFT) run -c release strata-bench follow
	$(SWIFT) run -c release strata-bench history
	$(SWIFT) run -c release strata-bench observe
	$(SWIFT) run -c release strata-bench batch
	$(SWIFT) run -c release strata-bench compaction
	$(SWIFT) run -c release strata-bench graph
	$(SWIFT) run -c release strata-bench engine

# The PostgreSQL store's figures (strata-bench-postgres, release): saves of
# 100 objects from 1, 2 and 4 processes beside postgres-nio alone, a save's
# way into another process's view context, a unique lookup beside a prepared
# SELECT, and SIGKILL cycles — against a server of its own, started in a
# temporary directory and stopped after (as for make test-postgres).
bench-postgres: postgres-deps
	$(SWIFT) build -c release --package-path Postgres --product strata-bench-postgres
	@server=$$(mktemp -d); trap 'scripts/postgres-server.sh stop "$$server"; rm -rf "$$server"' EXIT; \
		scripts/postgres-server.sh start "$$server" && \
		Postgres/.build/release/strata-bench-postgres --server-dir "$$server" $(ARGS)

# Postgres/BENCHMARKS.md, regenerated from one run of bench-postgres
# (scripts/bench-postgres-report.sh; about 3 minutes once built).
bench-postgres-report: postgres-deps
	SWIFT=$(SWIFT) scripts/bench-postgres-report.sh $(ARGS)

# BENCHMARKS.md and the README's headline figures, regenerated from one run
# of every scenario `bench` runs (scripts/bench-report.sh; about 25 minutes on 2 cores).
bench-report: deps
	SWIFT=$(SWIFT) scripts/bench-report.sh

# The DocC catalogs of Strata and StrataStore, from the modules' public symbol
# graphs, with warnings as errors; then every public symbol must have a doc
# comment (scripts/doc-coverage.py). Output in .build/docs.
docs: deps
	SWIFT=$(SWIFT) scripts/docs.sh

# Micro-benchmarks of the hot paths (ordo-one/benchmark, a nested package).
microbench: deps
	cd Benchmarks && $(SWIFT) package --disable-sandbox benchmark --no-progress

# Many more crash cycles than CI runs, for the engine (CrashTests), for a
# PersistentContainer (ContainerCrashTests) and for a reader process
# following one (FollowingAStoreTests):
#   STRATA_CRASH_CYCLES=5000 STRATA_CONTAINER_CRASH_CYCLES=5000 make crash-long
crash-long: deps
	STRATA_CRASH_CYCLES=$${STRATA_CRASH_CYCLES:-2000} STRATA_CONTAINER_CRASH_CYCLES=$${STRATA_CONTAINER_CRASH_CYCLES:-2000} \
		STRATA_FOLLOW_CYCLES=$${STRATA_FOLLOW_CYCLES:-200} $(SWIFT) test --filter 'CrashTests|ContainerCrashTests|FollowingAStoreTests' 

# The corruption matrix on every offset of every file of its store (make test
# runs a dense deterministic sample): each file truncated at, and a bit flipped
# at, each offset, then opened, read whole and verified.
corruption-long: deps
	STRATA_CORRUPTION_FULL=1 $(SWIFT) test --filter CorruptionMatrixTests

# libFuzzer on every decoder that reads bytes from disk (Fuzz/README.md).
# strata-fuzz built with libFuzzer and AddressSanitizer, in release mode (the
# sanitizers keep their checks; debug Swift is ten times slower), in its own
# build folder. lld links it: gold prints a warning per ASan symbol.
FUZZ_BUILD := $(SWIFT) build -c release --product strata-fuzz --scratch-path .build-fuzz \
	-Xswiftc -sanitize=fuzzer,address -Xswiftc -DSTRATA_FUZZING -Xswiftc -use-ld=lld

fuzz-build: deps
	$(FUZZ_BUILD)

# A short run of every target (FUZZ_SECONDS each, 20 by default): CI's job.
# Fails on any crash, trap, timeout or ASan report; the input is kept in
# .build-fuzz/artifacts/<target>/.
fuzz: fuzz-build
	Fuzz/fuzz.sh $${FUZZ_SECONDS:-20}

# Long runs: FUZZ_SECONDS=3600 make fuzz-long (per target), or one target:
# FUZZ_SECONDS=3600 FUZZ_TARGETS=segment make fuzz-long
fuzz-long: fuzz-build
	Fuzz/fuzz.sh $${FUZZ_SECONDS:-3600} $${FUZZ_TARGETS:-}

clean:
	rm -rf .build .build-tsan .build-fuzz
