"""The MPI library's own algorithms, one by one: ``native:<alg>`` variants of every collective.

Each variant calls the same MPI function as ``native`` (mpi4py's buffer interface) but
carries the environment settings that force one internal algorithm of the library:

* MPICH (4.x/5.x): ``MPIR_CVAR_<COLL>_INTRA_ALGORITHM=<value>``.  The values and the
  internal functions they select are those MPICH documents for each control variable
  (``mpivars`` prints them; source: MPICH's ``src/mpi/coll/*/`` CVAR blocks and
  ``src/mpi/coll/mpir_coll.c``).  A forced algorithm that does not apply to a call
  (``reduce_scatter_allgather`` for fewer elements than the nearest power of two of the
  ranks, ...) silently falls back to MPICH's own choice unless
  ``MPIR_CVAR_COLLECTIVE_FALLBACK`` says otherwise.  ``error`` cannot be used: at launch it
  aborts MPI_Init (which runs a one-element allreduce of its own), and during a call it
  can hang the job, because the device layer composes collectives from node-level pieces
  and only the node leaders run the forced algorithm on their own communicator -- a
  refusal there is an error on those ranks only while the others wait in the collective.
  ccbench therefore sets it to ``print`` through the MPI tool interface (MPI_T, MPI 4.1
  section 15.3.6) around one probe call per case, captures what MPICH prints ("User set
  collective algorithm is not usable ... cannot be applied") and agrees over all ranks:
  such a case is recorded as not applicable instead of as a timing of another algorithm.
* Open MPI (5.0.x): ``OMPI_MCA_coll_tuned_use_dynamic_rules=1`` and
  ``OMPI_MCA_coll_tuned_<coll>_algorithm=<id>``; ids and names as ``ompi_info --param
  coll tuned --level 9`` lists them for 5.0.11 (Open MPI's docs,
  ``docs/tuning-apps/coll-tuned.rst``).  The tuned component has no fallback switch:
  some algorithms quietly use another one where they do not apply (two_proc beyond two
  ranks, rabenseifner below the power-of-two count); only an MPI error is seen here.

The variables are read at MPI_Init, so one launch can force only one variant per
collective: ``ccbench launch`` starts one launch per variant and merges them.
"""

import os
import re
from typing import NamedTuple

from ccbench.algorithms.registry import REGISTRY, register
from ccbench.core.errors import CCBenchError, UsageError

__all__ = ["LIBRARIES", "MPICH", "MPICH_PARAMS", "MPICH_TREE_COLL", "NotApplicableError", "OPENMPI",
           "OPENMPI_COLL_IDS", "TEXTBOOK", "Textbook", "check_environment", "current_library", "is_variant",
           "library_of_launcher", "library_of_vendor", "mpich_tree_choice", "mpich_value_of", "probe", "textbook",
           "variant_names", "variant_settings"]

LIBRARIES = {"mpich": "MPICH", "openmpi": "Open MPI"}

