# Two entry points for users: `make demo` and `make test`. Both create .venv when missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# llama.cpp (the engine behind `bht prompts`) builds from source through llama-cpp-python: a
# portable build (no -march=native; x86-64-v3 kernels on x86_64), without the multimodal
# library, on every core: ~7 minutes on 2 quiet cores, once (pip caches the wheel).
ENGINE_CPU := $(if $(filter x86_64,$(shell uname -m)),-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON)
ENGINE_BUILD := CMAKE_ARGS="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF $(ENGINE_CPU)" CMAKE_BUILD_PARALLEL_LEVEL=$(shell nproc 2>/dev/null || echo 2)

.PHONY: demo test test-fast install bench audit reach llm-audit clean docs fuzz

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(ENGINE_BUILD) $(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/bht design examples/A.npy examples/B.npy --energy 1.0

test: $(STAMP)
	$(BIN)/python -m pytest

# The development loop: every test not marked slow (docs/testing.md), under 2 minutes on 2 cores.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow"

# docs/cli.md (every --help) and docs/json.md (every --json key); tests/test_docs.py fails when stale.
# Then every `$ bht ...` block of README.md and docs/ rerun with its real output (solver
# bookkeeping such as iterations differs by BLAS; tests/test_readme.py masks only that).
docs: $(STAMP)
	$(BIN)/python -m bhtcli.cli.docs
	$(BIN)/python examples/refresh_readme.py

# The hostile-file campaign (tests/fuzz/): 10,000 seeded cases through every reader, ~1 in 20
# through the real `bht`; fails on any traceback, hang or out-of-memory exit (docs/testing.md).
FUZZ_ARGS ?= --cases 10000 --seed 35 --jobs 2 --keep ../fuzz-failures
fuzz: $(STAMP)
	cd tests && ../$(BIN)/python -m fuzz $(FUZZ_ARGS)

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

# Which GGUF build is behind an API: SmolLM2-135M (Q4_1 vs Q8_0 and Q5_0) and gemma-3-270m
# (Q4_K_M vs Q8_0) through bht quantize and bht prompts, counts checked on engine-drawn
# answers (examples/llm_audit, docs/llm_audit.md; not part of `make test`). The default run was
# not timed in one piece: its parts took 5-27 min each side by side at a load of 12-16 on 2
# cores (docs/llm_audit.md, What is not done); within 15 min on a quiet machine is not shown.
# A smaller run: make llm-audit LLM_AUDIT_ARGS=--quick
LLM_AUDIT_ARGS ?=
llm-audit: $(STAMP)
	examples/llm_audit/setup.sh
	$(BIN)/python examples/llm_audit/audit.py $(LLM_AUDIT_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info bhtcli/__pycache__ tests/__pycache__
