"""`ccbench lab`: an emulated cluster on this machine (network namespaces, emulated links)."""

import click

from ccbench.core.choices import BINDINGS
from ccbench.core.errors import CCBenchError

__all__ = ["COMMANDS"]


def _link_summary(state: dict) -> str:
    from ccbench.lab.link import format_delay, format_rate, link_params, pair_links

    out = f"delay {format_delay(state['delay_s'])}, rate {format_rate(state['rate_bps'])}"
    own = [f"{ns}: delay {format_delay(d)}, rate {format_rate(r)}"
           for ns in state["namespaces"] if ns in (state.get("links") or {})
           for d, r in [link_params(state, ns)]]
    own += [f"pair {key.replace(',', '-')}: delay {format_delay(v['delay_s'])}, rate {format_rate(v['rate_bps'])}"
            for key, v in pair_links(state, state["namespaces"]).items()]
    return out + (f" (own links: {'; '.join(own)})" if own else "")


def _shape_summary(state: dict) -> str:
    ppn = int(state.get("ppn") or 1)
    return (f"{state['hosts']} hosts x {ppn} rank{'s' if ppn != 1 else ''} "
            f"({', '.join(state.get('hostnames') or state['namespaces'])}; {state['subnet']})")


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

    Needs root and iptables.  `ccbench lab up --hosts H --ppn R` builds it (each host a
    network and UTS namespace with its own hostname; it measures the zero-delay baseline),
    `ccbench lab run -- OPTIONS` runs `ccbench run OPTIONS` with R ranks per host (shared
    memory inside a host, the emulated links between hosts), `ccbench fit RUN` then shows
    fitted against injected delay and rate, and `ccbench lab down` removes everything.  With
    `lab up --slurm` the hosts are also Slurm nodes: `ccbench lab slurm sbatch -N 2 JOB` submits.
    """


def _slurm_env(state: dict) -> dict:
    """What every task of a job on the lab's Slurm gets: the lab's MPI transport and its provenance block.

    The block describes the lab as Slurm sees it (every host, ppn CPUs each, role ``slurm``); which hosts a
    job used and where its ranks ran are the run's ``slurm`` and ``topology`` records.
    """
    import json

    from ccbench.lab.shape import Shape
    from ccbench.measure.lab import LAB_ENV, lab_block

    block = dict(lab_block(state, Shape(state["hosts"], int(state.get("ppn") or 1)), role="slurm"),
                 host_of_rank=None, order=None)
    return {**LAB_ENV, "CCBENCH_LAB": json.dumps(block)}


def _refresh_slurm_env() -> None:
    """Give the lab's Slurm jobs the links and baseline the state now has (after `lab set`, a baseline)."""
    from ccbench.lab import core
    from ccbench.lab.slurm import write_task_env

    state = core.load_state()
    if state and state.get("slurm"):
        write_task_env(_slurm_env(state))


def _slurm_summary(state: dict) -> tuple[str, bool]:
    """(one line on the lab's Slurm: controller, nodes and their states, daemons; whether every daemon runs)."""
    from ccbench.lab import core
    from ccbench.lab.slurm import node_states

    s = state["slurm"]
    daemons = state.get("daemons") or []
    dead = [d for d in daemons if not core.daemon_alive(d)]
    nodes = node_states() if not dead else {}
    where = ", ".join(f"{n} {nodes.get(n, '?')}" for n in s["nodes"])
    procs = ", ".join(f"{d['name']} on {d['host']} (pid {d['pid']}" + (", NOT RUNNING)" if d in dead else ")")
                      for d in daemons)
    return (f"Slurm: controller {s['controller']}, nodes {where} ({s['cpus_per_node']} CPUs each, srun "
            f"--mpi={s['mpi']}); {procs}; submit with `ccbench lab slurm sbatch ...`"), not dead


@lab.command("up")
@click.option("--hosts", type=int, default=4, show_default=True, help="Hosts (namespaces), 2 to 64.")
@click.option("--ppn", type=int, default=1, show_default=True,
              help="Ranks per host that `lab run` starts by default; hosts x ppn must fit this machine.")
