#!/usr/bin/env python3
"""Runs one third-party program (or compat client) twice, on bare cusim and
under libcuslice, and compares each test's verdict between the two runs and
with the expectations file.

    run-compat.py --name NAME --build BUILD --expect FILE [options] -- CMD [ARG...]

CMD prints one line per test, `RESULT <test id> <verdict>`, verdict one of
ok, fail, error, skip, xfail, xpass, crash (the compat clients, the numba
wrapper and the scripts here all do). Each run gets a private simulator
instance (CUSIM_SHM_DIR in a temporary directory, also COMPAT_TMPDIR for the
program's own scratch files, removed after the run; CUSIM_GPUS=--gpus) and
cusim's libcuda.so.1 / libnvidia-ml.so.1 first on LD_LIBRARY_PATH. The
libcuslice run adds LD_PRELOAD=BUILD/src/preload/libcuslice.so with a group
of its own, the limit --limit, and no daemon.

The expectations file has one line per test:

    <test id> <verdict> [<libcuslice verdict>]   # why, when not ok

The first verdict is what bare cusim gives; the second, when present, what
libcuslice gives instead: a known libcuslice defect, marked until it is
fixed. The program fails (exit status 1) when a test's bare verdict is not
the expected one, when the two runs differ where no difference is expected,
when an expected difference is gone (update the file), or when a test is
missing from either side. A program that exits with status 77 and no
verdict is not installed: the test is skipped (77). --print writes an expectations file from the
verdicts instead of comparing (a starting point: reasons are to be added).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

VERDICTS = {"ok", "fail", "error", "skip", "xfail", "xpass", "crash"}
RESULT = re.compile(r"^RESULT (\S+) (\S+)\s*$")


def parse_expect(path):
    """{test id: (bare verdict, cuslice verdict or None)}; exits on a malformed line."""
    out = {}
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            text = line.split("#", 1)[0].split()
            if not text:
                continue
            if len(text) not in (2, 3) or any(v not in VERDICTS for v in text[1:]):
                sys.exit(f"{path}:{lineno}: expected '<test id> <verdict> [<verdict>]'")
            out[text[0]] = (text[1], text[2] if len(text) == 3 else None)
    return out


def run(mode, args, cmd, logdir):
    """Runs cmd in `mode` ('cusim' or 'cuslice'); returns ({id: verdict}, exit status)."""
    tmp = tempfile.mkdtemp(prefix=f"compat-{args.name}-{mode}-")
    build = os.path.abspath(args.build)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CUSLICE_", "CUSIM_")) and k != "LD_PRELOAD"}
    libs = [os.path.join(build, "src/sim"), os.path.join(build, "src/sim/nvml")] + args.libpath
    if env.get("LD_LIBRARY_PATH"):
        libs.append(env["LD_LIBRARY_PATH"])
    env.update({
        "LD_LIBRARY_PATH": ":".join(libs),
        "CUSIM_SHM_DIR": tmp,
        "CUSIM_INSTANCE": f"compat-{args.name}",
        "CUSIM_GPUS": args.gpus,
        "COMPAT_TMPDIR": tmp,
    })
    for kv in args.env:
        k, _, v = kv.partition("=")
        env[k] = v
    if mode == "cuslice":
        env.update({
            "LD_PRELOAD": os.path.join(build, "src/preload/libcuslice.so"),
            "CUSLICE_GROUP": f"compat-{args.name}",
            "CUSLICE_MEM_LIMIT": args.limit,
            "CUSLICE_DAEMON": "off",
            "CUSLICE_SHM_DIR": tmp,
        })
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, errors="replace", timeout=args.timeout)
        out, err, status = p.stdout, p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = "timed out\n"
        status = -1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    with open(os.path.join(logdir, f"compat-{args.name}-{mode}.log"), "w") as f:
        f.write(f"$ {' '.join(cmd)}\n--- stdout\n{out}--- stderr\n{err}--- exit status {status}\n")
    verdicts = {}
    for line in out.splitlines():
        m = RESULT.match(line)
        if m:
            verdicts[m.group(1)] = m.group(2) if m.group(2) in VERDICTS else "error"
    return verdicts, status


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--name", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--expect", required=True)
    ap.add_argument("--gpus", default="H100:8GiB,H100:8GiB")
    ap.add_argument("--limit", default="4GiB", help="CUSLICE_MEM_LIMIT of the libcuslice run")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE for both runs")
    ap.add_argument("--libpath", action="append", default=[], help="more LD_LIBRARY_PATH")
    ap.add_argument("--logdir", default=None)
    ap.add_argument("--print", action="store_true", help="print an expectations file")
    ap.add_argument("cmd", nargs="+")
    args = ap.parse_args()
    logdir = args.logdir or os.path.join(args.build, "meson-logs")
    os.makedirs(logdir, exist_ok=True)

    bare, bare_status = run("cusim", args, args.cmd, logdir)
    if bare_status == 77 and not bare:
        print(f"{args.name}: skipped (the program is not installed; see the log)")
        return 77
    sliced, sliced_status = run("cuslice", args, args.cmd, logdir)
    if args.print:
        for tid in sorted(set(bare) | set(sliced)):
            b, s = bare.get(tid, "crash"), sliced.get(tid, "crash")
            print(f"{tid} {b}" + (f" {s}" if s != b else ""))
        return 0

    expect = parse_expect(args.expect)
    problems = []
    if not bare:
        problems.append(f"the cusim run printed no verdict (exit status {bare_status})")
    if not sliced:
        problems.append(f"the libcuslice run printed no verdict (exit status {sliced_status})")
    counts = {}
    for tid in sorted(set(bare) | set(sliced) | set(expect)):
        b, s = bare.get(tid, "missing"), sliced.get(tid, "missing")
        want_b, want_s = expect.get(tid, (None, None))
        counts[b] = counts.get(b, 0) + 1
        if want_b is None:
            problems.append(f"{tid}: not in {args.expect} (cusim {b}, libcuslice {s})")
            continue
        if b != want_b:
            problems.append(f"{tid}: cusim gives {b}, expected {want_b}")
        if want_s is None and s != b:
            problems.append(f"{tid}: libcuslice gives {s}, cusim {b}: a difference")
        elif want_s is not None and s != want_s:
            problems.append(f"{tid}: libcuslice gives {s}, expected {want_s} (known difference"
                            f"{' gone: update ' + args.expect if s == b else ' changed'})")
    known = sum(1 for v in expect.values() if v[1] is not None)
    print(f"{args.name}: {len(bare)} tests on cusim ({', '.join(f'{n} {v}' for v, n in sorted(counts.items()))}); "
          f"{len(sliced)} under libcuslice; {known} known libcuslice difference(s)")
    for p in problems:
        print(f"  PROBLEM {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
