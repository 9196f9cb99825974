#!/usr/bin/env bash
# The whole loop on the bundled example: design a query, let a black box (here: model B)
# answer it, and decide from the answers which model it is.
set -euo pipefail
cd "$(dirname "$0")"
BHT=${BHT:-../.venv/bin/bht}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "1. design the query (budget ||x|| <= 1)"
$BHT design A.npy B.npy --energy 1.0 --out "$tmp/x.npy" --json \
  | python3 -c 'import json,sys; r=json.load(sys.stdin); print("   H^2 =", round(r["hellinger_squared"], 4), " predicted queries:", r["samples"]["predicted"])'

echo "2. the black box (secretly model B) answers it 40 times"
$BHT sample B.npy --query "$tmp/x.npy" --count 40 --seed 7 > "$tmp/answers.txt"
echo "   first answers: $(head -8 "$tmp/answers.txt" | tr '\n' ' ')"

echo "3. decide from the answers, in the order observed"
$BHT decide A.npy B.npy --query "$tmp/x.npy" "$tmp/answers.txt"
