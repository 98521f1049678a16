"""The words a measuring option takes, in one numpy-free place: the command line offers them (``--help`` stays
fast) and the configuration checks them (`ccbench.measure.config`)."""

__all__ = ["BINDINGS", "BUFFERS", "LOOPS", "ORDERS", "SYNC_METHODS", "THREAD_LEVELS"]

THREAD_LEVELS = ("auto", "single", "funneled", "serialized", "multiple")
SYNC_METHODS = ("barrier", "window")
ORDERS = ("shuffled", "planned")
#: How the launcher binds the ranks (`ccbench.measure.launcher.choose_binding`): auto = core when they fit the cores
BINDINGS = ("auto", "core", "socket", "none")
#: Which loop times the library's own collectives: ccbench's Python loop (default), its C loop
#: (`ccbench.measure.compiled`; an error where it cannot be built), or the C loop where it can be built
LOOPS = ("python", "compiled", "auto")
#: Which buffers the timed calls use: warm (the same buffers every call, in cache when they fit) or cold (a call
#: at a time through sets of buffers together larger than the last-level cache: IMB's -off_cache)
BUFFERS = ("warm", "cold")