# MPICH: ccbench collective -> (CVAR stem, [(CVAR value, internal function), ...]).
# Left out: "nb" (the nonblocking algorithm waited on: a library choice, not an algorithm)
# and "ccl" (needs an external CCL library).
MPICH: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "barrier": ("BARRIER", [
        ("k_dissemination", "MPIR_Barrier_intra_k_dissemination"),
        ("recexch", "MPIR_Barrier_intra_recexch"),
        ("smp", "MPIR_Barrier_intra_smp"),
    ]),
    "bcast": ("BCAST", [
        ("binomial", "MPIR_Bcast_intra_binomial"),
        ("scatter_recursive_doubling_allgather", "MPIR_Bcast_intra_scatter_recursive_doubling_allgather"),
        ("scatter_ring_allgather", "MPIR_Bcast_intra_scatter_ring_allgather"),
        ("pipelined_tree", "MPIR_Bcast_intra_pipelined_tree"),
        ("tree", "MPIR_Bcast_intra_tree"),
        ("smp", "MPIR_Bcast_intra_smp"),
    ]),
    "reduce": ("REDUCE", [
        ("binomial", "MPIR_Reduce_intra_binomial"),
        ("reduce_scatter_gather", "MPIR_Reduce_intra_reduce_scatter_gather"),
        ("smp", "MPIR_Reduce_intra_smp"),
    ]),
    "allreduce": ("ALLREDUCE", [
        ("recursive_doubling", "MPIR_Allreduce_intra_recursive_doubling"),
        ("recursive_multiplying", "MPIR_Allreduce_intra_recursive_multiplying"),
        ("reduce_scatter_allgather", "MPIR_Allreduce_intra_reduce_scatter_allgather"),
        ("ring", "MPIR_Allreduce_intra_ring"),
        ("tree", "MPIR_Allreduce_intra_tree"),
        ("recexch", "MPIR_Allreduce_intra_recexch"),
        ("k_reduce_scatter_allgather", "MPIR_Allreduce_intra_k_reduce_scatter_allgather"),
        ("smp", "MPIR_Allreduce_intra_smp"),
    ]),
    "allgather": ("ALLGATHER", [
        ("brucks", "MPIR_Allgather_intra_brucks"),
        ("k_brucks", "MPIR_Allgather_intra_k_brucks"),
        ("recursive_doubling", "MPIR_Allgather_intra_recursive_doubling"),
        ("ring", "MPIR_Allgather_intra_ring"),
        ("recexch_doubling", "MPIR_Allgather_intra_recexch_doubling"),
        ("recexch_halving", "MPIR_Allgather_intra_recexch_halving"),
    ]),
    # ccbench's reduce_scatter is MPI_Reduce_scatter_block
    "reduce_scatter": ("REDUCE_SCATTER_BLOCK", [
        ("recursive_halving", "MPIR_Reduce_scatter_block_intra_recursive_halving"),
        ("pairwise", "MPIR_Reduce_scatter_block_intra_pairwise"),
        ("recursive_doubling", "MPIR_Reduce_scatter_block_intra_recursive_doubling"),
        ("noncommutative", "MPIR_Reduce_scatter_block_intra_noncommutative"),
    ]),
    "alltoall": ("ALLTOALL", [
        ("brucks", "MPIR_Alltoall_intra_brucks"),
        ("k_brucks", "MPIR_Alltoall_intra_k_brucks"),
        ("pairwise", "MPIR_Alltoall_intra_pairwise"),
        ("pairwise_sendrecv_replace", "MPIR_Alltoall_intra_pairwise_sendrecv_replace"),
        ("scattered", "MPIR_Alltoall_intra_scattered"),
    ]),
    "gather": ("GATHER", [("binomial", "MPIR_Gather_intra_binomial")]),
    "scatter": ("SCATTER", [("binomial", "MPIR_Scatter_intra_binomial")]),
    "allgatherv": ("ALLGATHERV", [
        ("brucks", "MPIR_Allgatherv_intra_brucks"),
        ("recursive_doubling", "MPIR_Allgatherv_intra_recursive_doubling"),
        ("ring", "MPIR_Allgatherv_intra_ring"),
    ]),
    "alltoallv": ("ALLTOALLV", [
        ("pairwise_sendrecv_replace", "MPIR_Alltoallv_intra_pairwise_sendrecv_replace"),
        ("scattered", "MPIR_Alltoallv_intra_scattered"),
    ]),
    "gatherv": ("GATHERV", [("linear", "MPIR_Gatherv_allcomm_linear")]),
    "scatterv": ("SCATTERV", [("linear", "MPIR_Scatterv_allcomm_linear")]),
    # ccbench's reduce_scatterv is MPI_Reduce_scatter
    "reduce_scatterv": ("REDUCE_SCATTER", [
        ("noncommutative", "MPIR_Reduce_scatter_intra_noncommutative"),
        ("pairwise", "MPIR_Reduce_scatter_intra_pairwise"),
        ("recursive_doubling", "MPIR_Reduce_scatter_intra_recursive_doubling"),
        ("recursive_halving", "MPIR_Reduce_scatter_intra_recursive_halving"),
    ]),
}

# The parameters a selection file must give an algorithm container that takes some (the
# JSON parser leaves a missing one unset), with MPICH's CVAR defaults -- the values a forced
# run used (MPIR_CVAR_*_KVAL = 2, *_SINGLE_PHASE_RECV = 0).  Algorithms that take more
# (the tree broadcast and allreduce: their topology costs) are measured but never written
# into a selection file; see `ccbench.analysis.tune`.
MPICH_PARAMS: dict[str, dict[str, int | str]] = {
    "MPIR_Barrier_intra_k_dissemination": {"k": 2},
    "MPIR_Barrier_intra_recexch": {"k": 2, "single_phase_recv": 0},
    "MPIR_Allreduce_intra_recursive_multiplying": {"k": 2},
    "MPIR_Allreduce_intra_recexch": {"k": 2, "single_phase_recv": 0},
    "MPIR_Allreduce_intra_k_reduce_scatter_allgather": {"k": 2, "single_phase_recv": 0},
    "MPIR_Allgather_intra_k_brucks": {"k": 2},
    "MPIR_Allgather_intra_recexch_doubling": {"k": 2, "single_phase_recv": 0},
    "MPIR_Allgather_intra_recexch_halving": {"k": 2, "single_phase_recv": 0},
    "MPIR_Alltoall_intra_k_brucks": {"k": 2},
    # MPIR_CVAR_BCAST_TREE_TYPE, _IS_NON_BLOCKING, _TREE_PIPELINE_CHUNK_SIZE, _RECV_PRE_POST and _TREE_KVAL as
    # MPICH 5.0.2's MPI_T reports them (its mpivars tool), under the keys its csel_container.c parses; k last:
    # an older parser stored is_non_blocking into k, so a k written after it is the k used there too
    "MPIR_Bcast_intra_pipelined_tree": {"tree_type": "kary", "is_non_blocking": 1, "chunk_size": 8192,
                                        "recv_pre_posted": 0, "k": 2},
}
#: Containers whose parameters ccbench does not write (topology costs of the tree algorithms).
MPICH_UNWRITABLE = {"MPIR_Allreduce_intra_tree", "MPIR_Bcast_intra_tree"}

