#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# End to end: blockstack --requests 1000 --sample 10.  The number of
# traces stored is Binomial(1000, 1/10): it must lie within 4.5 standard
# deviations of 100 (a false alarm about once in 150 000 runs), and every
# trace that was sampled must be complete, in every process it crossed.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/lib/e2e.bash"
e2e_setup

N=1000
out=$("$BLOCKSTACK" --requests $N --sample 10 --size 8k 2>"$T_TMP/blockstack.err")
rc=$?
diag "$out"
ok "blockstack --requests $N --sample 10 succeeds" test $rc -eq 0
spans=$(bs_spans "$out")
ok "all sampled spans reach the collector" wait_stored 30 "${spans:-1}"
read -r lo hi < <(python3 -c "
import math; n, p = $N, 0.1; m, sd = n * p, math.sqrt(n * p * (1 - p))
print(m - 4.5 * sd, m + 4.5 * sd)")
check_traces --traces-between "$lo" "$hi" --spans "${spans:--1}"
# No half-traces: the decision made at the root is followed downstream.
ok "no process recorded spans of unsampled traces" \
	bash -c "test \"\$(curl -sf '$E2E_URL/api/v2/traces?limit=1000000' | python3 -c 'import json,sys; print(sum(map(len, json.load(sys.stdin))))')\" = '$spans'"
e2e_logs_on_failure
done_testing
