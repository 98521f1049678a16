"""Rewrite a module's decorated top-level functions as plain ones, decorated after their definition.

mutmut 3 makes no mutants of a decorated function (it cannot copy one for its trampoline
without running the decorator again), and every hand-written algorithm is registered by a
decorator (``@register(...)``), as are the ``@lru_cache`` helpers.  In the scratch copy only,
tests/mutation/run.sh (with ``UNDECORATE=1``) turns::

    @register("bcast", "linear", ...)
    def linear(comm, ...):
        ...

into::

    def linear(comm, ...):
        ...
    linear = register("bcast", "linear", ...)(linear)

which is the same program (a decorator is exactly that call), so mutmut mutates the body
and the registry holds its trampoline.  ``@property``, ``@staticmethod`` and ``@classmethod``
inside classes are left alone (only top-level functions are rewritten).

    python tests/mutation/undecorate.py FILE ...
"""

import ast
import sys


def undecorate(source: str) -> str:
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    edits = []  # (first line, last line of the function, the def's first line, assignments)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.decorator_list:
            decos = [ast.get_source_segment(source, d) for d in node.decorator_list]
            first = min(d.lineno for d in node.decorator_list)
            applied = node.name
            for d in reversed(decos):  # the decorator nearest the def is applied first
                applied = f"({d})({applied})"
            edits.append((first, node.end_lineno, node.lineno, f"{node.name} = {applied}\n"))
    for first, end, def_line, assign in reversed(edits):
        lines[end:end] = [assign]
        del lines[first - 1:def_line - 1]
    return "".join(lines)


if __name__ == "__main__":
    for path in sys.argv[1:]:
        with open(path) as f:
            text = f.read()
        out = undecorate(text)
        compile(out, path, "exec")
        with open(path, "w") as f:
            f.write(out)
