# The two commands of the README. Both install missing Debian packages first.
PRESET ?= release
BUILD := build/$(PRESET)
JOBS ?= $(shell nproc)

.PHONY: deps configure build run test test-long bench clean

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake --preset $(PRESET) >/dev/null

build: configure
	@cmake --build --preset $(PRESET) -j $(JOBS)

run: build
	$(BUILD)/moesim run scenarios/quickstart.json --out out/quickstart

test: build
	ctest --preset $(PRESET)

test-long: build
	ctest --preset long

bench: build
	$(BUILD)/tests/moesim_bench

clean:
	rm -rf build out
