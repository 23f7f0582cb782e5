"""Sends SIGTERM to a freshly started command after a random 0-40 ms (LO/HI to change), N times,
and counts the runs the signal did not end within 5 s (lost). Exit statuses: -15 killed before
any handler, 143 ended by smart-bff's start-up handler, 0 a graceful stop.
usage (serve's environment set): python3 Benchmarks/spikes/early_sigterm.py 250 .build/debug/smart-bff serve
(From review 50, which found 2 of 250 lost while SIG_IGN stood before Dispatch's handler.)"""
import os, random, signal, subprocess, sys, time
n, cmd = int(sys.argv[1]), sys.argv[2:]
lost, outcomes = 0, {}
def default_signals():
    for s in (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_DFL)
for _ in range(n):
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=default_signals)
    time.sleep(random.uniform(float(os.environ.get("LO", "0")), float(os.environ.get("HI", "0.04"))))
    os.kill(p.pid, signal.SIGTERM)
    try:
        rc = p.wait(timeout=5)
    except subprocess.TimeoutExpired:
        lost += 1
        p.terminate()
        rc = p.wait()
    outcomes[rc] = outcomes.get(rc, 0) + 1
print("outcomes", outcomes, "lost", lost)
