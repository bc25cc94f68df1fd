# The Fetcher Worker's entry points. `make demo` and `make test` are the README's two commands
# (docs/testing.md says what each does).
.PHONY: demo test lint bench fmt float32-sweep

CARGO ?= cargo

## Build and show what exists so far: the key derivation a consumer needs.
demo:
	bash scripts/demo.sh

## Every test of the workspace, unit, property and integration; starts the servers they need
## (installs Go, whose encoding/json the JSON writer is compared with, pysqlbridge, which the
## SQL Server tests start one of per test, and the deploy kit's checkers through scripts/tools.sh).
test:
	bash scripts/services.sh postgres mariadb rabbitmq s3 mosquitto mongodb sqlserver go
	bash scripts/tools.sh
	$(CARGO) test --workspace --locked

## Formatting and lints, as CI checks them.
lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

## Benchmarks (never part of the tests); figures go to BENCHMARKS.md.
bench:
	bash scripts/services.sh postgres
	$(CARGO) bench -p contract --bench json_writer
	$(CARGO) bench -p engine --bench extract_vs_copy
	bash scripts/services.sh sqlserver mongodb
	$(CARGO) bench -p engine --bench extract_sqlserver
	$(CARGO) bench -p engine --bench extract_mongodb
	bash scripts/services.sh postgres rabbitmq s3
	$(CARGO) test --release -p cli --test fetch -- --ignored --nocapture bench_
	bash scripts/tools.sh valgrind
	BENCH_BEFORE_BIN=$$(bash scripts/bench-before.sh) \
	  $(CARGO) test --release -p worker --test binary -- --ignored --nocapture --test-threads=1 bench::

## The Worker from before the result became a stream (issue 17), built once into
## target/bench-before/ for the Worker benchmark's "before" figures (`make bench` calls it).
.PHONY: bench-before
bench-before:
	bash scripts/bench-before.sh

fmt:
	$(CARGO) fmt --all

## Every float32 bit pattern written by the JSON writer and by Go's encoding/json, compared
## (minutes, all cores); the result goes to BENCHMARKS.md.
float32-sweep:
	bash scripts/services.sh go
	$(CARGO) test --release --locked -p contract --test go_reference -- --ignored --nocapture every_float32

## Rewrite docs/configuration.md's configuration table and deploy/worker.env.example from the Worker's
## configuration reference (crates/worker/src/config/variables.rs); a test fails when they drift.
.PHONY: config-reference
config-reference:
	UPDATE_CONFIG_REFERENCE=1 $(CARGO) test -p worker --lib config::reference_tests

## The chaos soak and hostile inputs (long; needs root for rabbitmqctl); appends to RELIABILITY.md.
.PHONY: chaos
chaos:
	CARGO=$(CARGO) bash scripts/chaos.sh
