"""Running a benchmark's processes and saying why one failed, in a line a table can show."""
import os
import re
import signal
import subprocess
import time


def run_group(cmds, envs, log, timeout_s):
    """Starts the processes (each in its own session), their output into the open file `log`,
    and waits for all; on a failure or after timeout_s kills the rest. Returns 0, the first
    non-zero exit code, or "timeout"."""
    procs = [subprocess.Popen(c, env=e, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
             for c, e in zip(cmds, envs)]
    deadline, codes = time.monotonic() + timeout_s, [None] * len(procs)
    while None in codes:
        for i, p in enumerate(procs):
            codes[i] = p.poll()
        if any(c not in (None, 0) for c in codes) or time.monotonic() > deadline:
            time.sleep(2)  # let the failing rank's message reach the log
            for p in procs:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
            bad = [c for c in codes if c not in (None, 0)]
            return bad[0] if bad else "timeout"
        time.sleep(0.2)
    return 0


def first_error_line(text):
    """The line that says what went wrong: a Python exception's, zerotrain's typed error, else the first
    that names an error."""
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    exceptions = [l for l in lines if re.match(r"^[\w.]+(Error|Exception|Interrupt)\b", l)]
    if exceptions:
        return exceptions[0]
    # zerotrain's own failures: "zerotrain: [kind] what went wrong" (tools/typed_errors.cpp)
    typed = [l for l in lines if re.match(r"^(\[rank \d+\] )?zerotrain: \[", l)]
    errors = typed or [l for l in lines if re.search(r"error|not supported|terminate", l, re.I)]
    return re.sub(r"^\[rank \d+\] ", "", (errors or lines or ["no output"])[0])


def error_of(proc):
    """A finished subprocess.run's failure in one line: the last line naming an error, else its
    output's tail (300 characters at most)."""
    lines = [l for l in (proc.stderr + proc.stdout).splitlines() if "Error" in l or "error" in l]
    return (lines[-1] if lines else (proc.stderr or proc.stdout)[-300:]).strip()[:300]
