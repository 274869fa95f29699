"""How far past its deadline a test lets an operation end before calling it a hang.

A loaded 2-core CI host stalls a thread for seconds: the landing CI of December 2026 saw a 0.05 s
exchange with a local server take 6.8 s while the serving tier's vLLM servers ran beside it. So an
upper bound on wall time is `deadline + SCHEDULING_SLACK_S`, never a tight margin, and what it bounds
is endless or far longer than that (a server silent or trickling until HostileServer's HOLD_S, a
sleep of minutes), so an operation without its deadline still fails the bound by far."""
SCHEDULING_SLACK_S = 30.0
