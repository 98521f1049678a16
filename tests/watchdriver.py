"""The session watchdog's loop driven in-process, for the tests of ``ccbench.measure.session``."""
from ccbench.measure import session


class Exit(BaseException):
    """os._exit, caught: the code it was called with."""


def run_watch(monkeypatch, watchdog, now, rounds=1, item=("an item", 2.0)):
    """Run `watchdog`'s loop, armed at monotonic 100 s for `item` (label, budget), with the clock then at `now`.

    It wakes `rounds` times, then is told to stop.  Returns (the exit code it left with or None, the timeouts it
    waited with).
    """
    monkeypatch.setattr(session.time, "monotonic", lambda: 100.0)
    watchdog.start(*item)
    monkeypatch.setattr(session.time, "monotonic", lambda: now)
    wakes = iter([False] * rounds + [True])
    waits = []

    def wait(timeout):
        waits.append(timeout)
        return next(wakes)

    monkeypatch.setattr(watchdog._stop, "wait", wait)

    def exit_(code):
        raise Exit(code)

    monkeypatch.setattr(session.os, "_exit", exit_)
    try:
        watchdog._watch()
    except Exit as e:
        return e.args[0], waits
    return None, waits
