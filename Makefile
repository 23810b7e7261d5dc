# One command per job. Every target sets up what it needs first.
UV_VERSION := 0.13.8
# uv from PATH if there is one, else a private copy installed on first use.
UV ?= $(shell command -v uv 2>/dev/null || echo .tools/bin/uv)
PROTO_SRC := proto/sessionstore/v1/session_store.proto
CLIENT_PACKAGE := clients/python/src/sessionstore_client
CLIENT_GENERATOR := clients/python/tools/generate.py
# Files and directories (_types and _methods: a module per section of the .proto).
CLIENT_GENERATED := types.py _types _methods _proto/session_store_pb2.py _proto/session_store_pb2.pyi \
	_proto/rpc_status_pb2.py _proto/rpc_status_pb2.pyi

# `make test` runs the PostgreSQL tests against this server (never skipped).
SESSIONSTORE_TEST_POSTGRES_URL ?= postgresql://postgres@127.0.0.1:5432/test
export SESSIONSTORE_TEST_POSTGRES_URL

.PHONY: setup run test test-unit test-integration test-e2e lint proto proto-check bench stress scale clean

.tools/bin/uv:
	python3 -m venv .tools
	.tools/bin/pip install --quiet "uv==$(UV_VERSION)"

# Each job installs what it needs and no more: serving needs the runtime
# dependencies only; tests and lint add the dev group, benchmarks the bench
# group. --inexact keeps what another job installed.
.venv/.synced-runtime: pyproject.toml uv.lock | $(UV)
	$(UV) sync --frozen --no-default-groups --inexact
	touch $@
.venv/.synced-dev: pyproject.toml uv.lock | $(UV)
	$(UV) sync --frozen --inexact
	touch $@
.venv/.synced-bench: pyproject.toml uv.lock | $(UV)
	$(UV) sync --frozen --all-groups --inexact
	touch $@

setup: .venv/.synced-dev
RUN := $(UV) run --frozen --no-sync

# The server's stubs, and the client's (clients/python: its protobuf modules,
# its dataclasses and its methods, one per RPC).
proto: setup
	$(RUN) python -m grpc_tools.protoc -I . \
		--python_out=. --grpc_python_out=. --mypy_out=. --mypy_grpc_out=. $(PROTO_SRC)
	$(RUN) python $(CLIENT_GENERATOR)

# Fails when the committed generated code is not what `make proto` gives.
proto-check: setup
	@tmp=$$(mktemp -d) && \
	$(RUN) python -m grpc_tools.protoc -I . \
		--python_out=$$tmp --grpc_python_out=$$tmp --mypy_out=$$tmp --mypy_grpc_out=$$tmp $(PROTO_SRC) && \
	for f in session_store_pb2.py session_store_pb2_grpc.py session_store_pb2.pyi session_store_pb2_grpc.pyi; do \
		cmp -s $$tmp/proto/sessionstore/v1/$$f proto/sessionstore/v1/$$f || \
		{ echo "proto/sessionstore/v1/$$f is stale: run 'make proto' and commit"; rm -rf $$tmp; exit 1; }; \
	done && \
	mkdir -p $$tmp/client/sessionstore_client/_proto && \
	$(RUN) python $(CLIENT_GENERATOR) $$tmp/client > /dev/null && \
	for f in $(CLIENT_GENERATED); do \
		diff -rq -x __pycache__ $$tmp/client/sessionstore_client/$$f $(CLIENT_PACKAGE)/$$f > /dev/null || \
		{ echo "$(CLIENT_PACKAGE)/$$f is stale: run 'make proto' and commit"; rm -rf $$tmp; exit 1; }; \
	done; rm -rf $$tmp; echo "generated code is up to date"

run: .venv/.synced-runtime
	$(RUN) python -m services.grpc.server

# `make test` runs every tier; each tier also has a target of its own.
test: setup proto-check
	bash .ci/ensure-postgres
	bash .ci/ensure-prometheus
	$(RUN) pytest tests/unit tests/integration tests/e2e

test-unit: setup
	$(RUN) pytest tests/unit

test-integration: setup
	bash .ci/ensure-postgres
	$(RUN) pytest tests/integration

test-e2e: setup
	bash .ci/ensure-postgres
	bash .ci/ensure-prometheus
	$(RUN) pytest tests/e2e

lint: setup proto-check
	$(RUN) ruff check .
	$(RUN) ruff format --check .
	$(RUN) mypy
	# The layers and no circles (pyproject.toml, [tool.importlinter]).
	$(RUN) lint-imports
	# The client as its users' code sees it: strict, and a user's script with it.
	$(RUN) mypy --strict clients/python/src/sessionstore_client clients/python/examples
	# The client's generator, as `make proto` runs it (its package beside the script).
	$(RUN) mypy --strict --ignore-missing-imports clients/python/tools/generate.py \
		clients/python/tools/generator
	$(UV) lock --check

bench: .venv/.synced-bench
	$(RUN) python -m tests.bench

# Servers killed and the database stopped under 32 clients, on a PostgreSQL
# cluster of its own (initdb on a free port): about 2 minutes. STRESS_SECONDS
# sets the length of the load.
stress: .venv/.synced-runtime
	$(RUN) python -m tests.stress

# The stress workload spread by gRPC's round robin over 3 servers, the read
# models kept by 2 workers (one leads), on a PostgreSQL cluster of its own; the
# same verification as stress, no faults: about a minute and a half.
# SCALE_SECONDS sets the length of the load.
scale: .venv/.synced-runtime
	$(RUN) python -m tests.stress.scale

clean:
	rm -rf .venv .tools data .pytest_cache .mypy_cache .ruff_cache