@click.option("--delay", default="500us", show_default=True, help="One-way delay of every link: 500us, 2ms, 0.")
@click.option("--rate", default="1gbit", show_default=True, help="Rate of every link: 1gbit, 200mbit (tc units).")
@click.option("--shaper", type=click.Choice(["auto", "netem", "userspace"]), default="auto", show_default=True,
              help="Who shapes the links: the kernel's netem, ccbench's userspace emulator, or auto "
                   "(netem where the kernel has it).")
@click.option("--baseline/--no-baseline", default=True, show_default=True,
              help="Measure the software's own latency with a zero-delay ping-pong sweep (a few seconds).")
@click.option("--results-dir", default="results", show_default=True, help="Where the baseline run is stored.")
@click.option("--slurm", is_flag=True,
              help="Also run Slurm: a controller on host 0 and one slurmd per host (node ccb-hI, ppn CPUs); submit "
                   "with `ccbench lab slurm sbatch ...`. Needs Debian's slurmctld, slurmd, slurm-client and munge.")
def up_cmd(hosts, ppn, delay, rate, shaper, baseline, results_dir, slurm):
    """Create the hosts, links and emulator (refused when a lab is already up), and Slurm with --slurm."""
    from ccbench.analysis.lab_check import baseline_fit
    from ccbench.commands.common import new_console
    from ccbench.lab import core
    from ccbench.lab.link import parse_delay, parse_rate
    from ccbench.measure.lab import measure_baseline

    delay_s, rate_bps = parse_delay(delay), parse_rate(rate)
    if slurm:
        from ccbench.lab.slurm import preflight

        why = preflight()
        if why:
            raise CCBenchError(why)
    console = new_console()
    state = core.up(hosts, delay_s, rate_bps, shaper, ppn=ppn)
    console.print(f"lab up: {_shape_summary(state)}, {_link_summary(state)}; {_shaper_summary(state)}")
    try:
        if slurm:
            from ccbench.lab import slurm as lab_slurm

            lab_slurm.up(state, _slurm_env(state))
            console.print(_slurm_summary(state)[0])
        if baseline:
            console.print("measuring the zero-delay baseline (ping-pong, 8 B to 4 MiB) ...")
            _print_baseline(console, measure_baseline(baseline_fit, results_dir))
            _refresh_slurm_env()
    except BaseException:
        core.down()
        raise


@lab.command("set")
@click.option("--host", "hosts", type=int, multiple=True,
              help="Set only this host's link (its ingress; repeatable), e.g. --host 1 --delay 2ms. "
                   "Without it (or --pair) every host gets the new delay and rate, and hosts' and pairs' own "
                   "settings are dropped.")
@click.option("--pair", "pairs", multiple=True, metavar="I,J",
              help="Give the link between hosts I and J (both ways) its own delay and rate (repeatable): it replaces "
                   "the two hosts' links for their traffic to each other; what is not given stays the pair's, else "
                   "the lab's. Userspace shaper only.")
@click.option("--delay", help="New one-way delay (default: unchanged).")
@click.option("--rate", help="New rate (default: unchanged).")
@click.option("--baseline/--no-baseline", default=None,
              help="Measure the zero-delay baseline again (default: when the rate changes).")
