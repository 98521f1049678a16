"""`ccbench predict --against`'s view: measured / predicted per algorithm and size, per collective, and the winners."""

from ccbench.analysis.fit import params_from_dict
from ccbench.core.units import format_size
from ccbench.present.model_tables import params_line
from ccbench.present.table import Column, Styled, Table, render

__all__ = ["print_crossval", "ratio_tables", "summary_table", "winners_table"]


def _ratio(v) -> str:
    return "-" if v is None or v != v else f"{v:.2f}"


def ratio_tables(doc: dict) -> list[Table]:
    """Per collective: one row per algorithm, measured / predicted per size."""
    out = []
    for coll in dict.fromkeys(c["collective"] for c in doc["cases"]):
        cases = [c for c in doc["cases"] if c["collective"] == coll]
        sizes = sorted({c["nbytes"] for c in cases})
        t = Table(f"{coll} at {', '.join(map(str, doc['against']['nranks']))} ranks: measured / predicted",
                  [Column("algorithm"), Column("kind"), Column("priced as"),
                   *[Column(format_size(n), align="right") for n in sizes]])
        by: dict[str, dict[int, float]] = {}
        kinds, priced = {}, {}
        for c in cases:
            by.setdefault(c["algorithm"], {})[c["nbytes"]] = c["ratio"]
            kinds[c["algorithm"]] = c["kind"]
            priced.setdefault(c["algorithm"], {})[c["modelled_as"].split(" (")[0]] = None  # the names only
        for alg in sorted(by, key=lambda a: (kinds[a] != "hand-written", a)):
            as_ = "; ".join(priced[alg])
            t.add_row(alg, kinds[alg], "" if as_ == alg else as_, *[_ratio(by[alg].get(n)) for n in sizes])
        out.append(t)
    return out


def summary_table(doc: dict) -> Table:
    """Per collective (all, hand-written, native): cases, median and worst ratio."""
    t = Table("per collective: measured / predicted (worst = farthest from 1)",
              [Column("collective"), Column("kind"), Column("cases", "count"),
               Column("median", "model_ratio"), Column("worst", "model_ratio")])
    for s in sorted(doc["summary"], key=lambda s: (s["collective"], s["kind"] != "all", s["kind"])):
        t.add_row(s["collective"], s["kind"], s["cases"], s["median_ratio"], s["worst_ratio"])
    return t


def winners_table(doc: dict) -> Table:
    """Per collective and size: the measured fastest modelled algorithm against the predicted fastest."""
    a = doc["agreement"]
    t = Table(f"who wins: predicted = measured fastest at {a['agree']} of {a['sizes']} sizes",
              [Column("collective"), Column("size", "size"), Column("algorithms", "count"),
               Column("measured fastest"), Column("predicted fastest"), Column("agree"),
               Column("margin", "percent")])
    for w in doc["winners"]:
        t.add_row(w["collective"], w["nbytes"], w["algorithms"], w["measured_winner"], w["predicted_winner"],
                  None if w["agree"] is None else ("yes" if w["agree"] else Styled("no", "red")), w["margin"])
    return t


def print_crossval(doc: dict, console, written=None) -> None:
    """The parameters used and why, the ratio tables, the per-collective summary and the winners."""
    fits = ", ".join(f"{r['name']} ({r['nranks']} ranks)" for r in doc["fit_runs"])
    console.print(f"cross-validation: fitted to {fits}; predicting {doc['against']['name']} at "
                  f"{', '.join(map(str, doc['against']['nranks']))} ranks with the {doc['params']} parameters "
                  f"({doc['why']})")
    console.print(params_line(params_from_dict(doc["parameters"]), "fitted to the small runs"))
    for n in doc["notes"]:
        console.print(f"[yellow]note: {n}[/]")
    for what, why in doc["not_modelled"].items():
        console.print(f"not compared: {what}: {why}")
    render([*ratio_tables(doc), summary_table(doc), winners_table(doc)], console)
    if written is not None:
        console.print(f"wrote {written}")
