"""Pure numerics: divergences, query counts, certificates, the small-perturbation estimate."""