# Open MPI 5.0.x tuned: ccbench collective -> (MCA name, [(id, name), ...]); id 0 = ignore.
OPENMPI: dict[str, tuple[str, list[tuple[int, str]]]] = {
    "barrier": ("barrier", [(1, "linear"), (2, "double_ring"), (3, "recursive_doubling"), (4, "bruck"),
                            (5, "two_proc"), (6, "tree")]),
    "bcast": ("bcast", [(1, "basic_linear"), (2, "chain"), (3, "pipeline"), (4, "split_binary_tree"),
                        (5, "binary_tree"), (6, "binomial"), (7, "knomial"), (8, "scatter_allgather"),
                        (9, "scatter_allgather_ring")]),
    "reduce": ("reduce", [(1, "linear"), (2, "chain"), (3, "pipeline"), (4, "binary"), (5, "binomial"),
                          (6, "in-order_binary"), (7, "rabenseifner")]),
    "allreduce": ("allreduce", [(1, "basic_linear"), (2, "nonoverlapping"), (3, "recursive_doubling"),
                                (4, "ring"), (5, "segmented_ring"), (6, "rabenseifner")]),
    "allgather": ("allgather", [(1, "linear"), (2, "bruck"), (3, "recursive_doubling"), (4, "ring"),
                                (5, "neighbor"), (6, "two_proc"), (7, "sparbit")]),
    "reduce_scatter": ("reduce_scatter_block", [(1, "basic_linear"), (2, "recursive_doubling"),
                                                (3, "recursive_halving"), (4, "butterfly")]),
    "alltoall": ("alltoall", [(1, "linear"), (2, "pairwise"), (3, "modified_bruck"), (4, "linear_sync"),
                              (5, "two_proc")]),
    "gather": ("gather", [(1, "basic_linear"), (2, "binomial"), (3, "linear_sync")]),
    "scatter": ("scatter", [(1, "basic_linear"), (2, "binomial"), (3, "linear_nb")]),
}
# collective ids of the classic rules file (Open MPI's COLLTYPE_T, coll_base_functions.h;
# the table in docs/tuning-apps/coll-tuned.rst)
OPENMPI_COLL_IDS = {"allgather": 0, "allreduce": 2, "alltoall": 3, "barrier": 6, "bcast": 7, "gather": 9,
                    "reduce": 11, "reduce_scatter": 13, "scatter": 15}

_PREFIX = "native:"

# ---------------------------------------------------------------------------- textbook models


class Textbook(NamedTuple):
    """What a library algorithm costs in the registry's terms: the registry algorithms whose costs add up to it.

    ``parts`` are (collective, algorithm) pairs of the registry; empty when the variant has no
    textbook equivalent, and ``note`` then says why ("not modelled: ...").  Otherwise ``note``
    says on what premise the mapping holds (a parameter at its default, ...).
    """

    parts: tuple[tuple[str, str], ...]
    note: str = ""

    @property
    def modelled(self) -> bool:
        """Whether the variant has a textbook cost."""
        return bool(self.parts)


def _is(algorithm: str, note: str = "", collective: str | None = None) -> Textbook:
    return Textbook(((collective or "", algorithm),), note)


def _sum(*parts: str, note: str = "") -> Textbook:
    return Textbook(tuple(tuple(p.split("/")) for p in parts), note)  # type: ignore[misc]


def _no(reason: str) -> Textbook:
    return Textbook((), f"not modelled: {reason}")


