"""Model-aware analysis of a pair: the row diameter, the variance ceilings of the certificate, the
pair facts and the same-model rule (above maths/, which is pure numerics; below commands/)."""
