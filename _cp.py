import time, sys
from proofs_checks.registry import registry, select
from proofs_checks.runner import run_claim
from proofs_checks.context import RunContext
from proofs_checks.continuous import continuous_probe
select([])
cid = sys.argv[1]
c = registry.get(cid)
ctx = RunContext(mode=sys.argv[2])
t=time.process_time(); r = run_claim(c, ctx); print("claim", r.status, round(time.process_time()-t,2))
t=time.process_time(); p = continuous_probe(c, r, ctx, only_best=True); print("probe", round(time.process_time()-t,2), {k: p.get(k) for k in ("rejected_at_2eps","epsilon")})
