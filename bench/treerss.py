"""Run a command and report its wall time and the peak of the summed RSS of its whole process tree (polled every
0.1 s from /proc; shared copy-on-write pages are counted once per process, so this over-estimates).

    python bench/treerss.py aefgate verify RUN --json
"""
import subprocess, sys, time, os
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
def tree(pid):
    out=[pid]
    try:
        for c in open(f"/proc/{pid}/task/{pid}/children").read().split(): out += tree(int(c))
    except OSError: pass
    return out
peak=0; t=time.perf_counter()
while p.poll() is None:
    tot=0
    for q in tree(p.pid):
        try:
            for l in open(f"/proc/{q}/status"):
                if l.startswith("VmRSS:"): tot += int(l.split()[1])
        except OSError: pass
    peak=max(peak,tot); time.sleep(0.1)
print(f"{time.perf_counter()-t:.2f} s, peak RSS of the process tree (sum) {peak/1024:.0f} MB")
