"""The model families: softmax and its links, readouts, leverage scores, the answer law."""
