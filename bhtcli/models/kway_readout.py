"""A link and an optional bias for each of K models: the pair's read-out (readout.py) for
every pair (i, j) of them, so that one algorithm computes each pair's (c, delta) and its
gradient weights, whatever the number of models (docs/kway.md, "Links, biases and softcaps").

Model k answers i with probability proportional to f_k(s_i), s = M_k x + bias_k. The K-way
scores are r = M_1 x and delta_k = (M_k - M_1) x (kway.py); the pair (i, j) reads
m = r + (delta_i + delta_j)/2 and D = delta_i - delta_j, which is what the pair's
:meth:`Readout.forward` takes for its A = M_i and B = M_j.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bhtcli.models.links import EXP, Link
from bhtcli.models.readout import Readout, floored


@dataclass(frozen=True)
class KReadouts:
    """links[k] and biases[k] (a length-n float64 vector or None) of model k."""

    links: tuple
    biases: tuple

    @property
    def K(self) -> int:
        return len(self.links)

    @property
    def plain(self) -> bool:
        return all(link.is_exp for link in self.links) and all(b is None for b in self.biases)

    @property
    def exp_links(self) -> bool:
        """Every link exp: each block's rows may be centred (a common shift of the scores)."""
        return all(link.is_exp for link in self.links)

    @classmethod
    def of_pair(cls, readout: Readout) -> "KReadouts":
        """A pair's read-out as that of two models (A, B)."""
        return cls((readout.link_a, readout.link_b), (readout.bias_a, readout.bias_b))

    def pair(self, i: int, j: int) -> Readout:
        """The read-out of the ordered pair (M_i, M_j) as the pair's code takes it: M_i is its
        A and M_j its B, whichever index is larger (KL(P_i || P_j) for i > j too)."""
        return Readout(self.links[i], self.links[j], self.biases[i], self.biases[j])

    def subset(self, keep) -> "KReadouts":
        return KReadouts(tuple(self.links[k] for k in keep), tuple(self.biases[k] for k in keep))

    def tag(self, k: int) -> str:
        """What tells model k's read-out apart from another's (identical matrices with
        different read-outs are different models)."""
        b = self.biases[k]
        if b is None:
            return self.links[k].name
        import hashlib
        return self.links[k].name + ":" + hashlib.sha256(np.ascontiguousarray(b).tobytes()).hexdigest()

    def pair_logits(self, m: np.ndarray, D: np.ndarray, i: int, j: int):
        """(c, delta, jac) of the pair (i, j) from its midpoint and difference scores
        (Readout.forward; jac for Readout.backward)."""
        return self.pair(i, j).forward(m, D)

    def laws(self, r: np.ndarray, deltas) -> tuple:
        """(r', deltas') with softmax(r' + deltas'[k]) model k's answer law: r' = u_1 and
        deltas'[k] = u_k - u_1, u_k the floored log-weights of model k (for the per-model
        log-likelihood ratios: decisions and the counts' correlations)."""
        u = [self.log_weights(r + (0.0 if dk is None else dk), k) for k, dk in enumerate(deltas)]
        return u[0], [np.zeros_like(u[0])] + [uk - u[0] for uk in u[1:]]

    def model_log_weights(self, r: np.ndarray, deltas):
        """(r', deltas', jac) from the K-way scores r = M_1 x and deltas[k] = (M_k - M_1) x
        (n x k; deltas[0] None or 0): each model's read-out evaluated once, s_k = r + delta_k +
        bias_k and its floored log-weights u_k = phi_k(s_k) (readout.py: floored), given as
        r' = u_1 and deltas'[k] = u_k - u_1 (deltas'[0] None), the form the plain K-way
        evaluations take (softmax(r' + deltas'[k]) is model k's law). Each difference comes
        from delta_k + bias_k - bias_1 without cancellation where the links allow it
        (Readout.difference of the pair (M_k, M_1), as a pair's delta). jac[k] = phi_k'(s_k)
        (0 where floored), None when every link is exp (then the weights on (r', deltas')
        are those on (r, deltas))."""
        r = np.asarray(r, dtype=np.float64)
        n = r.shape[0]
        col = (lambda v: v) if r.ndim == 1 else (lambda v: v[:, None])
        scores, laws = [], []
        for k, dk in enumerate(deltas):
            s = r if dk is None else r + dk
            if self.biases[k] is not None:
                s = s + col(self.biases[k])
            scores.append(s)
            laws.append(floored(self.links[k], s))
        out = [None]
        for k in range(1, self.K):
            pair = self.pair(k, 0)
            D = np.asarray(deltas[k], dtype=np.float64)
            if pair.bias_a is not None or pair.bias_b is not None:
                D = D + col(pair.bias_offsets(n)[1])
            out.append(pair.difference(scores[k], scores[0], D, laws[k], laws[0]))
        jac = None if self.exp_links else [law[1] for law in laws]
        return laws[0][0], out, jac

    def log_weights(self, s: np.ndarray, k: int) -> np.ndarray:
        """Model k's floored log-weights from its raw scores M_k x (its bias added here)."""
        return Readout(self.links[k], EXP, self.biases[k]).log_weights(s, "A")

    @property
    def description(self) -> dict:
        return {"links": [link.name for link in self.links],
                "biases": [b is not None for b in self.biases]}


def make_kreadouts(n: int, links, biases, options=("links", "biases")) -> KReadouts:
    """Parse K links and load K biases (None entries: exp, no bias) against n rows; messages
    name the option and the model's place in it."""
    from bhtcli.errors import parameter_name
    from bhtcli.io.load import load_vector
    from bhtcli.models.links import parse_link
    lo, bo = (parameter_name(o) for o in options)
    K = len(links)
    parsed = tuple(link if isinstance(link, Link) else parse_link(link, f"{lo} (model {k + 1})")
                   for k, link in enumerate(links))
    loaded = tuple(None if b is None else load_vector(b, n, f"{bo} (model {k + 1})")
                   for k, b in enumerate(biases if biases is not None else (None,) * K))
    return KReadouts(parsed, loaded)

