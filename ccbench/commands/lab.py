"""`ccbench lab`: an emulated cluster on this machine (network namespaces, emulated links)."""

import click

from ccbench.commands.options import BIND_HELP
from ccbench.core.choices import BINDINGS
from ccbench.core.errors import CCBenchError

__all__ = ["COMMANDS"]


def _link_summary(state: dict) -> str:
    from ccbench.lab.link import format_delay, format_rate

    return f"delay {format_delay(state['delay_s'])}, rate {format_rate(state['rate_bps'])}"


def _shaper_summary(state: dict) -> str:
    emu = state.get("emulator") or {}
    if emu.get("pid") is None:
        return f"shaper: {emu.get('kind')}"
    why = (state.get("shaper_choice") or {}).get("netem")
    return (f"shaper: {emu.get('kind')}, pid {emu['pid']} ({emu.get('priority')})"
            + (f"; kernel netem: {why}" if why else ""))


def _print_baseline(console, base: dict | None) -> None:
    from ccbench.core.units import fmt_time
    from ccbench.lab.link import format_rate

    if not base:
        console.print("zero-delay baseline: none (fits show alpha only; `ccbench lab set --baseline` measures it)")
        return
    console.print(f"zero-delay baseline: alpha {fmt_time(base['alpha_s'])} ({base['statistic']} per size), "
                  f"fitted rate {format_rate(base['fitted_rate_bps'])} at {format_rate(base['rate_bps'])}; "
                  f"run {base['run']}")


@click.group("lab")
def lab():
    """An emulated cluster on this machine: hosts are network namespaces, links have a chosen delay and rate.

    Needs root and iptables.  `ccbench lab up` builds it (and measures the zero-delay
    baseline), `ccbench lab run -- OPTIONS` runs `ccbench run OPTIONS` with one rank per
    host, `ccbench fit RUN` then shows fitted against injected delay and rate, and
    `ccbench lab down` removes everything.
    """


@lab.command("up")
@click.option("--hosts", type=int, default=4, show_default=True, help="Hosts (namespaces), 2 to 64.")
@click.option("--delay", default="500us", show_default=True, help="One-way delay of every link: 500us, 2ms, 0.")
@click.option("--rate", default="1gbit", show_default=True, help="Rate of every link: 1gbit, 200mbit (tc units).")
@click.option("--shaper", type=click.Choice(["auto", "netem", "userspace"]), default="auto", show_default=True,
              help="Who shapes the links: the kernel's netem, ccbench's userspace emulator, or auto "
                   "(netem where the kernel has it).")
@click.option("--baseline/--no-baseline", default=True, show_default=True,
              help="Measure the software's own latency with a zero-delay ping-pong sweep (a few seconds).")
@click.option("--results-dir", default="results", show_default=True, help="Where the baseline run is stored.")
def up_cmd(hosts, delay, rate, shaper, baseline, results_dir):
    """Create the hosts, links and emulator (refused when a lab is already up)."""
    from ccbench.analysis.lab_check import baseline_fit
    from ccbench.commands.common import new_console
    from ccbench.lab import core
    from ccbench.lab.link import parse_delay, parse_rate
    from ccbench.measure.lab import measure_baseline

    delay_s, rate_bps = parse_delay(delay), parse_rate(rate)
    console = new_console()
    state = core.up(hosts, delay_s, rate_bps, shaper)
    console.print(f"lab up: {hosts} hosts {', '.join(state['namespaces'])} ({state['subnet']}), "
                  f"{_link_summary(state)}; {_shaper_summary(state)}")
    if baseline:
        console.print("measuring the zero-delay baseline (ping-pong, 8 B to 4 MiB) ...")
        try:
            base = measure_baseline(baseline_fit, results_dir)
        except BaseException:
            core.down()
            raise
        _print_baseline(console, base)


@lab.command("set")
@click.option("--delay", help="New one-way delay (default: unchanged).")
@click.option("--rate", help="New rate (default: unchanged).")
@click.option("--baseline/--no-baseline", default=None,
              help="Measure the zero-delay baseline again (default: when the rate changes).")