# Per library, collective and variant name: its textbook algorithm.  The cost formulas are the
# registry's (Thakur, Rabenseifner & Gropp, IJHPCA 2005, and the sources each algorithm cites);
# the algorithm behind each MPICH name is the function of the same name in MPICH's
# src/mpi/coll/<coll>/ (listed in MPICH above), behind each Open MPI id the function of
# ompi/mca/coll/base/coll_base_<coll>.c that coll_tuned_<coll>_decision.c calls for it.
# Parameters are at the libraries' defaults (MPICH's *_KVAL = 2, tree type knomial_1 / kary 2,
# chunk size 0; Open MPI's segment size 0, chain fan-out 4, knomial radix 4).
_K2 = "with MPICH's default radix k = 2 ({cvar}_KVAL)"
TEXTBOOK: dict[str, dict[str, dict[str, Textbook]]] = {
    "mpich": {
        "barrier": {
            "k_dissemination": _is("dissemination", _K2.format(cvar="MPIR_CVAR_BARRIER_DISSEM")),
            "recexch": _no("recursive-exchange barrier; the registry's only barrier is the dissemination one"),
            "smp": _no("node-local barrier, barrier among node leaders, node-local release: the library's own "
                       "choices for each"),
        },
        "bcast": {
            "binomial": _is("binomial"),
            "scatter_recursive_doubling_allgather": _sum(
                "scatter/binomial", "allgather/recursive_doubling",
                note="binomial scatter of the buffer, then a recursive-doubling allgather (van de Geijn)"),
            "scatter_ring_allgather": _is("scatter_allgather", "binomial scatter, then a ring allgather"),
            "pipelined_tree": _no("chunked k-ary tree (MPIR_CVAR_BCAST_TREE_PIPELINE_CHUNK_SIZE); no registry "
                                  "algorithm pipelines along a tree"),
            "tree": _no("k-ary tree (kary, k = 2 by default): a binary tree, which the registry does not hold"),
            "smp": _no("node-local broadcast, broadcast among node leaders: the library's own choices for each"),
        },
        "reduce": {
            "binomial": _is("binomial"),
            "reduce_scatter_gather": _is("rabenseifner", "recursive-halving reduce-scatter, then a binomial gather"),
            "smp": _no("node-local reduce, reduce among node leaders: the library's own choices for each"),
        },
        "allreduce": {
            "recursive_doubling": _is("recursive_doubling"),
            "recursive_multiplying": _is("recursive_doubling", "recursive multiplying "
                                         + _K2.format(cvar="MPIR_CVAR_ALLREDUCE_RECURSIVE_MULTIPLYING")
                                         + " is recursive doubling"),
            "reduce_scatter_allgather": _is("rabenseifner", "Rabenseifner: recursive-halving reduce-scatter, "
                                            "recursive-doubling allgather"),
            "ring": _is("ring"),
            "tree": _is("binomial", "reduce up a tree, broadcast down it; with MPICH's defaults (knomial_1, "
                        "k = 2, no chunking) the tree is binomial"),
            "recexch": _is("recursive_doubling", "recursive exchange " + _K2.format(cvar="MPIR_CVAR_ALLREDUCE_RECEXCH")
                           + " exchanges the whole vector with one partner per step"),
            "k_reduce_scatter_allgather": _is("rabenseifner", "k-ary reduce-scatter + allgather "
                                              + _K2.format(cvar="MPIR_CVAR_ALLREDUCE_RECEXCH")),
            "smp": _is("hierarchical", "node-local reduce, allreduce among node leaders, node-local broadcast"),
        },
        "allgather": {
            "brucks": _is("bruck"),
            "k_brucks": _is("bruck", _K2.format(cvar="MPIR_CVAR_ALLGATHER_BRUCKS")),
            "recursive_doubling": _is("recursive_doubling"),
            "ring": _is("ring"),
            "recexch_doubling": _is("recursive_doubling", _K2.format(cvar="MPIR_CVAR_ALLGATHER_RECEXCH")),
            "recexch_halving": _is("recursive_doubling", _K2.format(cvar="MPIR_CVAR_ALLGATHER_RECEXCH")
                                   + ": the partners of recursive doubling in the opposite order, the same counts"),
        },
        "reduce_scatter": {
            "recursive_halving": _is("recursive_halving"),
            "pairwise": _is("pairwise"),
            "recursive_doubling": _no("recursive doubling for non-commutative ops (n lg P bytes); not in the "
                                      "registry"),
            "noncommutative": _no("recursive halving in the order non-commutative ops need; not in the registry"),
        },
        "alltoall": {
            "brucks": _is("bruck"),
            "k_brucks": _is("bruck", _K2.format(cvar="MPIR_CVAR_ALLTOALL_BRUCKS")),
            "pairwise": _is("pairwise"),
            "pairwise_sendrecv_replace": _is("pairwise", "the in-place pairwise exchange: the same messages"),
            "scattered": _is("linear", "every send and receive posted at once, in batches of "
                             "MPIR_CVAR_ALLTOALL_THROTTLE (32): the registry's linear up to 33 ranks"),
        },
        "gather": {"binomial": _is("binomial")},
        "scatter": {"binomial": _is("binomial")},
        "allgatherv": {
            "brucks": _no("Bruck's allgather with uneven blocks; the registry's allgatherv are ring and linear"),
            "recursive_doubling": _no("recursive doubling with uneven blocks; not in the registry"),
            "ring": _is("ring"),
        },
        "alltoallv": {
            "pairwise_sendrecv_replace": _no("in place, the pairs exchange one after another in one global order "
                                             "(P(P-1)/2 dependent steps); not in the registry"),
            "scattered": _is("linear", "every send and receive posted at once, in batches of "
                             "MPIR_CVAR_ALLTOALL_THROTTLE (32): the registry's linear up to 33 ranks"),
        },
        "gatherv": {"linear": _is("linear")},
        "scatterv": {"linear": _is("linear")},
        "reduce_scatterv": {
            "pairwise": _is("pairwise"),
            "recursive_halving": _no("recursive halving with uneven blocks; not in the registry"),
            "recursive_doubling": _no("recursive doubling (n lg P bytes); not in the registry"),
            "noncommutative": _no("recursive halving in the order non-commutative ops need; not in the registry"),
        },
    },
    "openmpi": {
        "barrier": {
            "linear": _no("every rank to rank 0 and back, each message a zero-byte round trip; not in the registry"),
            "double_ring": _no("a token twice round a ring; not in the registry"),
            "recursive_doubling": _no("recursive-doubling barrier; the registry's only barrier is dissemination"),
            "bruck": _is("dissemination", "Open MPI's bruck barrier is the dissemination algorithm"),
            "two_proc": _no("two ranks only; a single exchange"),
            "tree": _no("tree barrier; not in the registry"),
        },
        "bcast": {
            "basic_linear": _is("linear"),
            "chain": _no("four chains (coll_tuned_bcast_algorithm_chain_fanout = 4); the registry's chain is one"),
            "pipeline": _no("an unsegmented chain at the default segment size 0; the registry's pipelined_chain "
                            "cuts 64 KiB segments"),
            "split_binary_tree": _no("split binary tree; not in the registry"),
            "binary_tree": _no("binary tree; not in the registry"),
            "binomial": _is("binomial", "unsegmented at the default segment size 0"),
            "knomial": _no("k-nomial tree of radix 4 (coll_tuned_bcast_algorithm_knomial_radix); not in the "
                           "registry"),
            "scatter_allgather": _sum("scatter/binomial", "allgather/recursive_doubling",
                                      note="binomial scatter, then a recursive-doubling allgather"),
            "scatter_allgather_ring": _is("scatter_allgather", "binomial scatter, then a ring allgather"),
        },
        "reduce": {
            "linear": _is("linear"),
            "chain": _no("four chains; not in the registry"),
            "pipeline": _no("an unsegmented chain at the default segment size 0; not in the registry"),
            "binary": _no("binary tree; not in the registry"),
            "binomial": _is("binomial", "unsegmented at the default segment size 0"),
            "in-order_binary": _no("in-order binary tree; not in the registry"),
            "rabenseifner": _is("rabenseifner"),
        },
        "allreduce": {
            "basic_linear": _is("linear", "a linear reduce to rank 0, then a linear broadcast"),
            "nonoverlapping": _no("reduce, then broadcast, each as the tuned component decides"),
            "recursive_doubling": _is("recursive_doubling"),
            "ring": _is("ring"),
            "segmented_ring": _is("ring", "the ring with its blocks cut into segments: the same bytes; the "
                                  "extra messages per segment are not priced"),
            "rabenseifner": _is("rabenseifner"),
        },
        "allgather": {
            "linear": _no("gather to rank 0, then a broadcast; the registry's linear is a direct exchange"),
            "bruck": _is("bruck"),
            "recursive_doubling": _is("recursive_doubling"),
            "ring": _is("ring"),
            "neighbor": _no("neighbour exchange (Chen et al. 2005), P/2 steps; not in the registry"),
            "two_proc": _is("ring", "two ranks only, where every allgather is one exchange"),
            "sparbit": _no("sparbit (Loch & Koslovski 2021); not in the registry"),
        },
        "reduce_scatter": {
            "basic_linear": _no("a reduce to rank 0, then a scatter; not in the registry"),
            "recursive_doubling": _no("recursive doubling (n lg P bytes); not in the registry"),
            "recursive_halving": _is("recursive_halving"),
            "butterfly": _no("butterfly (Traff 2005); not in the registry"),
        },
        "alltoall": {
            "linear": _is("linear"),
            "pairwise": _is("pairwise"),
            "modified_bruck": _is("bruck"),
            "linear_sync": _no("linear with a bounded number of outstanding requests; not in the registry"),
            "two_proc": _is("pairwise", "two ranks only: one exchange"),
        },
        "gather": {
            "basic_linear": _is("linear"),
            "binomial": _is("binomial"),
            "linear_sync": _no("linear with a synchronising first segment; not in the registry"),
        },
        "scatter": {
            "basic_linear": _is("linear"),
            "binomial": _is("binomial"),
            "linear_nb": _is("linear", "the linear scatter with nonblocking sends: the same messages"),
        },
    },
}


