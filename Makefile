# The two promised commands: `make demo` and `make test`. Both install missing Debian packages
# (as root; otherwise they print the apt command), configure with CMake presets, build and run.
SHELL := /bin/bash
# ccache: paths relative to the checkout, build directory not hashed, so that clones elsewhere on
# the machine (CI's) reuse each other's objects.
export CCACHE_BASEDIR ?= $(CURDIR)
export CCACHE_NOHASHDIR ?= 1
JOBS ?= 2
BUILD_DEV := build/dev
BUILD_RELEASE := build/release

.PHONY: deps build release test demo bench asan tsan fuzz format clean

deps:
	@scripts/install-deps.sh

build: deps
	cmake --preset dev >/dev/null
	cmake --build --preset dev -j $(JOBS)

release: deps
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS)

# `make test SANITIZE=address,undefined` builds and runs the same suite (benchmark tools included)
# under AddressSanitizer + UBSan (preset asan) instead of the dev preset; CI runs it that way, so
# one build covers the README's command and the sanitizers.
SANITIZE ?=
TEST_PRESET := $(if $(filter address%,$(SANITIZE)),asan,dev)

test: deps
	cmake --preset $(TEST_PRESET) >/dev/null
	cmake --build --preset $(TEST_PRESET) -j $(JOBS)
	ctest --preset $(TEST_PRESET) -j $(JOBS)

demo: release
	scripts/demo.sh $(BUILD_RELEASE)/src/app/linkfit

bench: release
	scripts/bench.sh $(BUILD_RELEASE)

asan: deps
	cmake --preset asan >/dev/null
	cmake --build --preset asan -j $(JOBS)
	ctest --preset asan -j $(JOBS)

tsan: deps
	cmake --preset tsan >/dev/null
	cmake --build --preset tsan -j $(JOBS)
	ctest --preset tsan -j $(JOBS)

fuzz:
	LINKFIT_WITH_CLANG=1 scripts/install-deps.sh
	scripts/run-fuzzers.sh

format:
	git ls-files '*.h' '*.cc' | xargs clang-format -i

clean:
	rm -rf build
