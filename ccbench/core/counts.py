"""Count distributions of the v-collectives: how a case's elements are spread over its blocks (pure, no MPI).

A distribution is named by a spec (``--counts``, config key ``counts``):

* ``uniform`` -- every block the same (the v-collective then moves what its even form moves);
* ``heavy[:F]`` -- rank 0's block F times each other one's (default F = 4);
* ``zipf[:S]`` -- block j proportional to (j + 1)^-S, rank 0 the most frequent (Zipf's law; 0 < S <= 10,
  default 1);
* ``moe[:E,K,CF[,T]]`` -- mixture-of-experts routing: E experts (default 8) placed on the ranks in contiguous
  groups, each rank's T tokens (default 1024) routed to the top K (default 2) of a softmax gate over random
  logits, at most ceil(CF x T x K / E) tokens of one rank to one expert (the capacity factor CF, default 1.25;
  tokens beyond it are dropped, not sent), as GShard (Lepikhin et al., ICLR 2021) and Switch Transformer
  (Fedus, Zoph & Shazeer, JMLR 2022) dispatch.  A token's logit for expert e is a standard normal draw plus
  the expert's popularity, one standard normal draw per expert shared by every token (the token
  representations' common component seen through the gate): gates without a balancing loss favour a few
  experts (Shazeer et al., ICLR 2017, section 4), which makes the skew realistic; the softmax is monotone, so
  the top K probabilities are the top K logits.  ``@SEED`` after the spec (default 0) seeds the draws;
* ``weights:W0,W1,...`` -- one relative weight per rank, given (P of them);
* ``~`` before any of them -- every block travels the other way: alltoallv's matrix transposed (``~moe`` is the
  combine that returns the experts' outputs to the tokens' ranks; ``~heavy`` a heavy sender), and a vector the
  column sums of that matrix (for ``~heavy`` and ``~zipf`` every rank alike).

For alltoallv a distribution is a P x P matrix, entry (i, j) what rank i sends to rank j: moe's routed tokens;
for the others every rank sends to rank j in proportion to the weight of j (rank 0 the hot destination).  For
the other v-collectives it is a vector over the ranks: moe's tokens each rank's experts receive (the column
sums), the others' weights.  Every rank computes the same counts from the spec and its seed alone -- never
from a per-rank random stream -- so all ranks agree without communicating.

The weights become integer shares, and a total of N elements is apportioned by the largest-remainder
(Hamilton) method in exact integer arithmetic: the blocks sum to N, differ from N x share / sum by less than
one element, and integer weights (uniform, moe's tokens) scaled by a whole factor give exact multiples.
"""

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ccbench.core.errors import UsageError

__all__ = ["DISTRIBUTIONS", "CountMatrix", "Distribution", "apportion", "block_counts", "check_ranks",
           "count_matrix", "moe_routing", "parse_counts", "symmetric", "weights"]

#: name -> (parameter names, defaults) of each distribution
DISTRIBUTIONS: dict[str, tuple[tuple[str, ...], tuple[float, ...]]] = {
    "uniform": ((), ()),
    "heavy": (("F",), (4.0,)),
    "zipf": (("S",), (1.0,)),
    "moe": (("E", "K", "CF", "T"), (8, 2, 1.25, 1024)),
    "weights": (("W0,W1,...",), ()),
}
MAX_ZIPF = 10.0
MAX_HEAVY = 1e6
#: the largest share of one block (weights are rescaled to integers up to it): N x share fits in int64 for
#: every N below 2^43 elements
SHARE_SCALE = 1 << 20
#: the most gate logits (P x T x E) the moe distribution draws
MAX_LOGITS = 1 << 27


@dataclass(frozen=True)
class Distribution:
    """A parsed count distribution: its name, parameters, seed, and the canonical spec that names it."""

    name: str
    params: tuple[float, ...]
    seed: int = 0
    reverse: bool = False  # ``~``: every block the other way (the matrix transposed)

    @property
    def text(self) -> str:
        """The canonical spec (every parameter given), as rows and run.json record it."""
        args = ",".join(f"{p:g}" for p in self.params)
        return ("~" if self.reverse else "") + self.name + (f":{args}" if args else "") + \
            (f"@{self.seed}" if self.seed else "")


