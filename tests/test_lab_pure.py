"""The lab's pure parts: link schedule, units, nfnetlink_queue messages, the MPMD command, fitted vs injected."""

import json
import struct

import numpy as np
import pytest

from ccbench.analysis.lab_check import fit_link, fitted_vs_injected, low_statistic_rows
from ccbench.core.errors import UsageError
from ccbench.lab import netlink as nl
from ccbench.lab.link import Link, format_delay, format_rate, parse_delay, parse_rate
from ccbench.present.model_tables import lab_table
from ccbench.present.table import to_rich

# ------------------------------------------------------------------ units

@pytest.mark.parametrize("text,bps", [("1gbit", 1e9), ("200mbit", 200e6), ("10kbit", 1e4), ("1e9", 1e9),
                                      ("1.5Gbit", 1.5e9), ("125mbps", 1e9), ("1mibit", 2**20), ("64bit", 64)])
def test_parse_rate(text, bps):
    assert parse_rate(text) == pytest.approx(bps)


@pytest.mark.parametrize("text", ["", "fast", "0mbit", "-1gbit", "10 furlongs", "1gb/s"])
def test_parse_rate_refuses(text):
    with pytest.raises(UsageError, match="bad rate"):
        parse_rate(text)


@pytest.mark.parametrize("text,s", [("500us", 500e-6), ("2ms", 2e-3), ("0", 0.0), ("0.5s", 0.5), ("1500ns", 1.5e-6),
                                    ("250µs", 250e-6)])
def test_parse_delay(text, s):
    assert parse_delay(text) == pytest.approx(s)


@pytest.mark.parametrize("text", ["-1ms", "2 hours", "5s", "ms"])
def test_parse_delay_refuses(text):
    with pytest.raises(UsageError, match="bad delay"):
        parse_delay(text)


def test_formats_round_trip():
    for bps in (1e9, 200e6, 64e3, 10.0):
        assert parse_rate(format_rate(bps)) == pytest.approx(bps)
    for s in (0.0, 500e-6, 2e-3, 0.25):
        assert parse_delay(format_delay(s)) == pytest.approx(s)


# ------------------------------------------------------------------ the release schedule

def test_link_serialises_then_delays():
    link = Link(delay_s=1e-3, rate_bps=8e6)  # 1 byte per microsecond
    assert link.release(0.0, 1000) == pytest.approx(1e-3 + 1e-3)  # 1000 B take 1 ms, then 1 ms delay
    # a second packet arriving while the first serialises waits for it
    assert link.release(0.5e-3, 500) == pytest.approx(1.5e-3 + 1e-3)
    # an idle link starts at the arrival
    assert link.release(10e-3, 100) == pytest.approx(10e-3 + 0.1e-3 + 1e-3)


def test_link_release_times_never_decrease():
    rng = np.random.default_rng(1)
    link = Link(delay_s=5e-4, rate_bps=1e9)
    t, last = 0.0, -1.0
    for _ in range(2000):
        t += rng.exponential(20e-6)
        r = link.release(t, int(rng.integers(40, 65536)))
        assert r >= last and r >= t + 5e-4
        last = r


def test_link_throughput_is_the_rate():
    link = Link(delay_s=2e-3, rate_bps=200e6)
    last = max(link.release(0.0, 65536) for _ in range(64))  # a 4 MiB burst
    assert last == pytest.approx(64 * 65536 * 8 / 200e6 + 2e-3)


def test_link_refuses_nonsense():
    with pytest.raises(ValueError):
        Link(-1e-3, 1e9)
    with pytest.raises(ValueError):
        Link(1e-3, 0)


# ------------------------------------------------------------------ netlink messages

def _header(msg: bytes):
    length, kind, flags, seq, pid = struct.unpack_from("=IHHII", msg)
    family, version, res_id = struct.unpack_from("!BBH", msg, 16)
    return length, kind, flags, seq, family, version, res_id


def _attrs(msg: bytes) -> dict:
    out, off = {}, 20
    while off < len(msg):
        alen, kind = struct.unpack_from("=HH", msg, off)
        out[kind] = msg[off + 4: off + alen]
        off += (alen + 3) & ~3
    return out


