# Two entry points for users: `make demo` and `make test`. Both create .venv when missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install bench audit reach llm-audit clean docs

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/bht design examples/A.npy examples/B.npy --energy 1.0

test: $(STAMP)
	$(BIN)/python -m pytest

# docs/cli.md (every --help) and docs/json.md (every --json key); tests/test_docs.py fails when stale.
docs: $(STAMP)
	$(BIN)/python -m bhtcli.cli.docs

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_design.py

# The quantization audit of a real model (examples/quantization_audit; a few minutes).
audit: $(STAMP)
	examples/quantization_audit/setup.sh
	$(BIN)/python examples/quantization_audit/audit.py

# Which real prompt makes the int8 round-trip most detectable (examples/reachable_audit; ~5 min).
reach: $(STAMP)
	examples/reachable_audit/setup.sh
	$(BIN)/python examples/reachable_audit/audit.py

# Which prompt makes a re-encoded SmolLM2-135M detectable, and which of three builds answers
# (examples/llm_audit; 18-19 min measured at a load average of 10 on 2 cores, about 11
# estimated at 4; not part of `make test`). A smaller run: make llm-audit LLM_AUDIT_ARGS=--quick
LLM_AUDIT_ARGS ?=
llm-audit: $(STAMP)
	examples/llm_audit/setup.sh
	$(BIN)/python examples/llm_audit/audit.py $(LLM_AUDIT_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info bhtcli/__pycache__ tests/__pycache__