def _bad(text: str, why: str) -> UsageError:
    forms = "uniform, heavy[:F], zipf[:S], moe[:E,K,CF[,T]][@SEED] or weights:W0,W1,... (~ before it: reversed)"
    return UsageError(f"counts {text!r}: {why}; choose {forms}")


def _number(text: str, spec: str, what: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise _bad(spec, f"{what} {text!r} is not a number") from None
    if not math.isfinite(v):
        raise _bad(spec, f"{what} must be finite")
    return v


def _whole(v: float, spec: str, what: str, lo: int, hi: int) -> int:
    if v != int(v) or not lo <= v <= hi:
        raise _bad(spec, f"{what} must be a whole number from {lo} to {hi}")
    return int(v)


@lru_cache(maxsize=256)
def parse_counts(text: str) -> Distribution:
    """The Distribution a spec names (module docstring), or a UsageError saying in one line what is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise _bad(str(text), "empty")
    spec = text.strip()
    reverse = spec.startswith("~")
    body, at, seed_text = spec.removeprefix("~").partition("@")
    name, _, args = body.partition(":")
    if name not in DISTRIBUTIONS:
        raise _bad(spec, f"unknown distribution {name!r}")
    values = [_number(a.strip(), spec, "parameter") for a in args.split(",")] if args else []
    seed = 0
    if at:
        if name != "moe":
            raise _bad(spec, f"{name} draws nothing at random: only moe takes @SEED")
        if not seed_text.isdigit() or int(seed_text) >= 2 ** 32:
            raise _bad(spec, f"seed {seed_text!r} must be a whole number from 0 to {2 ** 32 - 1}")
        seed = int(seed_text)
    names, defaults = DISTRIBUTIONS[name]
    if name == "weights":
        if not values:
            raise _bad(spec, "weights needs one weight per rank")
        if any(v < 0 for v in values) or sum(values) <= 0:
            raise _bad(spec, "weights must be >= 0 with a positive sum")
        return Distribution(name, tuple(values), reverse=reverse)
    if len(values) > len(names):
        raise _bad(spec, f"{name} takes no parameters" if not names else
                   f"{name} takes at most {len(names)} parameter{'s' if len(names) > 1 else ''} ({','.join(names)})")
    p = list(values) + list(defaults[len(values):])
    if name == "heavy" and not 0 < p[0] <= MAX_HEAVY:
        raise _bad(spec, f"the heavy factor F must be in (0, {MAX_HEAVY:g}]")
    if name == "zipf" and not 0 < p[0] <= MAX_ZIPF:
        raise _bad(spec, f"the Zipf exponent S must be in (0, {MAX_ZIPF:g}]")
    if name == "moe":
        e = _whole(p[0], spec, "the expert count E", 1, 1 << 16)
        k = _whole(p[1], spec, "top-K", 1, e)
        if not 0 < p[2] <= 1000:
            raise _bad(spec, "the capacity factor CF must be in (0, 1000]")
        t = _whole(p[3], spec, "the tokens per rank T", 1, 1 << 20)
        p = [e, k, p[2], t]
    return Distribution(name, tuple(float(x) for x in p), seed, reverse)


def check_ranks(dist: Distribution, nranks: int) -> None:
    """Refuse (UsageError, one line) a distribution `nranks` ranks cannot hold."""
    if dist.name == "weights" and len(dist.params) != nranks:
        raise UsageError(f"counts {dist.text!r} gives {len(dist.params)} weights for {nranks} ranks; give one per rank")
    if dist.name == "moe":
        e, _, _, t = dist.params
        if e < nranks:
            raise UsageError(f"counts {dist.text!r}: {int(e)} experts cannot be placed on {nranks} ranks (every rank "
                             "hosts at least one expert); give E >= the rank count")
        if nranks * t * e > MAX_LOGITS:
            raise UsageError(f"counts {dist.text!r} at {nranks} ranks draws {int(nranks * t * e):,} gate logits, more "
                             f"than {MAX_LOGITS:,}; give fewer tokens per rank (the fourth parameter T)")


def moe_routing(nranks: int, experts: int, top_k: int, capacity_factor: float, tokens: int,
                seed: int = 0) -> np.ndarray:
    """Tokens rank i sends to rank j (a P x P int64 matrix) in one mixture-of-experts dispatch (module docstring).

    Expert e lives on rank e x P // E (contiguous groups).  Each rank's `tokens` go to the `top_k` largest of
    their gate logits (a per-expert popularity plus per-token noise, standard normals, drawn from `seed`); one
    rank sends an expert at most ``ceil(capacity_factor x tokens x top_k / experts)`` tokens (GShard's per-group
    expert capacity) and drops the rest.
    """
    rng = np.random.default_rng(seed)
    popularity = rng.standard_normal(experts)
    owner = np.arange(experts) * nranks // experts
    capacity = math.ceil(capacity_factor * tokens * top_k / experts)
    out = np.zeros((nranks, nranks), dtype=np.int64)
    for i in range(nranks):
        logits = rng.standard_normal((tokens, experts)) + popularity
        chosen = np.argpartition(-logits, top_k - 1, axis=1)[:, :top_k]
        load = np.minimum(np.bincount(chosen.ravel(), minlength=experts), capacity)
        np.add.at(out[i], owner, load)
    return out


def weights(dist: Distribution, nranks: int, matrix: bool = False) -> np.ndarray:
    """The relative block sizes at `nranks` ranks: a vector of P, or (`matrix`, alltoallv) P x P, rows senders."""
    check_ranks(dist, nranks)
    P = nranks
    if dist.name == "moe":
        e, k, cf, t = dist.params
        m = moe_routing(P, int(e), int(k), cf, int(t), dist.seed)
    else:
        if dist.name == "uniform":
            w = np.ones(P)
        elif dist.name == "heavy":
            w = np.ones(P)
            w[0] = dist.params[0]
        elif dist.name == "zipf":
            w = np.arange(1, P + 1, dtype=np.float64) ** -dist.params[0]
        else:
            w = np.array(dist.params, dtype=np.float64)
        if not matrix and not dist.reverse:
            return w
        m = np.broadcast_to(w, (P, P))
    if dist.reverse:
        m = m.T
    return m if matrix else m.sum(axis=0)


def _repeated(a: np.ndarray) -> tuple[np.ndarray, int] | None:
    """A matrix that repeats one vector along an axis without holding it twice (a broadcast view, stride 0, as
    `weights` gives every distribution but moe): the vector and that axis; None for any other array."""
    if a.ndim == 2 and a.size and 0 in a.strides:
        axis = a.strides.index(0)
        return (a[0] if axis == 0 else a[:, 0]), axis
    return None


def _spread(vector: np.ndarray, axis: int, shape: tuple) -> np.ndarray:
    """`vector` repeated along `axis` into `shape`, as a view (the inverse of `_repeated`)."""
    return np.broadcast_to(vector if axis == 0 else vector[:, None], shape)


def _shares(w: np.ndarray) -> np.ndarray:
    """Weights as non-negative int64 shares: kept where they are whole and at most SHARE_SCALE, else rescaled so
    the largest is SHARE_SCALE (a relative resolution of 1e-6).  Repeated weights give repeated shares (a view)."""
    line = _repeated(w)
    if line is not None:
        return _spread(_shares(line[0]), line[1], w.shape)
    w = np.asarray(w, dtype=np.float64)
    top = float(w.max()) if w.size else 0.0
    if top <= SHARE_SCALE and np.array_equal(w, np.rint(w)):
        s = w.astype(np.int64)
    else:
        s = np.rint(w / top * SHARE_SCALE).astype(np.int64)
    if w.size and s.sum() == 0:
        s = (w == top).astype(np.int64)
    return s


class CountMatrix:
    """alltoallv's block counts (entry (i, j) what rank i sends rank j), read by wrapped diagonal, row sums or
    column sums: the P x P array itself, or, for a distribution that repeats one line (every one but moe), that
    line and where the largest-remainder method put its left-over elements -- a band of rows given +1 at some
    columns and one edge row given +1 at a few more -- in O(P) memory where the array takes O(P^2) (2 GB at
    16,384 ranks).

    ``m[i, j] = line[j or i] + [i in rows and j in cols] + [i == edge and j in edge_cols]``, the line indexed by
    the column (`axis` 0: every row alike) or by the row (`axis` 1).
    """

    def __init__(self, shape: tuple, dense: np.ndarray | None = None, *, line: np.ndarray | None = None,
                 axis: int = 0, rows=(), cols=(), edge: int = -1, edge_cols=()) -> None:
        self.shape, self._dense, self._line, self._axis, self._edge = tuple(shape), dense, line, axis, int(edge)
        if dense is None:
            self._rows, self._cols, self._edge_cols = (np.asarray(x, dtype=np.intp) for x in (rows, cols, edge_cols))
            self._in_rows, self._in_cols, self._in_edge = (np.zeros(n, dtype=np.int64) for n in (*self.shape, shape[1]))
            self._in_rows[self._rows], self._in_cols[self._cols], self._in_edge[self._edge_cols] = 1, 1, 1

    def wrapped(self, k: int) -> np.ndarray:
        """Entry (r, r + k mod P) of every row r of a square matrix (its k-th wrapped diagonal): what each rank
        sends the rank k places after it.  O(P) for a repeated line."""
        P, k = self.shape[0], k % self.shape[0]
        if self._dense is not None:
            ar = np.arange(P)
            return self._dense[ar, (ar + k) % P]
        out = np.concatenate((self._line[k:], self._line[:k])) if self._axis == 0 else self._line.copy()
        if self._rows.size and self._cols.size:
            out += self._in_rows * np.concatenate((self._in_cols[k:], self._in_cols[:k]))
        if self._edge >= 0:
            out[self._edge] += self._in_edge[(self._edge + k) % P]
        return out

    def diagonal(self) -> np.ndarray:
        """Entry (i, i) of every row i: what each rank keeps (the 0th wrapped diagonal)."""
        return self.wrapped(0)

    def sum(self, axis: int) -> np.ndarray:
        """Sums over `axis` as numpy's: axis 1 what each rank sends (row sums), axis 0 what each receives."""
        if self._dense is not None:
            return self._dense.sum(axis=axis)
        if axis == 1 - self._axis:  # along the line: its sum in every place
            out = np.full(self.shape[self._axis], int(self._line.sum()), dtype=np.int64)
        else:  # across the lines: each entry times the number of lines
            out = self._line * self.shape[self._axis]
        if axis == 1:
            out = out + self._in_rows * self._cols.size
            if self._edge >= 0:
                out[self._edge] += self._edge_cols.size
            return out
        out = out + self._in_cols * self._rows.size
        return out + self._in_edge if self._edge >= 0 else out

    def dense(self) -> np.ndarray:
        """The whole array (a new, writable, C-ordered int64 array)."""
        if self._dense is not None:
            return np.array(self._dense, dtype=np.int64, order="C")
        q = np.array(_spread(self._line, self._axis, self.shape), dtype=np.int64, order="C")
        if self._rows.size and self._cols.size:
            q[np.ix_(self._rows, self._cols)] += 1
        if self._edge >= 0:
            q[self._edge, self._edge_cols] += 1
        return q


def _split(total: int, shares: np.ndarray) -> CountMatrix | np.ndarray:
    """`apportion`'s blocks: an array, or a `CountMatrix` where the shares repeat one line (never expanded)."""
    s = np.asarray(shares, dtype=np.int64)
    ssum = int(s.sum())
    if total < 0 or ssum <= 0:
        raise ValueError("apportion needs a total >= 0 and shares with a positive sum")
    if total >= 1 << 43:
        raise ValueError("apportion: a total of 2^43 elements or more overflows the exact arithmetic")
    line = _repeated(s)
    if line is None:
        q, r = np.divmod(total * s, ssum)
        q = np.ascontiguousarray(q)  # C order (a transposed matrix's quotients are not), so ravel is a view
        left = total - int(q.sum())  # < the number of blocks
        if left:  # the `left` largest remainders, ties to the lower index: every remainder above the left-th
            # largest, then the first ones equal to it
            cut = np.partition(r.ravel(), r.size - left)[r.size - left]  # selection, linear time
            above = r > cut
            q += above
            q.ravel()[np.flatnonzero(r == cut)[:left - int(np.count_nonzero(above))]] += 1
        return q
    # one line's quotients and remainders, repeated: an alltoallv matrix at 4,096 ranks holds 16.8 M blocks
    vector, axis = line
    q, rv = np.divmod(total * vector, ssum)
    n = s.shape[axis]  # the line's remainders rv, each repeated n times
    left = total - n * int(q.sum())
    if not left:
        return CountMatrix(s.shape, line=q, axis=axis)
    cut = np.sort(rv)[::-1][(left - 1) // n]
    q += rv > cut
    need, tied = left - n * int(np.count_nonzero(rv > cut)), np.flatnonzero(rv == cut)
    if axis == 0:  # row-major: the tied columns of the first whole rows, then the first ones of the next row
        whole, part = divmod(need, tied.size)
        return CountMatrix(s.shape, line=q, axis=0, rows=np.arange(whole), cols=tied,
                           edge=whole if part else -1, edge_cols=tied[:part])
    whole, part = divmod(need, n)  # the first tied rows whole, then the first entries of the next tied row
    return CountMatrix(s.shape, line=q, axis=1, rows=tied[:whole], cols=np.arange(n),
                       edge=tied[whole] if part else -1, edge_cols=np.arange(part))


def apportion(total: int, shares: np.ndarray) -> np.ndarray:
    """`total` elements split in proportion to integer `shares` by the largest-remainder (Hamilton) method: int64
    blocks of the shares' shape, summing to `total`; ties go to the lower index (row-major for a matrix)."""
    q = _split(total, shares)
    return q.dense() if isinstance(q, CountMatrix) else q


#: the most blocks of a count matrix kept among the last 32 asked for (2,048 ranks); a larger one is kept alone
#: (the last), as 32 matrices at 16,384 ranks would hold 69 GB
BIG_MATRIX = 1 << 22


def _spec_shares(spec: str, nranks: int, matrix: bool) -> np.ndarray:
    return _shares(weights(parse_counts(spec), nranks, matrix))


_some_shares, _big_shares = lru_cache(maxsize=16)(_spec_shares), lru_cache(maxsize=1)(_spec_shares)


def _shares_of(spec: str, nranks: int, matrix: bool) -> np.ndarray:
    """The integer shares of a canonical spec at `nranks` ranks (moe's routing drawn once per spec and P); a matrix
    of more than ``BIG_MATRIX`` blocks is kept alone, as `block_counts` keeps its counts (moe's is dense: 16 of
    them at 8,192 ranks held 8.6 GB)."""
    return (_big_shares if matrix and nranks ** 2 > BIG_MATRIX else _some_shares)(spec, nranks, matrix)


def _counts(spec: str, nranks: int, total: int, matrix: bool) -> np.ndarray:
    out = apportion(total, _shares_of(spec, nranks, matrix))
    out.flags.writeable = False
    return out


_block_counts, _big_block_counts = lru_cache(maxsize=32)(_counts), lru_cache(maxsize=1)(_counts)


def block_counts(spec: str, nranks: int, total: int, matrix: bool = False) -> np.ndarray:
    """The element counts of the blocks of a case of `total` elements at `nranks` ranks (read-only int64): a
    vector of P, or (`matrix`, alltoallv) P x P with row i what rank i sends.  The same on every rank."""
    cached = _big_block_counts if matrix and int(nranks) ** 2 > BIG_MATRIX else _block_counts
    return cached(parse_counts(spec).text, int(nranks), int(total), bool(matrix))


@lru_cache(maxsize=32)
def _line_matrix(spec: str, nranks: int, total: int) -> CountMatrix:
    return _split(total, _shares_of(spec, nranks, True))


def count_matrix(spec: str, nranks: int, total: int) -> CountMatrix:
    """`block_counts`'s alltoallv matrix as a `CountMatrix`: the same entries, held in O(P) memory for every
    distribution but moe (what a cost model at 16,384 ranks or more reads); moe's is the array itself, kept
    as `block_counts` keeps it."""
    text, P, total = parse_counts(spec).text, int(nranks), int(total)
    if _repeated(_shares_of(text, P, True)) is None:
        return CountMatrix((P, P), block_counts(text, P, total, matrix=True))
    return _line_matrix(text, P, total)


def symmetric(spec: str, nranks: int) -> bool:
    """Whether the distribution sends every pair of ranks the same both ways (in-place alltoallv needs it)."""
    w = _shares_of(parse_counts(spec).text, nranks, True)
    return bool(np.array_equal(w, w.T))
