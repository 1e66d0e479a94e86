# Summarises runs/N-SERVER.json (the harness's results.json of each run):
# python3 analyze.py  (from this folder)
import json, glob, os, statistics as st

rows = {}
for f in sorted(glob.glob('runs/*.json'), key=lambda p: int(os.path.basename(p).split('-')[0])):
    run, srv = os.path.basename(f)[:-5].split('-', 1)
    r = json.load(open(f))
    p = r['scenarios'][0]['points'][0]
    def cpa(x): return x['usage']['gateway_cpu_cores'] / x['throughput_rps'] * 1e6  # µs of CPU per answer
    tg = st.median(cpa(x) for x in p['tollgate_runs'])
    hp = st.median(cpa(x) for x in p['ref_runs']['haproxy'])
    rps = st.median(x['throughput_rps'] for x in p['tollgate_runs'])
    errs = sum(x['errors'] for x in p['tollgate_runs'])
    la, lb = r['machine']['loadavg_start'].split()[0], r['machine']['loadavg_end'].split()[0]
    rows.setdefault(srv, []).append((tg, hp, rps, errs))
    print(f"| {run} | {srv} | {tg:.1f} | {hp:.1f} | {tg/hp:.2f} | {rps:.0f} | {errs} | {la} → {lb} |")
print()
for srv, rs in rows.items():
    print(f"| {srv} | {st.median(r[0] for r in rs):.1f} | {st.median(r[0]/r[1] for r in rs):.2f} | {st.median(r[2] for r in rs):.0f} | {sum(r[3] for r in rs)} |")