@click.option("--results-dir", default="results", show_default=True, help="Where a baseline run is stored.")
def set_cmd(hosts, pairs, delay, rate, baseline, results_dir):
    """Change the links' delay and rate: of every host, the hosts named or the pairs named (restarts the emulator)."""
    from ccbench.analysis.lab_check import baseline_fit
    from ccbench.commands.common import new_console
    from ccbench.core.errors import UsageError
    from ccbench.lab import core
    from ccbench.lab.link import link_params, pair_key, parse_delay, parse_rate
    from ccbench.measure.lab import measure_baseline

    new_delay = parse_delay(delay) if delay is not None else None
    new_rate = parse_rate(rate) if rate is not None else None
    if (hosts or pairs) and new_delay is None and new_rate is None:
        raise UsageError(f"{'--host' if hosts else '--pair'} needs --delay or --rate: what should the link become?")
    state = core.load_state()
    if state is None or state.get("status") != "up":
        raise CCBenchError("no lab is up: `ccbench lab up` first")
    bad = [h for h in hosts if not 0 <= h < state["hosts"]]
    if bad:
        raise UsageError(f"--host {bad[0]}: the lab's hosts are 0 to {state['hosts'] - 1}")
    named = [_pair_of(text, state["hosts"]) for text in pairs]
    if named and (state.get("emulator") or {}).get("kind") == core.NETEM_NAME:
        raise UsageError("--pair needs the userspace shaper (`ccbench lab up --shaper userspace`): this lab's links "
                         "are the kernel's netem on each host's switch port")
    if hosts or pairs:  # the hosts' and pairs' own links; the baseline is measured at the lab's rate, which stays
        links, own = dict(state.get("links") or {}), dict(state.get("pairs") or {})
        for h in dict.fromkeys(hosts):
            d, r = link_params(state, core.host_ns(h))
            links[core.host_ns(h)] = {"delay_s": d if new_delay is None else new_delay,
                                      "rate_bps": r if new_rate is None else new_rate}
        for i, j in dict.fromkeys(named):
            key = pair_key(core.host_ns(i), core.host_ns(j))
            was = own.get(key) or {"delay_s": state["delay_s"], "rate_bps": state["rate_bps"]}
            own[key] = {"delay_s": was["delay_s"] if new_delay is None else new_delay,
                        "rate_bps": was["rate_bps"] if new_rate is None else new_rate}
        rate_changed = False
        core.restart_emulator(state, state["delay_s"], state["rate_bps"], links=links, pairs=own)
    else:
        delay_s = new_delay if new_delay is not None else state["delay_s"]
        rate_bps = new_rate if new_rate is not None else state["rate_bps"]
        rate_changed = rate_bps != state["rate_bps"]
        core.restart_emulator(state, delay_s, rate_bps, links={}, pairs={})
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
    _refresh_slurm_env()


def _pair_of(text: str, nhosts: int) -> tuple[int, int]:
    """(I, J), I < J, from ``--pair I,J``; one line for anything else (not two hosts of the lab, the same twice)."""
    from ccbench.core.errors import UsageError

    parts = [p.strip() for p in str(text).split(",")]
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise UsageError(f"--pair {text!r}: expected two host numbers, e.g. --pair 0,1")
    i, j = sorted(int(p) for p in parts)
    if j >= nhosts:
        raise UsageError(f"--pair {text}: the lab's hosts are 0 to {nhosts - 1}")
    if i == j:
        raise UsageError(f"--pair {text}: a pair is two different hosts (a host's own link is --host {i})")
    return i, j


@lab.command("run", context_settings={"ignore_unknown_options": True})
@click.option("-n", "nranks", type=int, help="Ranks, on -n / ppn hosts from host 0 (default: every host, ppn each).")
@click.option("--ppn", type=int, help="Ranks per host (default: the lab's, from `lab up --ppn`); must divide -n.")
@click.option("--order", type=click.Choice(["block", "cyclic"]), default="block", show_default=True,
              help="Ranks on hosts: block (ranks 0..ppn-1 on host 0, ...) or cyclic (rank r on host r mod hosts).")
@click.option("--bind", type=click.Choice(BINDINGS), default="auto", show_default=True,
              help="Where ranks may run: each host's ranks get cores of their own when they fit (auto), "
                   "none, core, or socket (hydra's).")
@click.argument("run_args", nargs=-1, type=click.UNPROCESSED)
def run_cmd(nranks, ppn, order, bind, run_args):
    """Run `ccbench run RUN_ARGS` on the lab's hosts: ccbench lab run -n 4 --ppn 2 -- -C pingpong -s 8:4M:2.

    RUN_ARGS that start with a kind's name run that kind instead: ccbench lab run -- doctor --sizes 8,1M."""
    from ccbench.commands.common import new_console
    from ccbench.core.units import format_size
    from ccbench.measure.lab import run_on_lab

    code, run_dir, traffic = run_on_lab(list(run_args), nranks, bind=bind, ppn=ppn, order=order)
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


