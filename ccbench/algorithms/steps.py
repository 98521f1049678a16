"""Step plans of hand-written schedules, each run two more ways: as persistent requests and as a non-blocking call.

A plan is what a blocking algorithm does on fixed buffers, step by step: a batch of sends
``(buf, dest, tag)`` and receives ``(buf, source, tag)``, then, once the batch is complete, an
optional local reduction ``(ufunc, incoming, mine)``; a prologue run at the start of every
call (the input copied into the output) and an epilogue once the last step is complete (the
result moved to where the caller wants it).  Made once per case, a plan runs

* as persistent requests (`persistent`): MPI_Send_init / MPI_Recv_init per step at set-up,
  MPI_Startall + MPI_Waitall per step and call (MPI 4.0 section 3.9);
* as a non-blocking collective (`nonblocking`): each call posts the first step's MPI_Isend /
  MPI_Irecv at once and returns a request; each later step is posted when a test (``Test``:
  MPI_Testall) or the wait finds the one before it complete.  The schedule advances only when
  the application calls into it, as the schedules of libNBC do (Hoefler, Lumsdaine & Rehm,
  "Implementation and Performance Analysis of Non-Blocking Collective Operations for MPI",
  SC 2007): the test calls spread over a compute are what moves it.

Both count what the blocking twin counts (one step per batch, `ccbench.algorithms.p2p`), so the
twin's closed-form cost holds for them.  One call in flight per communicator at a time.
"""

from collections.abc import Callable
from typing import NamedTuple

from ccbench.algorithms.p2p import counted
from ccbench.algorithms.registry import REGISTRY, register

__all__ = ["Plan", "StepRequest", "nonblocking", "persistent", "register_forms", "run_plan", "run_steps"]


class Plan(NamedTuple):
    """The steps of a schedule on bound buffers, and what every call does first and last (None: nothing)."""

    prologue: Callable[[], None] | None
    steps: tuple  # ((sends, recvs, reduce or None), ...)
    epilogue: Callable[[], None] | None = None


def run_steps(comm, steps) -> None:
    """Steps run blocking, as a hand-written algorithm writes them: a lone send or receive as Send or Recv, one of
    each as one Sendrecv, more as Isend/Irecv and one Waitall; then the step's reduction."""
    for sends, recvs, reduce in steps:
        if len(sends) + len(recvs) == 1:
            (comm.Send if sends else comm.Recv)(*(sends or recvs)[0])
        elif len(sends) == len(recvs) == 1:
            comm.Sendrecv(*sends[0], *recvs[0])
        else:
            comm.Waitall([comm.Irecv(*r) for r in recvs] + [comm.Isend(*s) for s in sends])
        if reduce is not None:
            comm.reduce_local(*reduce)


def run_plan(comm, plan: Plan) -> None:
    """A plan run at once, blocking: prologue, `run_steps`, epilogue (a blocking algorithm written as its plan)."""
    if plan.prologue is not None:
        plan.prologue()
    run_steps(comm, plan.steps)
    if plan.epilogue is not None:
        plan.epilogue()


def persistent(plan_of: Callable) -> Callable:
    """``setup(comm, *args, **kwargs) -> (call, free)``: `plan_of`'s plan made once as persistent requests."""

    def setup(comm, *args, **kwargs):
        comm = counted(comm)
        plan = plan_of(comm, *args, **kwargs)
        made = [(comm.persistent_step(sends, recvs), reduce) for sends, recvs, reduce in plan.steps]
        startall, waitall, reduce_local = comm.Startall, comm.Waitall, comm.reduce_local
        prologue, epilogue = plan.prologue, plan.epilogue

        def call() -> None:
            if prologue is not None:
                prologue()
            for step, reduce in made:
                startall(step)
                waitall(step.requests)
                if reduce is not None:
                    reduce_local(*reduce)
            if epilogue is not None:
                epilogue()

        return call, lambda: [step.free() for step, _ in made]

    return setup


class StepRequest:
    """One call of a plan in flight: ``Test()`` advances it as far as it can without blocking and says whether it is
    done; ``Wait()`` completes it."""

    __slots__ = ("comm", "steps", "i", "reqs", "epilogue")

    def __init__(self, comm, steps: tuple, epilogue: Callable[[], None] | None = None) -> None:
        self.comm, self.steps, self.i, self.reqs, self.epilogue = comm, steps, 0, None, epilogue
        self._post()

    def _post(self) -> None:
        if self.i < len(self.steps):
            sends, recvs, _ = self.steps[self.i]
            c = self.comm
            self.reqs = [c.Irecv(b, p, t) for b, p, t in recvs] + [c.Isend(b, p, t) for b, p, t in sends]
        elif self.epilogue is not None:  # the last step complete (or none at all): the result into place, once
            self.epilogue()
            self.epilogue = None

    def _next(self) -> None:
        reduce = self.steps[self.i][2]
        if reduce is not None:
            self.comm.reduce_local(*reduce)
        self.i += 1
        self._post()

    def Test(self) -> bool:  # noqa: N802 - mpi4py naming
        while self.i < len(self.steps):
            if not self.comm.Testall(self.reqs):
                return False
            self._next()
        return True

    def Wait(self) -> None:  # noqa: N802
        while self.i < len(self.steps):
            self.comm.Waitall(self.reqs)
            self._next()


def nonblocking(plan_of: Callable) -> Callable:
    """``bind(comm, *args, **kwargs) -> begin``: `plan_of`'s plan made once; ``begin()`` starts a call and returns its
    `StepRequest`."""

    def bind(comm, *args, **kwargs):
        comm = counted(comm)
        plan = plan_of(comm, *args, **kwargs)
        steps, prologue, epilogue = plan.steps, plan.prologue, plan.epilogue

        def begin() -> StepRequest:
            if prologue is not None:
                prologue()
            return StepRequest(comm, steps, epilogue)

        return begin

    return bind


def register_forms(collective: str, name: str, plan_of: Callable, *, what: str, source: str = "", **record) -> None:
    """Register ``<name>-persistent`` and ``<name>-nonblocking`` of `collective` from one plan: the blocking `name`'s
    messages, so its cost (`record` may restate cost, formula, additions; by default the twin's, as its source),
    `what` naming it in their summaries."""
    twin = REGISTRY[collective][name]
    record = {"cost": twin.cost, "formula": f"{twin.formula}   ({name}'s messages)", "additions": twin.additions,
              **record}
    source = source or twin.source
    setup, bind = persistent(plan_of), nonblocking(plan_of)

    def once_persistent(comm, *args, **kwargs) -> None:
        call, free = setup(comm, *args, **kwargs)
        call()
        free()

    def once_nonblocking(comm, *args, **kwargs) -> None:
        bind(comm, *args, **kwargs)().Wait()

    once_persistent.__doc__ = (f"{what} on persistent point-to-point requests, made once per case and started per "
                               "call (MPI_Startall + MPI_Waitall per step).")
    once_nonblocking.__doc__ = (f"{what} as a non-blocking call: its steps as MPI_Isend/MPI_Irecv, each posted when a "
                                "test or the wait finds the one before it complete.")
    register(collective, f"{name}-persistent", source=source + "; persistent requests: MPI 4.0 section 3.9",
             setup=setup, **record)(once_persistent)
    register(collective, f"{name}-nonblocking", source=source + "; progressed by tests as libNBC (Hoefler et al., "
             "SC 2007)", nonblocking=bind, **record)(once_nonblocking)