def textbook(collective: str, variant: str, library: str | None) -> Textbook:
    """The textbook model of ``native:<variant>`` of `collective` in `library` ("mpich", "openmpi" or None).

    `variant` may carry the ``native:`` prefix.  With no library known, a name both libraries
    map to the same algorithms is modelled; any other is not.
    """
    name = variant[len(_PREFIX):] if variant.startswith(_PREFIX) else variant
    libs = [library] if library else list(TEXTBOOK)
    found = [TEXTBOOK[lib].get(collective, {}).get(name) for lib in libs if lib in TEXTBOOK]
    found = [t for t in found if t is not None]
    if not found:
        return _no(f"{collective}/native:{name} is not an algorithm of "
                   + (LIBRARIES.get(library, library) if library else "MPICH or Open MPI"))
    parts = {tuple((c or collective, a) for c, a in t.parts) for t in found}
    if len(parts) > 1:
        return _no(f"the run's MPI library is unknown and MPICH and Open MPI mean different algorithms by {name!r}")
    t = found[0]
    return Textbook(tuple((c or collective, a) for c, a in t.parts), t.note)


# MPICH's selection tree (maint/tuning/coll/mpir/generic.json, parsed by src/mpi/coll/src/csel.c)
MPICH_TREE_COLL = {"allreduce": "allreduce", "bcast": "bcast", "reduce": "reduce", "allgather": "allgather",
                   "reduce_scatter": "reduce_scatter_block", "alltoall": "alltoall", "gather": "gather",
                   "scatter": "scatter", "barrier": "barrier", "allgatherv": "allgatherv", "alltoallv": "alltoallv",
                   "gatherv": "gatherv", "scatterv": "scatterv", "reduce_scatterv": "reduce_scatter"}
