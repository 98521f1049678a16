"""Convert Fugaku MPI_Allreduce timings from HLC-Lab/bine_trees_fugaku into a ccbench CSV.

Source: https://github.com/HLC-Lab/bine_trees_fugaku (MIT licence, Copyright (c) 2025 Daniele De Sensi),
folder data/fugaku/2024_08_28_10_07_51/, files 64_<count>_default_<alg>.csv as stored at commits
e1bc61e0336af3441175e9e05ca1d32eba7840cc and d9cbea910df5d2019bffa902649f4f98216d65f1 (see README.md).

Each source file is the stdout of rank 0 of the repository's bench/bench.cc run as
``bench MPI_Allreduce INT <count> <iterations>`` on 64 processes: a header
``#MessageSize Rank0Time(us) ... Rank63Time(us)``, one line per timed iteration holding the
element count and every rank's time in microseconds, then ``Average runtime: X`` (the mean over
iterations of the maximum over ranks).

Input: a directory of the raw text.  A file named exactly like the source file holds the whole
file (its ``Average runtime`` line is checked against the mean of the per-iteration maxima);
a file named ``<source file>@<offset>`` holds the complete iteration lines that follow character
``offset`` of the source file (an evenly placed excerpt of a long file: the partial line cut at
the offset is not included).

Output: one CSV row per iteration: time_s = max over the 64 ranks' times / 1e6,
nbytes = count * 4 (MPI_INT, 4 bytes), dtype int32, op sum.

    python tests/data/public/convert_fugaku.py RAW_DIR tests/data/public/fugaku_allreduce_p64.csv
"""

import re
import sys
from pathlib import Path

NRANKS = 64
ELEMENT_BYTES = 4  # MPI_INT
# the source's algorithm name (Fujitsu MPI coll_select_allreduce_algorithm; "default" = the
# library's own choice) -> ccbench's registry name
ALGORITHMS = {"ring": "ring", "recursive_doubling": "recursive_doubling", "default": "native"}
NAME = re.compile(r"^64_(\d+)_default_([a-z_]+)\.csv(?:@(\d+))?$")
HEADER = "collective,algorithm,nranks,nbytes,time_s,sample,nodes,ppn,dtype,op"


def iterations(text: str, count: int, where: str) -> list[float]:
    """Maximum over ranks of every iteration line, in microseconds."""
    out = []
    for line in text.splitlines():
        fields = line.split()
        if not fields or not fields[0].isdigit():
            continue
        if len(fields) != NRANKS + 1 or int(fields[0]) != count:
            raise SystemExit(f"{where}: a line with {len(fields)} fields or a count other than {count}")
        out.append(max(float(x) for x in fields[1:]))
    avg = re.search(r"^Average runtime: ([0-9.]+)$", text, re.M)
    if avg and abs(sum(out) / len(out) - float(avg.group(1))) > 1e-6 * float(avg.group(1)):
        raise SystemExit(f"{where}: the mean of the maxima differs from the file's Average runtime")
    return out


def convert(raw_dir: Path) -> list[str]:
    rows = [HEADER]
    files = sorted(raw_dir.iterdir(), key=lambda p: (NAME.match(p.name).group(2), int(NAME.match(p.name).group(1))))
    for path in files:
        count, alg, _ = NAME.match(path.name).groups()
        if alg not in ALGORITHMS:
            continue
        count = int(count)
        for k, us in enumerate(iterations(path.read_text(), count, path.name), start=1):
            rows.append(f"allreduce,{ALGORITHMS[alg]},{NRANKS},{count * ELEMENT_BYTES},{us / 1e6:.9g},{k},,,int32,sum")
    return rows


if __name__ == "__main__":
    raw, out = Path(sys.argv[1]), Path(sys.argv[2])
    lines = convert(raw)
    out.write_text("".join(f"{ln}\n" for ln in lines))
    print(f"{len(lines) - 1} rows -> {out}")