def test_config_bind_layout():
    m = nl.config_bind(7, seq=3)
    length, kind, flags, seq, family, version, res_id = _header(m)
    assert length == len(m) == 16 + 4 + 8 and kind == (3 << 8) | 2 and seq == 3
    assert flags == nl.NLM_F_REQUEST | nl.NLM_F_ACK and version == 0 and res_id == 7
    assert _attrs(m)[nl.NFQA_CFG_CMD] == bytes([nl.NFQNL_CFG_CMD_BIND, 0]) + struct.pack("!H", 2)


def test_config_params_flags_maxlen_layout():
    p = _attrs(nl.config_params(0, 20))[nl.NFQA_CFG_PARAMS]
    assert p == struct.pack("!IB", 20, nl.NFQNL_COPY_PACKET) and len(p) == 5  # packed struct
    a = _attrs(nl.config_flags(0, nl.NFQA_CFG_F_GSO, nl.NFQA_CFG_F_GSO | nl.NFQA_CFG_F_FAIL_OPEN))
    assert struct.unpack("!I", a[nl.NFQA_CFG_FLAGS])[0] == 4  # GSO on, fail-open off: fail closed
    assert struct.unpack("!I", a[nl.NFQA_CFG_MASK])[0] == 5
    assert struct.unpack("!I", _attrs(nl.config_maxlen(0, 65536))[nl.NFQA_CFG_QUEUE_MAXLEN])[0] == 65536


def test_verdicts_layout():
    m = nl.verdict_batch(2, 41)
    assert _header(m)[1] == (3 << 8) | nl.NFQNL_MSG_VERDICT_BATCH and _header(m)[6] == 2
    assert _attrs(m)[nl.NFQA_VERDICT_HDR] == struct.pack("!II", nl.NF_ACCEPT, 41)
    one = nl.verdict(0, 9, nl.NF_DROP)
    assert _header(one)[1] == (3 << 8) | nl.NFQNL_MSG_VERDICT
    assert _attrs(one)[nl.NFQA_VERDICT_HDR] == struct.pack("!II", nl.NF_DROP, 9)


def _packet_message(packet_id: int, payload: bytes, cap_len: int | None, seq: int = 0) -> bytes:
    """A queued-packet message as the kernel builds it (nfqnl_build_packet_message)."""
    attrs = nl.attr(nl.NFQA_PACKET_HDR, struct.pack("!IHB", packet_id, 0x0800, 0))
    attrs += nl.attr(5, struct.pack("!I", 2))  # NFQA_IFINDEX_INDEV, ignored
    if cap_len is not None:
        attrs += nl.attr(nl.NFQA_CAP_LEN, struct.pack("!I", cap_len))
    attrs += nl.attr(nl.NFQA_PAYLOAD, payload)
    body = struct.pack("!BBH", 2, 0, 0) + attrs
    return struct.pack("=IHHII", 16 + len(body), (3 << 8) | nl.NFQNL_MSG_PACKET, 0, seq, 0) + body


def test_parse_packets_from_one_receive():
    buf = (_packet_message(5, b"\x45" * 20, 65226) + _packet_message(6, b"\x45" * 3, None)
           + struct.pack("=IHHII", 36, nl.NLMSG_ERROR, 0, 4, 0) + struct.pack("=i", 0) + b"\0" * 16)
    got = list(nl.iter_messages(buf))
    assert [k for k, *_ in got] == [(3 << 8), (3 << 8), nl.NLMSG_ERROR]
    assert nl.parse_packet(got[0][3]) == (5, 65226)  # GSO super-packet: its full length from CAP_LEN
    assert nl.parse_packet(got[1][3]).length_bytes == 3  # whole packet copied
    assert nl.error_code(got[2][3]) == 0 and got[2][2] == 4


def test_parse_errors():
    err = struct.pack("=IHHII", 36, nl.NLMSG_ERROR, 0, 1, 0) + struct.pack("=i", -16) + b"\0" * 16
    (_, _, _, payload), = nl.iter_messages(err)
    assert nl.error_code(payload) == 16  # EBUSY: an old emulator still holds the queue
    with pytest.raises(ValueError, match="truncated"):
        list(nl.iter_messages(_packet_message(1, b"x", None)[:-4]))
    with pytest.raises(ValueError, match="PACKET_HDR"):
        nl.parse_packet(struct.pack("!BBH", 2, 0, 0) + nl.attr(nl.NFQA_PAYLOAD, b"abc"))