_COND = re.compile(r"^([a-z_]+)(<=|<|=)(.+)$")


def mpich_value_of(collective: str, function: str) -> str | None:
    """The ``MPIR_CVAR_<COLL>_INTRA_ALGORITHM`` value of an MPICH function (None: ccbench has no such variant)."""
    return next((v for v, fn in MPICH.get(collective, ("", []))[1] if fn == function), None)


def mpich_tree_choice(tree: dict, collective: str, nranks: int, nbytes: int, *, itemsize: int = 4,
                      ranks_per_node: int | None = None, commutative: bool = True,
                      node_consecutive: bool = True) -> tuple[str | None, str]:
    """(function, why): the algorithm MPICH's selection tree picks for one call, or (None, why not).

    Walks the tree as ``csel.c`` does: at each level the first key whose condition holds.  The
    call: a built-in op (commutative unless told), ``nbytes`` as ccbench defines the size
    (``avg_msg_size`` = count x type size for allreduce, bcast and reduce, one block for
    alltoall; ``total_msg_size`` = the whole gathered or reduced buffer for allgather and
    reduce_scatter; csel.c's ``get_avg_msgsize`` / ``get_total_msgsize``), ``count`` = nbytes /
    itemsize, and a communicator with a node hierarchy (``comm_hierarchy=parent``) unless
    every rank is on a node of its own (``ranks_per_node`` = 1; MPICH's MPIR_Comm_commit).  The shape keys:
    ``comm_avg_ppn`` = `ranks_per_node` (all ranks on one node where not given) and ``is_node_consecutive``
    (each node's ranks consecutive: `node_consecutive`; never on a flat communicator, as
    ``MPII_Comm_is_node_consecutive`` answers).
    """
    name = MPICH_TREE_COLL.get(collective)
    node = tree.get(f"collective={name}") if name else None
    if node is None:
        return None, f"MPICH's selection tree has no {collective}"
    P, n = int(nranks), int(nbytes)
    count = n // max(1, itemsize)
    if collective in ("alltoall", "alltoallv"):
        avg = n // max(1, P)
    elif collective in ("reduce_scatter", "reduce_scatterv"):
        avg = n // max(1, P)
    else:
        avg = n
    pof2 = 1 << (P.bit_length() - 1) if P > 0 else 1
    facts = {"comm_type": "intra", "comm_size": P, "avg_msg_size": avg, "total_msg_size": n, "count": count,
             "is_commutative": "yes" if commutative else "no", "is_op_built_in": "yes",
             "comm_hierarchy": "flat" if ranks_per_node == 1 else "parent", "is_multi_threaded": "no",
             "is_sendbuf_inplace": "no", "is_block_regular": "yes", "comm_avg_ppn": ranks_per_node or P,
             "is_node_consecutive": "yes" if node_consecutive and ranks_per_node != 1 else "no"}

    def holds(key: str) -> bool | None:
        m = _COND.match(key)
        if m is None:
            return None
        what, rel, val = m.groups()
        if val == "any":
            return True
        have = facts.get(what)
        if have is None:
            return None
        if rel == "=":
            if val == "pow2":
                return isinstance(have, int) and have > 0 and have & (have - 1) == 0
            if val == "node_comm_size":
                return ranks_per_node is not None and P <= ranks_per_node
            return str(have) == val
        bound = pof2 if val == "pow2" else int(val) if val.lstrip("-").isdigit() else None
        if bound is None or not isinstance(have, int):
            return None
        return have < bound if rel == "<" else have <= bound

    while True:
        leaf = next((k for k in node if k.startswith("algorithm=")), None)
        if leaf is not None:
            return leaf.split("=", 1)[1], "MPICH's selection tree"
        for key, sub in node.items():
            ok = holds(key)
            if ok is None:
                return None, f"MPICH's selection tree asks {key!r}, which ccbench cannot answer"
            if ok:
                node = sub
                break
        else:
            return None, "no branch of MPICH's selection tree applies"