@lab.command("launch", context_settings={"ignore_unknown_options": True})
@click.option("-n", "nranks", type=int, required=True, help="Ranks, on -n / ppn hosts from host 0.")
@click.option("--ppn", type=int, help="Ranks per host (default: the lab's, from `lab up --ppn`); must divide -n.")
@click.option("--order", type=click.Choice(["block", "cyclic"]), default="block", show_default=True,
              help="Ranks on hosts: block or cyclic (as `lab run`).")
@click.option("--bind", type=click.Choice(BINDINGS), default="auto", show_default=True,
              help="Where ranks may run (as `lab run`).")
@click.argument("launch_args", nargs=-1, type=click.UNPROCESSED)
def launch_cmd(nranks, ppn, order, bind, launch_args):
    """Run `ccbench launch -n N LAUNCH_ARGS` with every job on the lab's hosts: several launches merged into one
    run, forced variants: ccbench lab launch -n 4 --ppn 2 -- -C allreduce -a native,native:all --launches 3.

    LAUNCH_ARGS that start with a kind's name run `ccbench KIND --launch N` instead.  Each job is a `lab run`
    (its traffic file beside its part of the run)."""
    import json
    import os
    import subprocess
    import sys

    from ccbench.lab import core
    from ccbench.measure.lab import LAUNCH_ENV, lab_state

    lab_state(nranks, ppn)  # refused before anything runs
    args = list(launch_args)
    head = ["launch", "-n", str(nranks)] if not args or args[0].startswith("-") else [args.pop(0), "--launch",
                                                                                        str(nranks)]
    over = ["--oversubscribe"] if nranks > core.usable_cores() else []  # the lab checks what fits, and flags it
    env = dict(os.environ, **{LAUNCH_ENV: json.dumps({"ppn": ppn, "order": order, "bind": bind})})
    raise SystemExit(subprocess.run([sys.executable, "-m", "ccbench", *head, "--launcher", str(core.write_mpiexec()),
                                     *over, *args], env=env).returncode)


@lab.command("mpiexec", hidden=True, context_settings={"ignore_unknown_options": True, "help_option_names": []})
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def mpiexec_cmd(argv):
    """The launcher `lab launch` hands `ccbench launch` (not typed by hand): -n N [FLAGS] PYTHON -m mpi4py -m
    ccbench ARGS, run on the lab's hosts."""
    from ccbench.measure.lab import lab_job

    raise SystemExit(lab_job(list(argv)))


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
    console.print(f"lab {state.get('status')}: {_shape_summary(state)}, {_link_summary(state)}")
    console.print(("running" if alive else "NOT RUNNING (traffic blocked)") + f": {_shaper_summary(state)}")
    stats = core.read_stats()
    if stats:
        for ns, v in stats.get("links", {}).items():
            console.print(f"  {ns}: {v['packets']} packets, {v['bytes']} bytes, {v['pending']} pending, "
                          f"{v['overruns']} overruns")
    _print_baseline(console, state.get("baseline"))
    running = True
    if state.get("slurm"):
        line, running = _slurm_summary(state)
        console.print(line)
    if not (alive and running):
        raise SystemExit(1)


@lab.command("slurm", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def slurm_cmd(command):
    """Run a Slurm command on the lab's Slurm (on host 0): ccbench lab slurm sbatch -N 2 --ntasks-per-node 2 JOB."""
    from ccbench.lab import core
    from ccbench.lab.slurm import client

    state = core.load_state()
    if state is None:
        raise CCBenchError("no lab is up: `ccbench lab up --hosts N --ppn R --slurm` first")
    if not state.get("slurm"):
        raise CCBenchError("this lab runs no Slurm: `ccbench lab down`, then `ccbench lab up --slurm`")
    try:
        code = client(list(command)).returncode
    except FileNotFoundError:
        raise CCBenchError(f"{command[0]}: no such command") from None
    raise SystemExit(code)


@lab.command("down")
def down_cmd():
    """Remove every namespace, link, rule, daemon and process the lab created (also after a crash)."""
    from ccbench.commands.common import new_console
    from ccbench.lab import core

    removed = core.down()
    new_console().print("removed: " + ", ".join(removed) if removed else "nothing to remove: no lab")


COMMANDS = [lab]