# ------------------------------------------------------------------ launch command and provenance

def test_lab_command_is_one_proxy_per_host_through_the_lab_launcher():
    from ccbench.lab.shape import Shape
    from ccbench.measure.lab import LAB_ENV, lab_command

    cmd = lab_command(Shape(2, 2), ["-C", "pingpong"], mpiexec="mpiexec", python="py", launcher="/lab/launch")
    assert cmd[:4] == ["ip", "netns", "exec", "ccb-h0"]  # mpiexec where host 0's network reaches the proxies
    assert " ".join(cmd[4:]) == ("mpiexec -launcher rsh -launcher-exec /lab/launch -localhost 10.251.77.1 "
                                 "-hosts ccb-h0:2,ccb-h1:2 -bind-to none -n 4 py -m mpi4py -m ccbench run -C pingpong")
    cyclic = lab_command(Shape(3, 2, "cyclic"), [], launcher="x")
    assert cyclic[cyclic.index("-hosts") + 1] == "ccb-h0:1,ccb-h1:1,ccb-h2:1" and cyclic[cyclic.index("-n") + 1] == "6"
    assert "MPIR_CVAR_NOLOCAL" not in LAB_ENV  # hosts are nodes now: shared memory inside one is wanted


def test_provenance_reads_the_lab_block(tmp_path):
    """run.json's ``lab``: the block ``ccbench lab run`` hands its ranks in CCBENCH_LAB, none outside a lab, an error
    for a block that cannot be read.  Each is a one-rank sweep of its own (a singleton, vouched for as launched)."""
    import os
    import subprocess
    import sys

    def lab_of(block: str | None, name: str):
        env = {k: v for k, v in os.environ.items() if k != "CCBENCH_LAB"}
        env.update(CCBENCH_LAUNCHED="1", **({"CCBENCH_LAB": block} if block is not None else {}))
        res = subprocess.run([sys.executable, "-m", "ccbench", "run", "-C", "barrier", "--loop", "python",
                              "--min-reps", "2", "--max-reps", "3", "--budget", "0.05", "--results-dir",
                              str(tmp_path / name), "--no-show"], capture_output=True, text=True, timeout=120, env=env)
        assert res.returncode == 0, res.stderr
        (run,) = (tmp_path / name).iterdir()
        return json.loads((run / "run.json").read_text()).get("lab", "absent")

    assert lab_of(None, "none") == "absent"
    assert lab_of(json.dumps({"delay_s": 5e-4, "rate_bps": 1e9}), "lab") == {"delay_s": 5e-4, "rate_bps": 1e9}
    assert "unreadable" in lab_of("{not json", "bad")["error"]


def test_the_lab_emulators_cpu_time_is_the_runs_own_not_other_load(tmp_path, monkeypatch):
    """A lab run's load record: the emulator is the link, so its CPU time joins the ranks' own (a healthy 4-host lab
    read as 31% other load before); without a lab nothing is added."""
    from ccbench.measure.hardware import USER_HZ, cpu_times, load_record, process_cpu_s

    (tmp_path / "proc" / "77").mkdir(parents=True)
    (tmp_path / "proc" / "stat").write_text("cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 1\ncpu1 1\n")
    # the command name holds a space and a parenthesis: fields are counted after its last ')'
    (tmp_path / "proc" / "77" / "stat").write_text(f"77 (py thon) emu) S {' '.join(['0'] * 10)} {3 * USER_HZ} "
                                                   f"{USER_HZ} 0 0\n")
    assert process_cpu_s(77, tmp_path) == pytest.approx(4.0) and process_cpu_s(78, tmp_path) == 0.0
    monkeypatch.delenv("CCBENCH_LAB", raising=False)
    assert cpu_times(tmp_path).helper == 0.0
    monkeypatch.setenv("CCBENCH_LAB", json.dumps({"emulator_pid": 77}))
    start = cpu_times(tmp_path)
    assert start.helper == pytest.approx(4.0)
    end = start._replace(busy=start.busy + 1.6, total=start.total + 2.0, wall=start.wall + 1.0, helper=4.6)
    # 2 CPUs for 1 s: 80% busy; the ranks 0.9 s and the emulator 0.6 s of it: 75% own, 5% other
    rec = load_record(start, end, 0.9 + (end.helper - start.helper))
    assert rec["busy_fraction"] == pytest.approx(0.8) and rec["other_fraction"] == pytest.approx(0.05)


