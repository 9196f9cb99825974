"""Maximising the separation over the budget: batched L-BFGS climbs and the CCP alternative."""
