"""Run a command and report its wall time and the peaks, over its whole process tree (polled every 0.1 s from
/proc), of the summed RSS, of the summed PSS and of one process's RSS (the largest), and the load average at the
end (1 minute).

RSS counts a page shared by forked processes (copy-on-write, not yet written) once in every process, so the sum
over-estimates; PSS (proportional set size, /proc/PID/smaps_rollup) divides each shared page among the processes
sharing it, so the sum is the memory the tree actually holds.

    python bench/treerss.py aefgate verify RUN --json
"""
import subprocess
import sys
import time


def tree(pid):
    out = [pid]
    try:
        for c in open(f"/proc/{pid}/task/{pid}/children").read().split():
            out += tree(int(c))
    except OSError:
        pass
    return out


def field(path, name):
    try:
        for line in open(path):
            if line.startswith(name):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def main():
    p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak_rss = peak_pss = peak_one = 0
    procs = 0
    t = time.perf_counter()
    while p.poll() is None:
        pids = tree(p.pid)
        rss = [field(f"/proc/{q}/status", "VmRSS:") for q in pids]
        peak_rss = max(peak_rss, sum(rss))
        peak_one = max(peak_one, max(rss, default=0))
        procs = max(procs, sum(1 for r in rss if r))
        peak_pss = max(peak_pss, sum(field(f"/proc/{q}/smaps_rollup", "Pss:") for q in pids))
        time.sleep(0.1)
    print(f"{time.perf_counter() - t:.2f} s, exit {p.returncode}, peak of the process tree: "
          f"RSS (sum) {peak_rss / 1024:.0f} MB, PSS (sum) {peak_pss / 1024:.0f} MB, "
          f"one process's RSS {peak_one / 1024:.0f} MB, at most {procs} processes at once; "
          f"load average {open('/proc/loadavg').read().split()[0]}")


if __name__ == "__main__":
    main()
