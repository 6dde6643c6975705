#!/usr/bin/env python3
"""The pieces of bench/simulate_check.sh that are arithmetic.

  simulate_fit.py links FILE          the alpha-beta fit of each collective in a bench/collectives
                                      output (nccl-tests' format): {"all_gather": {"bandwidth": busbw
                                      in B/s, "latency": s per ring step}, ...} as a cluster file's
                                      links.*.collectives wants them
  simulate_fit.py measured METRICS TRACE [METRICS TRACE ...]
                                      a real run's steady steps (from the third), rank 0: the median
                                      step time, and between the starts of consecutive steps' first
                                      forward the median busy time of the compute and optimizer lanes
                                      (each and their union) and the rest, exposed communication;
                                      of several runs, each field's median over them
  simulate_fit.py device MEASURED_JSON SIMULATED_JSON
                                      the flop rate and memory bandwidth that make a simulation at
                                      1e9 of each (SIMULATED_JSON) compute what a run measured
  simulate_fit.py overhead MEASURED_JSON SIMULATED_JSON
                                      the calibration run's host work a step outside everything
                                      simulated: its measured exposed time less the simulation's
  simulate_fit.py compare NAME MEASURED_JSON SIMULATED_JSON
                                      one markdown row: measured and simulated step and exposed time
"""
import json
import statistics
import sys


def links(path):
    """t(N) = a + b N over every size >= 64 KiB (out of place); the ring's steps and bus factor
    give the latency per step (a / steps) and busbw (factor / b)."""
    coll, nranks, rows = None, None, {}
    for line in open(path):
        if line.startswith("# ztrain collectives: nranks"):
            nranks = int(line.split("nranks")[1].split()[0])
        elif line.startswith("# ") and line[2:].strip() in ("all_gather", "reduce_scatter", "all_reduce"):
            coll = line[2:].strip()
        elif coll and line.strip() and not line.startswith("#"):
            f = line.split()
            size, us = int(f[0]), float(f[4])
            if size >= 65536:
                rows.setdefault(coll, []).append((size, us * 1e-6))
    n = nranks
    out = {}
    for coll, pts in rows.items():
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        a = max(0.0, my - b * mx)
        steps, factor = (2 * (n - 1), 2 * (n - 1) / n) if coll == "all_reduce" else (n - 1, (n - 1) / n)
        out[coll] = {"bandwidth": factor / b, "latency": a / steps}
    return out


def intervals_union(spans):
    spans = sorted(spans)
    total, cur = 0.0, None
    for b, e in spans:
        if cur is None or b > cur[1]:
            if cur:
                total += cur[1] - cur[0]
            cur = [b, e]
        else:
            cur[1] = max(cur[1], e)
    if cur:
        total += cur[1] - cur[0]
    return total


def measured_runs(paths):
    """measured() of each (metrics, trace) pair, each field the median over the runs."""
    runs = [measured(m, t) for m, t in zip(paths[::2], paths[1::2])]
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def measured(metrics, trace):
    steps = [json.loads(l) for l in open(metrics) if '"ms"' in l]
    t = json.load(open(trace))
    ev = [e for e in t["traceEvents"] if e.get("ph") == "X" and e["pid"] == 0]
    lane = {a["tid"]: a["args"]["name"].split(" #")[0] for a in t["traceEvents"]
            if a.get("ph") == "M" and a["name"] == "thread_name" and a["pid"] == 0}
    spans = {k: sorted((e["ts"] * 1e-6, (e["ts"] + e["dur"]) * 1e-6) for e in ev if lane.get(e["tid"]) in k)
             for k in (("compute",), ("optimizer",), ("compute", "optimizer"))}
    forwards = [e for e in ev if e["name"].startswith("forward ")]
    first_unit = min(forwards, key=lambda e: e["ts"])["name"]
    starts = sorted(e["ts"] * 1e-6 for e in forwards if e["name"] == first_unit)
    per = {k: [] for k in spans}
    windows = list(zip(starts, starts[1:]))[2:]  # steady steps: from the third
    for b, e in windows:
        for k, sp in spans.items():
            per[k].append(intervals_union([(max(x, b), min(y, e)) for x, y in sp if y > b and x < e]))
    step_s = statistics.median([s["ms"] / 1e3 for s in steps[2:]])
    window_s = statistics.median([e - b for b, e in windows])
    busy = statistics.median(per[("compute", "optimizer")])
    return {"step_s": step_s, "window_s": window_s, "exposed_comm_s": window_s - busy, "compute_s": busy,
            "units_s": statistics.median(per[("compute",)]), "optimizer_s": statistics.median(per[("optimizer",)]),
            "steps": len(windows)}


def device(m_path, s_path):
    """The device rates that make the simulation's compute the measured one: the memory bandwidth
    from the optimizer's time (AdamW over flat buffers), the flop rate from the units' time less
    their memory-bound part. s_path simulated at 1e9 flop/s and 1e9 B/s."""
    m, s = json.load(open(m_path)), json.load(open(s_path))
    c = s["compute_by_class_s"]
    bandwidth = 1e9 * s["flat_work_s"]["adamw"] / m["optimizer_s"]
    memory_ops = (c["memory"] - sum(s["flat_work_s"].values())) * 1e9 / bandwidth
    flops = 1e9 * (c["gemm"] + c["attention"]) / (m["units_s"] - memory_ops)
    return {"flops": flops, "memory_bandwidth": bandwidth}


def overhead(m_path, s_path):
    """The host's work a step outside units, AdamW and collectives: what the measured exposed time
    has beyond the simulated one (as compare() counts both), from the calibration run."""
    m, s = json.load(open(m_path)), json.load(open(s_path))
    return max(0.0, m["exposed_comm_s"] - comparable_exposed(s))


def comparable_exposed(s):
    flat = s["flat_work_s"]
    return s["step_s"] - (s["compute_s"] - sum(flat.values()) + flat.get("adamw", 0))


def compare(name, m_path, s_path):
    """Exposed communication as the real trace can tell it: the step less its units' compute and
    AdamW, so the simulation's other flat work (zeroing, norm, casts, accumulation, the host's step
    overhead: outside the real run's spans) counts with it on both sides."""
    m, s = json.load(open(m_path)), json.load(open(s_path))
    s = dict(s, exposed_comm_s=comparable_exposed(s))
    err = lambda a, b: 100 * (b - a) / a if a else float("nan")
    return (f"| {name} | {m['step_s'] * 1e3:.0f} ms | {s['step_s'] * 1e3:.0f} ms | {err(m['step_s'], s['step_s']):+.1f}% | "
            f"{m['exposed_comm_s'] * 1e3:.0f} ms | {s['exposed_comm_s'] * 1e3:.0f} ms | "
            f"{err(m['exposed_comm_s'], s['exposed_comm_s']):+.1f}% |")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "links":
        print(json.dumps(links(sys.argv[2])))
    elif cmd == "measured":
        print(json.dumps(measured_runs(sys.argv[2:])))
    elif cmd == "device":
        print(json.dumps(device(sys.argv[2], sys.argv[3])))
    elif cmd == "overhead":
        print(overhead(sys.argv[2], sys.argv[3]))
    elif cmd == "compare":
        print(compare(sys.argv[2], sys.argv[3], sys.argv[4]))
    else:
        sys.exit(__doc__)