@click.option("--results-dir", default="results", show_default=True, help="Where a baseline run is stored.")
def set_cmd(delay, rate, baseline, results_dir):
    """Change the links' delay and rate (restarts the emulator; the hosts stay)."""
    from ccbench.analysis.lab_check import baseline_fit
    from ccbench.commands.common import new_console
    from ccbench.lab import core
    from ccbench.lab.link import parse_delay, parse_rate
    from ccbench.measure.lab import measure_baseline

    state = core.load_state()
    if state is None or state.get("status") != "up":
        raise CCBenchError("no lab is up: `ccbench lab up` first")
    delay_s = parse_delay(delay) if delay is not None else state["delay_s"]
    rate_bps = parse_rate(rate) if rate is not None else state["rate_bps"]
    rate_changed = rate_bps != state["rate_bps"]
    core.restart_emulator(state, delay_s, rate_bps)
    console = new_console()
    console.print(f"lab links now: {_link_summary(state)}; {_shaper_summary(state)}")
    if baseline or (baseline is None and rate_changed):
        console.print("measuring the zero-delay baseline ...")
        _print_baseline(console, measure_baseline(baseline_fit, results_dir))
    elif rate_changed:
        state = core.load_state()
        state["baseline"] = None
        core.save_state(state)
        _print_baseline(console, None)


@lab.command("run", context_settings={"ignore_unknown_options": True})
@click.option("-n", "nranks", type=int, help="Ranks = hosts used, from host 0 (default: every host).")
@click.option("--bind", type=click.Choice(BINDINGS), default="auto", show_default=True, help=BIND_HELP)
@click.argument("run_args", nargs=-1, type=click.UNPROCESSED)
def run_cmd(nranks, bind, run_args):
    """Run `ccbench run RUN_ARGS` with one rank per host: ccbench lab run -- -C pingpong -s 8:4M:2."""
    from ccbench.commands.common import new_console
    from ccbench.core.units import format_size
    from ccbench.measure.lab import run_on_lab

    code, run_dir, traffic = run_on_lab(list(run_args), nranks, bind=bind)
    console = new_console()
    parts = [f"{ns} received {format_size(v['rx_bytes'])} ({v['emulated_packets']} packets through the emulator)"
             for ns, v in traffic["links"].items()]
    console.print("traffic over the emulated links: " + "; ".join(parts))
    late = traffic.get("emulator_lateness_counts")
    edges = traffic.get("emulator_lateness_edges_s")
    if late and edges and sum(late):
        over = sum(c for c, e in zip(late, edges, strict=False) if e is None or e > 100e-6)
        console.print(f"emulator: {sum(late)} releases, {over} of them more than 100 us late")
    if run_dir is not None:
        console.print(f"run {run_dir}; traffic in {run_dir}/lab-traffic*.json; fit it with `ccbench fit {run_dir}`")
    if code:
        raise SystemExit(code)
    if not traffic["crossed_links"]:
        raise CCBenchError("the run's traffic did not cross every emulated link (MPI used another path?)")


@lab.command("status")
def status_cmd():
    """Say whether a lab is up, its links, emulator, counters and baseline."""
    from ccbench.commands.common import new_console
    from ccbench.lab import core

    console = new_console()
    state = core.load_state()
    leftovers = core.lab_namespaces()
    if state is None:
        console.print("no lab is up" + (f"; leftover namespaces {', '.join(leftovers)}: run `ccbench lab down`"
                                         if leftovers else ""))
        return
    alive = core.emulator_alive(state)
    console.print(f"lab {state.get('status')}: {state['hosts']} hosts {', '.join(state['namespaces'])} "
                  f"({state['subnet']}), {_link_summary(state)}")
    console.print(("running" if alive else "NOT RUNNING (traffic blocked)") + f": {_shaper_summary(state)}")
    stats = core.read_stats()
    if stats:
        for ns, v in stats.get("links", {}).items():
            console.print(f"  {ns}: {v['packets']} packets, {v['bytes']} bytes, {v['pending']} pending, "
                          f"{v['overruns']} overruns")
    _print_baseline(console, state.get("baseline"))
    if not alive:
        raise SystemExit(1)


@lab.command("down")
def down_cmd():
    """Remove every namespace, link, rule and process the lab created (also after a crash)."""
    from ccbench.commands.common import new_console
    from ccbench.lab import core

    removed = core.down()
    new_console().print("removed: " + ", ".join(removed) if removed else "nothing to remove: no lab")


COMMANDS = [lab]
