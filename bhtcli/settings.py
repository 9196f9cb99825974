"""Defaults and names that several layers share, as plain constants (no imports): the CLI
reads them at start-up, so this module must stay free of numpy and friends."""

__version__ = "0.1.0"                 # the release (pyproject.toml's version; tests/test_architecture.py)

DESIGN_METHODS = ("lbfgs", "ccp")     # design's method: batched L-BFGS, or the cvxpy cross-check
DEFAULT_STARTS = 32                   # the full search's first round of starts
FORMATS = ".npy, .npz, .safetensors, .gguf, .csv, .txt or .json"    # matrix inputs
OUT_SUFFIXES = (".npy", ".csv", ".txt", ".json")              # matrix outputs
OUT_FORMATS = ".npy, .csv, .txt or .json"
QUANTIZE_TYPES = ("q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "f16", "bf16", "f32", "int8-row")   # bht quantize --to
SEARCH_SPACES = ("full", "sketch", "auto")   # where a softmax design climbs (bhtcli.search.entry)
DEFAULT_SEARCH_SPACE = "auto"
DEFAULT_MAX_STARTS = 128              # the full search's adaptive rounds stop here at the latest
CERTIFICATES = ("fast", "exact")     # bht bound --certificate: exact adds the bilinear ceiling
