#!/usr/bin/env python3
"""The unit's system call filter against what cusliced really calls.

    check-syscalls.py UNIT CUSLICED CUSLICE LIBCUSLICE CS_ALLOC

Runs the daemon (built without sanitizers) under strace through a working
session: start (sockets given a group: chown), NVML on cusim, a process
under libcuslice registering and listed, the API and the metrics read, a
process bypassing libcuslice killed (on_bypass = kill), SIGTERM. Every
system call it made must pass the unit's SystemCallFilter= lines, expanded
by `systemd-analyze syscall-filter`: a filter that refused one would break
the daemon in production (EPERM) where no test runs it under systemd.
Skipped (77) without strace or systemd-analyze. Environment: LD_LIBRARY_PATH
with cusim (as the tests get it).
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

SKIP = 77


def filter_set(unit):
    """The system calls the unit's SystemCallFilter= lines allow."""
    text = subprocess.run(["systemd-analyze", "syscall-filter"], capture_output=True,
                          text=True, check=True).stdout
    groups, cur = {}, None
    for line in text.splitlines():
        if line.startswith("@"):
            cur = line.split()[0]
            groups[cur] = []
        elif cur and line.strip() and not line.strip().startswith("#"):
            groups[cur].append(line.strip())

    def expand(items):
        out = set()
        for x in items:
            out |= expand(groups[x]) if x.startswith("@") else {x}
        return out

    allowed = None
    for line in open(unit, encoding="utf-8"):
        if not line.startswith("SystemCallFilter="):
            continue
        value = line.split("=", 1)[1].strip()
        deny = value.startswith("~")
        names = expand(value.lstrip("~").split())
        if deny:
            allowed = (allowed or set()) - names
        else:
            allowed = (allowed or set()) | names
    if allowed is None:
        sys.exit("%s has no SystemCallFilter=" % unit)
    return allowed


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_for(what, pred, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return
        time.sleep(0.1)
    sys.exit("timed out waiting for " + what)


def main():
    unit, cusliced, cli, lib, alloc = sys.argv[1:6]
    for tool in ("strace", "systemd-analyze"):
        if not shutil.which(tool):
            print("no %s: skipped" % tool)
            return SKIP
    allowed = filter_set(unit)
    tmp = tempfile.mkdtemp()
    os.chmod(tmp, 0o755)
    env = dict(os.environ, CUSIM_SHM_DIR=tmp, CUSLICE_SHM_DIR=tmp,
               CUSLICE_SOCKET=tmp + "/s", CUSLICE_ADMIN_SOCKET=tmp + "/admin/s",
               ASAN_OPTIONS="detect_leaks=0")
    trace = tmp + "/trace"
    port = free_port()
    daemon = subprocess.Popen(
        ["strace", "-f", "-qq", "-o", trace, cusliced, "--socket", tmp + "/s",
         "--admin-socket", tmp + "/admin/s", "--state-dir", tmp + "/state",
         "--metrics-listen", "127.0.0.1:%d" % port, "--socket-group", "65534",
         "--on-bypass", "kill", "--backstop-interval", "200ms"],
        env=env, stdout=open(tmp + "/log", "w"), stderr=subprocess.STDOUT)
    try:
        def status():
            r = subprocess.run([cli, "-o", "json", "status"], env=env, capture_output=True,
                               text=True)
            return json.loads(r.stdout) if r.returncode == 0 else None

        wait_for("cusliced", lambda: status() is not None)
        st = status()
        if not st["nvml"]["up"]:
            sys.exit("NVML (cusim) did not come up: %s" % st["nvml"])
        member = subprocess.Popen([alloc, "--bytes", "1MiB", "--hold-until-signal"],
                                  env=dict(env, LD_PRELOAD=lib, CUSLICE_GROUP="sc"),
                                  stdout=subprocess.DEVNULL)
        wait_for("the member's registration", lambda: b'"sc"' in subprocess.run(
            [cli, "-o", "json", "ps"], env=env, capture_output=True).stdout)
        urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10).read()
        bypasser = subprocess.Popen([alloc, "--bytes", "1MiB", "--hold-until-signal"],
                                    env=env, stdout=subprocess.DEVNULL)
        if bypasser.wait(timeout=30) != -signal.SIGKILL:
            sys.exit("the bypasser was not killed: %s" % bypasser.returncode)
        member.send_signal(signal.SIGTERM)
        member.wait(timeout=30)
        os.kill(st["pid"], signal.SIGTERM)
        daemon.wait(timeout=30)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    used = set()
    for line in open(trace, encoding="utf-8", errors="replace"):
        parts = line.split(None, 1)
        if len(parts) == 2 and "(" in parts[1] and parts[1][0].isalpha():
            used.add(parts[1].split("(", 1)[0])
    refused = sorted(s for s in used if s not in allowed)
    print("cusliced made %d distinct system calls: %s" % (len(used), " ".join(sorted(used))))
    shutil.rmtree(tmp, ignore_errors=True)
    if refused:
        print("FAIL: the unit's SystemCallFilter refuses: " + " ".join(refused))
        return 1
    print("ok: every one passes the unit's SystemCallFilter")
    return 0


if __name__ == "__main__":
    sys.exit(main())
