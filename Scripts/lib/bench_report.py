"""Aggregates Scripts/bench.sh's JSON lines into one JSON document and Markdown tables.

Usage: bench_report.py RAW.jsonl MACHINE.txt OUT.json OUT.md SCALE RUNS URLSESSION_FACTOR
Medians over runs (min-max for req/s); every ratio to raw libcurl is taken within the same
run (client figure / libcurl figure of that run number), then its median is reported.
"""
import json
import statistics
import sys

raw, machine_path, out_json, out_md, scale, runs, us_factor = sys.argv[1:8]
records = [json.loads(line) for line in open(raw) if line.strip()]
machine = [line.rstrip("\n") for line in open(machine_path)]

workloads, clients = [], []
for r in records:
    if r["workload"] not in workloads:
        workloads.append(r["workload"])
    if r["client"] not in clients:
        clients.append(r["client"])

BYTES = {"download-1g-memory", "download-1g-file", "upload-256m-file"}
SLOW = {"slow-10k-open"}


def measured(r):
    return r.get("status") in ("ok", "errors") or (r.get("status") == "n/a" and "seconds" in r)


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(value, digits=0):
    if value is None:
        return "–"
    if digits == 0:
        return f"{value:,.0f}"
    return f"{value:,.{digits}f}"


def headline(workload, r):
    """The figure a workload is judged by: MB/s for bulk, KB/transfer for slow, req/s otherwise."""
    if workload in BYTES:
        return r.get("mb_per_s")
    if workload in SLOW:
        return r.get("kb_per_transfer")
    return r.get("req_per_s")


summary = []
lines = ["# Curlew benchmark results", ""] + [f"- {m}" for m in machine]
lines += [f"- runs: {runs}, scale: {scale} (URLSession request counts x{us_factor})", ""]
for workload in workloads:
    rows = [r for r in records if r["workload"] == workload]
    base = {r["run"]: r for r in rows if r["client"] == "libcurl" and measured(r)}
    lines += [f"## {workload}", ""]
    if workload in BYTES:
        lines += ["| client | MB/s median (min–max) | × libcurl MB/s | seconds | CPU s | × libcurl CPU | peak RSS MB | errors | note |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    elif workload in SLOW:
        lines += ["| client | open transfers | KB per transfer | × libcurl | baseline RSS MB | RSS with all open MB | errors | note |",
                  "|---|---:|---:|---:|---:|---:|---:|---|"]
    else:
        lines += ["| client | req/s median (min–max) | × libcurl req/s | CPU µs/req | × libcurl CPU | CPU s/1000 req | peak RSS MB | errors | note |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for client in clients:
        mine = [r for r in rows if r["client"] == client]
        if not mine:
            continue
        ok = [r for r in mine if measured(r)]
        notes = sorted({r.get("reason") or "" for r in mine if r.get("status") != "ok"} - {""})
        if any("tls_resumed" in r for r in ok):
            resumed = sum(r["tls_resumed"] for r in ok)
            seen = sum(r["tls_requests_seen"] for r in ok)
            notes.insert(0, f"nginx saw {resumed:,} of {seen:,} handshakes resumed")
        note = "; ".join(notes)[:300]
        entry = {"workload": workload, "client": client, "runs": len(mine), "measured_runs": len(ok), "note": note}
        if not ok:
            summary.append(entry)
            lines.append(f"| {client} | n/a |" + " |" * (5 if workload in SLOW else 6) + f" {note} |")
            continue

        def ratio(key, r):
            b = base.get(r["run"])
            if not b or b.get(key) in (None, 0) or r.get(key) is None:
                return None
            return r[key] / b[key]

        rps = [r.get("req_per_s") for r in ok]
        entry.update({
            "req_per_s_median": med(rps), "req_per_s_min": min(rps), "req_per_s_max": max(rps),
            "cpu_us_per_req_median": med([r.get("cpu_us_per_req") for r in ok]),
            "cpu_s_per_1000_req_median": med([r.get("cpu_s_per_1000_req") for r in ok]),
            "peak_rss_kb_median": med([r.get("peak_rss_kb") for r in ok]),
            "mb_per_s_median": med([r.get("mb_per_s") for r in ok]),
            "errors": sum(r.get("errors", 0) for r in ok),
            "ratio_req_per_s_vs_libcurl": med([ratio("req_per_s", r) for r in ok]),
            "ratio_cpu_per_req_vs_libcurl": med([ratio("cpu_us_per_req", r) for r in ok]),
            "ratio_mb_per_s_vs_libcurl": med([ratio("mb_per_s", r) for r in ok]),
        })
        if workload in BYTES:
            mbps = [r.get("mb_per_s") for r in ok]
            entry.update({"mb_per_s_min": min(mbps), "mb_per_s_max": max(mbps),
                          "seconds_median": med([r.get("seconds") for r in ok]),
                          "cpu_s_median": med([r.get("cpu_s") for r in ok])})
            lines.append(
                f"| {client} | {fmt(entry['mb_per_s_median'])} ({fmt(entry['mb_per_s_min'])}–{fmt(entry['mb_per_s_max'])})"
                f" | {fmt(entry['ratio_mb_per_s_vs_libcurl'], 2)} | {fmt(entry['seconds_median'], 2)}"
                f" | {fmt(entry['cpu_s_median'], 2)} | {fmt(entry['ratio_cpu_per_req_vs_libcurl'], 2)}"
                f" | {fmt((entry['peak_rss_kb_median'] or 0) / 1024, 1)} | {entry['errors']} | {note} |")
        elif workload in SLOW:
            entry.update({
                "transfers_receiving_median": med([r.get("transfers_receiving") for r in ok]),
                "kb_per_transfer_median": med([r.get("kb_per_transfer") for r in ok]),
                "baseline_rss_kb_median": med([r.get("baseline_rss_kb") for r in ok]),
                "open_rss_kb_median": med([r.get("open_rss_kb") for r in ok]),
                "ratio_kb_per_transfer_vs_libcurl": med([ratio("kb_per_transfer", r) for r in ok]),
            })
            lines.append(
                f"| {client} | {fmt(entry['transfers_receiving_median'])} | {fmt(entry['kb_per_transfer_median'], 1)}"
                f" | {fmt(entry['ratio_kb_per_transfer_vs_libcurl'], 2)}"
                f" | {fmt((entry['baseline_rss_kb_median'] or 0) / 1024, 1)} | {fmt((entry['open_rss_kb_median'] or 0) / 1024, 1)}"
                f" | {entry['errors']} | {note} |")
        else:
            lines.append(
                f"| {client} | {fmt(entry['req_per_s_median'])} ({fmt(entry['req_per_s_min'])}–{fmt(entry['req_per_s_max'])})"
                f" | {fmt(entry['ratio_req_per_s_vs_libcurl'], 2)} | {fmt(entry['cpu_us_per_req_median'], 1)}"
                f" | {fmt(entry['ratio_cpu_per_req_vs_libcurl'], 2)} | {fmt(entry['cpu_s_per_1000_req_median'], 3)}"
                f" | {fmt((entry['peak_rss_kb_median'] or 0) / 1024, 1)} | {entry['errors']} | {note} |")
        summary.append(entry)
    lines.append("")

json.dump({"machine": machine, "runs": int(runs), "scale": float(scale), "urlsession_factor": float(us_factor),
           "summary": summary, "results": records}, open(out_json, "w"), indent=1)
open(out_md, "w").write("\n".join(lines) + "\n")
