# For every recorded model-429 case: would the rt39 rule (no request the
# model gave work, received whole after the 429's request and before the
# Retry-After less 250 ms after the 429 was written) fail it?
import json, sys, os
from datetime import datetime
def t(s):
    if not s: return None
    s = s.rstrip('Z'); main, _, frac = s.partition('.')
    return datetime.fromisoformat(main).timestamp() + float('0.' + (frac or '0'))
flips, total, passed = [], 0, 0
for d in open('/tmp/rt39/m429dirs.txt').read().split():
    rel = os.path.join(d, 'model_relay.jsonl')
    if not os.path.exists(rel): continue
    calls = [json.loads(l) for l in open(rel) if l.strip()]
    calls = [c for c in calls if c.get('seq', 0) > 0 and not c.get('refused')]
    fc = next((c for c in calls if c.get('fault') == '429'), None)
    if not fc or not fc.get('written_at'): continue
    total += 1
    ev = os.path.join(d.split('/cases/')[0], 'evidence.jsonl')
    name = os.path.basename(d)
    status = None
    if os.path.exists(ev):
        for l in open(ev):
            e = json.loads(l)
            cid = e.get('case_id', '').replace('/', '__')
            if cid == name:
                for c in e.get('checks', []):
                    if c['id'] == 'scenario.model_fault': status = c['status']
    if status == 'passed': passed += 1
    w, r = t(fc['written_at']), t(fc['received_at'])
    for c in calls:
        if c['seq'] == fc['seq']: continue
        side = c.get('status', 0) // 100 == 2 and not c.get('tool_calls')
        if side or t(c.get('received_at')) is None or t(c['received_at']) < r: continue
        dd = t(c['received_at']) - w
        if dd < 0.75:
            flips.append((d, status, c['seq'], round(dd, 3)))
            break
print('cases', total, 'model_fault passed', passed)
for f in flips: print('WOULD FAIL', f)
