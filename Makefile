# One command per job. Every target sets up what it needs first.
UV_VERSION := 0.13.8
UV ?= $(shell command -v uv 2>/dev/null || echo $(HOME)/.local/bin/uv)
PROTO_SRC := proto/sessionstore/v1/session_store.proto
PROTO_OUT := proto/sessionstore/v1/session_store_pb2.py

.PHONY: setup run test lint proto proto-check bench clean

$(UV):
	python3 -m pip install --quiet --user "uv==$(UV_VERSION)" || python3 -m pip install --quiet "uv==$(UV_VERSION)"

.venv/.synced: pyproject.toml uv.lock | $(UV)
	$(UV) sync --frozen --all-groups
	touch $@

setup: .venv/.synced

proto: setup
	$(UV) run --frozen python -m grpc_tools.protoc -I . \
		--python_out=. --grpc_python_out=. --mypy_out=. $(PROTO_SRC)

# Fails when the committed generated code is not what `make proto` gives.
proto-check: setup
	@tmp=$$(mktemp -d) && \
	$(UV) run --frozen python -m grpc_tools.protoc -I . \
		--python_out=$$tmp --grpc_python_out=$$tmp --mypy_out=$$tmp $(PROTO_SRC) && \
	for f in session_store_pb2.py session_store_pb2_grpc.py session_store_pb2.pyi; do \
		cmp -s $$tmp/proto/sessionstore/v1/$$f proto/sessionstore/v1/$$f || \
		{ echo "proto/sessionstore/v1/$$f is stale: run 'make proto' and commit"; rm -rf $$tmp; exit 1; }; \
	done; rm -rf $$tmp; echo "generated code is up to date"

run: setup
	$(UV) run --frozen python -m services.server

test: setup proto-check
	$(UV) run --frozen pytest

lint: setup proto-check
	$(UV) run --frozen ruff check .
	$(UV) run --frozen ruff format --check .
	$(UV) run --frozen mypy

bench: setup
	$(UV) run --frozen python -m tests.bench

clean:
	rm -rf .venv data .pytest_cache .mypy_cache .ruff_cache
