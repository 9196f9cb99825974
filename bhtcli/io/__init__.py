"""Loading and checking input files: matrices, safetensors, validation, pickle refusal."""