class NotApplicableError(CCBenchError):
    """The library refused a forced algorithm for this call (raised on every rank alike)."""


def is_variant(algorithm: str) -> bool:
    """True for a ``native:<alg>`` name."""
    return algorithm.startswith(_PREFIX)


def mpich_settings(collective: str, value: str) -> dict[str, str]:
    """The environment that forces MPICH's `value` for `collective`."""
    return {f"MPIR_CVAR_{MPICH[collective][0]}_INTRA_ALGORITHM": value}


def openmpi_settings(collective: str, alg_id: int) -> dict[str, str]:
    """The environment that forces Open MPI tuned's algorithm `alg_id` for `collective`."""
    return {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
            f"OMPI_MCA_coll_tuned_{OPENMPI[collective][0]}_algorithm": str(alg_id)}


def _register_all() -> None:
    for coll in REGISTRY:
        base = REGISTRY[coll].get("native")
        if base is None:
            continue
        names: dict[str, dict[str, dict[str, str]]] = {}
        where: dict[str, list[str]] = {}
        for value, fn_name in MPICH.get(coll, ("", []))[1]:
            names.setdefault(value, {})["mpich"] = mpich_settings(coll, value)
            where.setdefault(value, []).append(f"MPICH {fn_name}")
        for alg_id, name in OPENMPI.get(coll, ("", []))[1]:
            names.setdefault(name, {})["openmpi"] = openmpi_settings(coll, alg_id)
            where.setdefault(name, []).append(f"Open MPI tuned {OPENMPI[coll][0]} {alg_id}")
        for name, settings in names.items():
            base_fn = base.fn

            def forced(*args, _fn=base_fn, **kwargs):
                return _fn(*args, **kwargs)

            forced.__doc__ = f"{base.summary.rstrip('.')} forced to {' / '.join(where[name])}."
            forced.__wrapped__ = base_fn  # the same call (ccbench.algorithms.native.direct_call binds it)
            register(coll, _PREFIX + name, source="the MPI library, one internal algorithm forced",
                     native=True, settings=settings)(forced)


def variant_names(collective: str, library: str | None = None) -> list[str]:
    """The ``native:<alg>`` names of `collective` (those `library` has, when given)."""
    return [n for n, a in REGISTRY[collective].items()
            if a.settings and (library is None or library in a.settings)]


def library_of_vendor(vendor: str) -> str | None:
    """"mpich" or "openmpi" for mpi4py's MPI.get_vendor() name (None for others)."""
    v = vendor.lower()
    if "open mpi" in v or "openmpi" in v:
        return "openmpi"
    if "mpich" in v:
        return "mpich"
    return None


def library_of_launcher(version_text: str) -> str | None:
    """The library a launcher belongs to, from its ``--version`` output."""
    if "Open MPI" in version_text or "OpenRTE" in version_text or "prte" in version_text.lower():
        return "openmpi"
    if "HYDRA" in version_text or "mpich" in version_text.lower():
        return "mpich"
    return None


def current_library() -> str | None:
    """The MPI library mpi4py is using ("mpich", "openmpi" or None)."""
    from mpi4py import MPI

    return library_of_vendor(MPI.get_vendor()[0])


def variant_settings(alg, library: str | None) -> dict[str, str]:
    """The forcing environment of `alg` in `library` ({} for anything but a variant)."""
    if not alg.settings or library is None:
        return {}
    return dict(alg.settings.get(library, {}))


