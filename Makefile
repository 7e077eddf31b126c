# fusebox: `make demo` and `make test` set up, configure and build, then run.
#
#   make demo    run the example programs (build/tools/fusebox/fusebox demo)
#   make test    every test (unit, lit, error, e2e) through CTest
#   make bench   the Google Benchmark suites (fused vs unfused, with ratios)
#   make test-sanitize  every test under ASan+UBSan (build-asan), then the multi-thread tests
#                under TSan (build-tsan) with OMP_NUM_THREADS=1 (docs/reliability.md says why)
#   make fuzz    the libFuzzer targets of tests/fuzz (clang, build-fuzz), FUZZ_SECONDS each
#   make format  clang-format the C++ sources (style: .clang-format)
#   make clean   remove the build directories
#
# Every target that builds first runs scripts/setup.sh, which checks (and as root installs) the
# Debian packages the build needs.

BUILD_DIR ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
FUSEBOX := $(BUILD_DIR)/tools/fusebox/fusebox
export FUSEBOX_BUILD_DIR := $(BUILD_DIR)

.PHONY: all build demo test test-sanitize fuzz bench format clean

all: build

# Configures only once (a Release build with Ninja); later runs only rebuild what changed.
build:
	@scripts/setup.sh
	@test -f $(BUILD_DIR)/CMakeCache.txt || cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD_DIR) -j $(JOBS)

demo: build
	$(FUSEBOX) demo

test: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)

# Sanitizer builds: -O1 with line tables, NDEBUG as in Release. A UBSan report aborts its test;
# ASan's leak check is on. System libraries (oneDNN, libLLVM, libgomp) are not instrumented.
# A test that failed only because LeakSanitizer's own tracer crashed at exit runs once more
# (scripts/ctest_lsan_retry.sh; docs/reliability.md says why).
ASAN_DIR ?= build-asan
TSAN_DIR ?= build-tsan
SANITIZE_CMAKE = -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG"
# The tests that run fusebox from several std::threads (the Session plan cache, the JIT, oneDNN).
TSAN_TESTS = runtime_plan_test fusion_regions_test region_codegen_test pipeline_plan_test onednn_kernels_test session_threads_test lazy_threads_test
TSAN_FILTER = SeveralThreads|AcrossThreads|ConcurrentRuns|SessionThreads
test-sanitize:
	@scripts/setup.sh
	@test -f $(ASAN_DIR)/CMakeCache.txt || cmake -S . -B $(ASAN_DIR) $(SANITIZE_CMAKE) -DFUSEBOX_SANITIZE=address,undefined
	cmake --build $(ASAN_DIR) -j $(JOBS)
	@ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 scripts/ctest_lsan_retry.sh $(ASAN_DIR) -j $(JOBS) -LE model
	@test -f $(TSAN_DIR)/CMakeCache.txt || cmake -S . -B $(TSAN_DIR) $(SANITIZE_CMAKE) -DFUSEBOX_SANITIZE=thread
	cmake --build $(TSAN_DIR) -j $(JOBS) --target $(TSAN_TESTS)
	OMP_NUM_THREADS=1 TSAN_OPTIONS="halt_on_error=1 suppressions=$(CURDIR)/tests/tsan.supp" ctest --test-dir $(TSAN_DIR) --output-on-failure -j $(JOBS) -R '$(TSAN_FILTER)'

# libFuzzer targets (clang-14 with ASan+UBSan). Each runs FUZZ_SECONDS from its seeds in
# tests/fuzz/corpus/<target>; what it learns goes to $(FUZZ_DIR)/corpus/<target>, crashers to
# $(FUZZ_DIR)/crashes/. Stops at the first crash. tests/fuzz/<target>.options adds libFuzzer flags
# for one target (lines starting with # are comments).
FUZZ_DIR ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= fbir npy onnx graph
fuzz:
	@FUSEBOX_SETUP_FUZZ=1 scripts/setup.sh
	@test -f $(FUZZ_DIR)/CMakeCache.txt || CC=clang-14 CXX=clang++-14 cmake -S . -B $(FUZZ_DIR) $(SANITIZE_CMAKE) \
	  -DFUSEBOX_FUZZ=ON -DFUSEBOX_SANITIZE=address,undefined -DBUILD_TESTING=OFF
	cmake --build $(FUZZ_DIR) -j $(JOBS) --target fuzz_targets
	@for t in $(FUZZ_TARGETS); do \
	  exe=$(FUZZ_DIR)/tests/fuzz/$${t}_fuzz; \
	  if [ ! -x $$exe ]; then echo "== $$t: not built (its component is off)"; continue; fi; \
	  echo "== $$t: $(FUZZ_SECONDS) s"; mkdir -p $(FUZZ_DIR)/corpus/$$t $(FUZZ_DIR)/crashes; \
	  dict=; [ -f tests/fuzz/$$t.dict ] && dict=-dict=tests/fuzz/$$t.dict; \
	  opts=; [ -f tests/fuzz/$$t.options ] && opts=$$(grep -v '^#' tests/fuzz/$$t.options); \
	  $$exe $$dict $$opts -max_total_time=$(FUZZ_SECONDS) -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
	    -artifact_prefix=$(FUZZ_DIR)/crashes/$$t- $(FUZZ_DIR)/corpus/$$t tests/fuzz/corpus/$$t || exit 1; \
	done

# The Google Benchmark suites of bench/ (model_bench has its own driver: bench/run_model_bench.sh).
BENCHES ?= fusion_bench onednn_bench rows_bench attention_bench lazy_bench
bench: build
	@for b in $(BENCHES); do \
	  test -x $(BUILD_DIR)/bench/$$b || { echo "make bench: $(BUILD_DIR)/bench/$$b was not built"; exit 1; }; \
	  echo "== $$b"; $(BUILD_DIR)/bench/$$b || exit 1; \
	done

FORMAT_FILES = $(shell git ls-files '*.cpp' '*.h' 2>/dev/null)
format:
	@command -v clang-format >/dev/null || { echo "make format: clang-format not found (apt-get install clang-format)"; exit 1; }
	clang-format -i --style=file $(FORMAT_FILES)

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(TSAN_DIR) $(FUZZ_DIR)
