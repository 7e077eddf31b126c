# fusebox: `make demo` and `make test` set up, configure and build, then run.
#
#   make demo    run the example programs (build/tools/fusebox/fusebox demo)
#   make test    every test (unit, lit, error, e2e) through CTest
#   make bench   the Google Benchmark suites (fused vs unfused, with ratios)
#   make format  clang-format the C++ sources (style: .clang-format)
#   make clean   remove the build directory
#
# Every target that builds first runs scripts/setup.sh, which checks (and as root installs) the
# Debian packages the build needs.

BUILD_DIR ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
FUSEBOX := $(BUILD_DIR)/tools/fusebox/fusebox
export FUSEBOX_BUILD_DIR := $(BUILD_DIR)

.PHONY: all build demo test bench format clean

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

# The Google Benchmark suites of bench/ (model_bench has its own driver: bench/run_model_bench.sh).
BENCHES ?= fusion_bench onednn_bench
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
	rm -rf $(BUILD_DIR)