def check_environment(cases, library: str | None, env=None):
    """(cases that can run, (what, why) skips) -- refuse variants whose forcing is not set.

    A variant the library does not have is skipped; one whose variables are not in this
    process's environment (they are read at MPI_Init) is refused with the line to set.
    """
    env = os.environ if env is None else env
    keep, skipped, missing = [], [], {}
    seen_skip = set()
    for case in cases:
        alg = REGISTRY[case.collective][case.algorithm]
        if not alg.settings:
            keep.append(case)
            continue
        wanted = alg.settings.get(library) if library else None
        if wanted is None:
            what = f"{case.collective}/{case.algorithm}"
            if what not in seen_skip:
                seen_skip.add(what)
                skipped.append((what, f"not an algorithm of {LIBRARIES.get(library, 'this MPI library')}"))
            continue
        wrong = {k: v for k, v in wanted.items() if env.get(k) != v}
        if wrong:
            missing[f"{case.collective}/{case.algorithm}"] = wrong
            continue
        keep.append(case)
    if missing:
        what, wrong = next(iter(missing.items()))
        more = f" (and {len(missing) - 1} more variants)" if len(missing) > 1 else ""
        raise UsageError(f"{what} needs {' '.join(f'{k}={v}' for k, v in wrong.items())} in the environment "
                         f"of every rank (read at MPI_Init){more}; set it for the launch, or use ccbench launch, "
                         "which starts one launch per variant")
    return keep, skipped


class _MpichFallback:
    """MPICH's MPIR_CVAR_COLLECTIVE_FALLBACK, read and written through MPI_T after MPI_Init."""

    ERROR, PRINT = 0, 1  # the enum's order in MPICH: error, print, silent

    def __init__(self) -> None:
        import ctypes

        path = next((line.split()[-1] for line in open("/proc/self/maps")
                     if "/libmpi" in line and ".so" in line), None)
        if path is None:
            raise OSError("libmpi not mapped")
        lib = ctypes.CDLL(path)
        provided, index, count = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        self.handle = ctypes.c_void_p()
        if lib.MPI_T_init_thread(0, ctypes.byref(provided)) != 0:
            raise OSError("MPI_T_init_thread failed")
        if lib.MPI_T_cvar_get_index(b"MPIR_CVAR_COLLECTIVE_FALLBACK", ctypes.byref(index)) != 0:
            raise OSError("no MPIR_CVAR_COLLECTIVE_FALLBACK")
        if lib.MPI_T_cvar_handle_alloc(index, None, ctypes.byref(self.handle), ctypes.byref(count)) != 0:
            raise OSError("MPI_T_cvar_handle_alloc failed")
        self.lib, self.ctypes = lib, ctypes

    def get(self) -> int:
        v = self.ctypes.c_int()
        self.lib.MPI_T_cvar_read(self.handle, self.ctypes.byref(v))
        return v.value

    def set(self, value: int) -> None:
        v = self.ctypes.c_int(value)
        if self.lib.MPI_T_cvar_write(self.handle, self.ctypes.byref(v)) != 0:
            raise OSError("MPI_T_cvar_write failed")


_FALLBACK: list = []


def _mpich_fallback():
    if not _FALLBACK:
        try:
            _FALLBACK.append(_MpichFallback())
        except (OSError, AttributeError):
            _FALLBACK.append(None)
    return _FALLBACK[0]


def _reason(exc) -> str:
    """The library's own words for an MPI error: the last line of its error stack."""
    text = exc.Get_error_string().strip().splitlines()[-1]
    return text.split(": ", 1)[-1].strip() if "): " in text or ".: " in text else text


def _captured_stderr(call):
    """Run call() with file descriptor 2 sent to a file; return (exception or None, text written)."""
    import sys
    import tempfile

    from mpi4py import MPI

    sys.stderr.flush()
    saved = os.dup(2)
    err = None
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            call()
        except MPI.Exception as exc:
            err = exc
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        return err, tmp.read().decode(errors="replace")


_REFUSAL = ("not usable for the provided arguments", "cannot be applied")


def probe(comm, call, library: str | None) -> None:
    """One call with MPICH's fallback made to print; NotApplicableError on every rank if any saw it.

    MPICH prints the refusal (on rank 0 of the communicator that ran the forced algorithm)
    and goes on with its own choice, so no rank is left waiting; the ranks then agree.
    Anything else written to stderr during the call is passed on.
    """
    import sys

    fb = _mpich_fallback() if library == "mpich" else None
    old = fb.get() if fb is not None else None
    if fb is not None:
        fb.set(_MpichFallback.PRINT)
    try:
        exc, text = _captured_stderr(call)
    finally:
        if fb is not None:
            fb.set(old)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    refusal = [ln for ln in lines if any(r in ln for r in _REFUSAL)]
    other = [ln for ln in lines if ln not in refusal]
    if other:
        print("\n".join(other), file=sys.stderr, flush=True)
    why = " ".join(dict.fromkeys(refusal)) or (_reason(exc) if exc is not None else None)
    errs = comm.allgather(why)
    first = next((e for e in errs if e), None)
    if first is not None:
        raise NotApplicableError(first)
    if library == "mpich" and fb is None:
        raise NotApplicableError("cannot see MPICH's fallback (no MPI_T access): a forced algorithm that does "
                                 "not apply would be timed as another one")


_register_all()
