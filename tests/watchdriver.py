"""The session watchdog checked in-process, for the tests of ``ccbench.measure.session``."""
from ccbench.measure import session


class Exit(BaseException):
    """os._exit, caught: the code it was called with."""


def catch_exit(monkeypatch) -> None:
    """Make ``os._exit`` in the session module raise `Exit` instead of ending the test's process."""

    def exit_(code):
        raise Exit(code)

    monkeypatch.setattr(session.os, "_exit", exit_)


def run_watch(monkeypatch, watchdog, now, item=("an item", 2.0), peers=False):
    """`watchdog` armed at monotonic 100 s for `item` (label, budget), then checked at `now` (`peers`: a peer check
    is due), and the job ended as its thread ends it when the check says why.  Returns the exit code it left with,
    or None when the check found nothing."""
    watchdog.start(*item, now=100.0)
    why = watchdog.check(now, peers)
    if why is None:
        return None
    catch_exit(monkeypatch)
    try:
        watchdog.end(why)
    except Exit as e:
        return e.args[0]
    raise AssertionError("the watchdog's end returned")