def test_lab_launch_jobs_refuse_a_command_that_is_not_mpiexecs(monkeypatch):
    from ccbench.measure.lab import lab_job

    for argv in (["-n", "x", "py", "-m", "mpi4py", "-m", "ccbench", "run"], ["-n", "4", "py", "script.py"], []):
        with pytest.raises(UsageError, match="lab mpiexec: expected -n N"):
            lab_job(argv)


# ------------------------------------------------------------------ fitted vs injected

SIZES = [8 * 2**k for k in range(20)]  # 8 B .. 4 MiB


def _rows(alpha0, delay, rate, rng, noise=0.0):
    """Synthetic ping-pong rows: min = the model, other samples slower (contention only adds)."""
    rows = []
    for n in SIZES:
        t = alpha0 + delay + n * 8 / rate
        samples = t * (1 + np.abs(rng.normal(0, noise, 30)))
        samples[0] = t
        rows.append({"collective": "pingpong", "algorithm": "native", "nranks": 2, "nbytes": n,
                     "min_s": float(samples.min()), "median_s": float(np.median(samples)) * 1.3,
                     "samples_s": samples.tolist()})
    return rows


def test_fit_link_recovers_a_known_link():
    rng = np.random.default_rng(0)
    f = fit_link(_rows(25e-6, 2e-3, 200e6, rng, noise=0.2), n_boot=200)
    assert f["alpha_s"] == pytest.approx(25e-6 + 2e-3, rel=1e-9)
    assert f["rate_bps"] == pytest.approx(200e6, rel=1e-9)
    assert f["alpha_sizes"] == [8, 128] and f["beta_sizes"] == [512 << 10, 4 << 20]


def test_fitted_vs_injected_subtracts_the_baseline():
    rng = np.random.default_rng(2)
    lab = {"delay_s": 5e-4, "rate_bps": 1e9, "hosts": 2, "role": "measurement",
           "baseline": {"alpha_s": 40e-6, "run": "results/base"}}
    out = fitted_vs_injected(_rows(40e-6, 5e-4, 1e9, rng, noise=0.1), lab, n_boot=100)
    assert out["fitted_delay_s"] == pytest.approx(5e-4, abs=1e-9)
    assert abs(out["delay_error_s"]) < 1e-9 and abs(out["rate_error"]) < 1e-9
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(to_rich(lab_table(out)))
    text = console.export_text()
    assert "delay = alpha - baseline" in text and "500 us" in text and "1gbit" in text


def test_fitted_vs_injected_without_baseline_or_pingpong():
    rng = np.random.default_rng(3)
    out = fitted_vs_injected(_rows(40e-6, 0.0, 1e9, rng), {"delay_s": 0.0, "rate_bps": 1e9, "role": "baseline"},
                             n_boot=50)
    assert out["fitted_delay_s"] is None and out["fitted"]["alpha_s"] == pytest.approx(40e-6)
    none = fitted_vs_injected([{"collective": "allreduce"}], {"delay_s": 1e-3, "rate_bps": 1e9})
    assert "no ping-pong rows" in none["note"] and "fitted" not in none


def test_low_statistic_rows():
    rows = _rows(1e-5, 0.0, 1e9, np.random.default_rng(4), noise=0.5)
    assert [r["median_s"] for r in low_statistic_rows(rows, "min")] == [r["min_s"] for r in rows]
    p10 = low_statistic_rows(rows, "p10")
    assert all(r["min_s"] <= q["median_s"] <= r["median_s"] for r, q in zip(rows, p10, strict=True))
    assert all(q["samples_s"] is None for q in p10)
    with pytest.raises(UsageError, match="bad statistic"):
        low_statistic_rows(rows, "mean")
