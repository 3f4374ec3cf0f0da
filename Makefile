# The two commands of the README. Both install missing Debian packages first.
PRESET ?= release
BUILD := build/$(PRESET)
JOBS ?= $(shell nproc)

.PHONY: deps configure build run install test test-long test-sanitize fuzz-long bench validate clean

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake --preset $(PRESET) >/dev/null

build: configure
	@cmake --build --preset $(PRESET) -j $(JOBS)

# Only the simulator: the tests, benchmarks and calibration binaries are not built for a run.
run: configure
	@cmake --build --preset $(PRESET) -j $(JOBS) --target moesim
	$(BUILD)/moesim run scenarios/quickstart.json --out out/quickstart

# The simulator into PREFIX/bin and the presets, scenarios and plotting scripts it reads into
# PREFIX/share/moesim (make install PREFIX=$$HOME/.local for a user's own).
PREFIX ?= /usr/local
install: configure
	@cmake --build --preset $(PRESET) -j $(JOBS) --target moesim
	cmake --install $(BUILD) --prefix $(PREFIX)

test: build
	ctest --preset $(PRESET)

test-long: build
	ctest --preset long

# clang with AddressSanitizer and UBSan: the unit and CLI suites, every fuzz regression and a
# 20-second fuzz run per loader (CI runs it after `make test`).
test-sanitize:
	@bash scripts/install-deps.sh sanitize
	@cmake --preset sanitize >/dev/null
	@cmake --build --preset sanitize -j $(JOBS)
	ctest --preset sanitize

# 250,000 fuzzed inputs per loader, 1,250,000 in all (not in CI: about 35 minutes on two cores).
fuzz-long:
	@bash scripts/install-deps.sh sanitize
	@cmake --preset sanitize >/dev/null
	@cmake --build --preset sanitize -j $(JOBS)
	ctest --preset fuzz-long

bench: build
	$(BUILD)/tests/moesim_bench

# docs/validation.md: moesim, uncalibrated, against every real measurement in tests/data/realdata.
validate: build
	python3 scripts/validate.py --moesim $(BUILD)/moesim

clean:
	rm -rf build out
