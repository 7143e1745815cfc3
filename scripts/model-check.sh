#!/usr/bin/env bash
# Model-checks orderd's protocols with SPIN (model/orderd.pml: CreateOrder's
# writes; model/changes.pml: changes, event delivery, mixed versions, clocks;
# model/leases.pml: the reconciler's shard leases; see model/README.md): every "pass" configuration must verify with no error; every
# "bug" configuration (a defect fixed earlier in the code, put back),
# "finding" configuration (an open defect of the current code, or the
# documented window) and "assume" configuration (a timing assumption
# dropped) must yield a counterexample. Exits non-zero otherwise. One line
# per run.
#
#   scripts/model-check.sh            all runs, MODEL_CHECK_JOBS (default 2) at once
#   scripts/model-check.sh NAME...    only those runs (e.g. pass/dup bug/a)
#
# Each run's pan output and trail are kept under bin/model-check/<run>/;
# replay a counterexample with the command printed for it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

for tool in spin gcc; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "model-check: error: $tool not found (Debian/Ubuntu: apt-get install -y spin gcc)" >&2
    exit 1
  fi
done

MODELS=model
OUT=bin/model-check
JOBS=${MODEL_CHECK_JOBS:-2}
# Safety properties only (assertions, end states), no bitstate: an
# exhaustive search. -O0: at these sizes compiling pan with -O2 costs more
# than it saves. COLLAPSE: the biggest run needs ~0.5 GB instead of ~1 GB.
CFLAGS="-O0 -DSAFETY -DCOLLAPSE -DVECTORSZ=256"

# name | expect (pass|fail) | spin -D flags | what it checks | model (default orderd.pml)
RUNS=(
  "pass/dup|pass||two clients, one command (A, A); handler 1 retries, late retries included"
  "pass/reuse|pass|-DP2=B|two clients, two commands (A, B) on one request id"
  "pass/unreadable|pass|-DMAXBAD=1 -DMAXPOLL=0|a stored command finishers cannot read: dead letter, REQUEST_FAILED"
  "pass/faults2|pass|-DMAXFAULTS=2 -DTRIES1=1|two failed or timed-out statements"
  "pass/crashes2|pass|-DMAXCRASH=2 -DTRIES1=1|two crashes"
  "pass/requeue|pass|-DMAXBAD=1 -DREQUEUE=2 -DTRIES1=1|operator requeue: an entry before the LWT and one after it, in another row (finding 1, fixed)"
  "bug/a|fail|-DBUG_DEADLETTER_VISIBLE|dead letter after N failed attempts: a visible order after REQUEST_FAILED"
  "bug/b|fail|-DBUG_LATE_RETRY_REWRITE|no read of orders_by_id before writing: a late retry rewrites an acknowledged order"
  "bug/c1|fail|-DBUG_CLAIM_BEFORE_ENTRY|the claim before its due entry: a request stranded PENDING"
  "bug/c2|fail|-DBUG_RELEASE_EARLY|the due entry released before the order is recorded: stranded PENDING"
  "bug/requeue-race|fail|-DMAXBAD=1 -DREQUEUE=1 -DTRIES1=1 -DMAXFAULTS=0 -DMAXCRASH=0|finding 1 put back: Requeue without its second entry; racing the reconciler's drop of a FAILED request's entry strands it PENDING"
  "assume/one-decoder|fail|-DMAXBAD=1 -DDOUBT_UNREADABLE_PROJECTED -DMAXFAULTS=0|A5 (finding 2): a claimant that could write a command its finishers cannot read (two versions decoding differently) makes a dead letter contradict its rows"
  "finding/expire-unfinished|fail|-DEXPIRE_UNFINISHED|DOCUMENTED window: a PENDING request unfinished for its whole retention"
  "assume/due-after-deadline|fail|-DDUE_ANYTIME -DMAXFAULTS=0|the reconciler's grace (DueAfter) must exceed the handler's deadline: without it a claim is stranded"
  "pass/changes|pass||two changes on one order based on one version; change 1's client retries (takeover)|changes.pml"
  "pass/changes-faults2|pass|-DMAXFAULTS=2 -DTRIES1=1|two changes, two failed or timed-out statements|changes.pml"
  "pass/changes-crashes2|pass|-DMAXCRASH=2 -DTRIES1=1|two changes, two crashes|changes.pml"
  "pass/events|pass|-DCREATES=1 -DNCH=1 -DTRIES1=1|two tenants' creates with one request id, and a change: every event delivered under its own id|changes.pml"
  "pass/mixed-versions|pass|-DCREATES=1 -DOLDREC=1 -DNCH=1|a reconciler of the release before changes beside the new one: it keeps what it does not know|changes.pml"
  "pass/skew|pass|-DSKEW=1|the reconciler's clock leads past the bound for a while: it refuses to reconcile meanwhile|changes.pml"
  "pass/retention|pass|-DRETAIN=1|a change request id's ledger row expires and the id is sent again with another change: its change_outcomes record refuses it|changes.pml"
  "pass/ahead|pass|-DAHEAD=1 -DNCH=1 -DTRIES1=1|a change whose expected version is ahead of the order, retried (also after its row expired): its refusal recorded under its change id holds|changes.pml"
  "bug/created-event-id|fail|-DCREATES=1 -DNCH=0 -DBUG_CREATED_EVENT_ID|ORDER_CREATED's event id is the bare request id: two tenants' orders under one id|changes.pml"
  "bug/old-reconciler|fail|-DOLDREC=1 -DNCH=1 -DBUG_OLD_RECONCILER_AS_CREATE|an older reconciler finishes a change claim as a create: withdraws it, its event never published|changes.pml"
  "bug/unknown-op-deadletter|fail|-DOLDREC=1 -DNCH=1 -DBUG_UNKNOWN_OP_DEADLETTER|a reconciler dead-letters an operation it does not know: the change's event never published|changes.pml"
  "bug/leading-clock|fail|-DSKEW=1 -DBUG_LEADING_CLOCK|a reconciler whose clock leads past the grace drops a claim's entry before the claim lands: stranded|changes.pml"
  "bug/leading-sweep|fail|-DSKEW=1 -DBUG_LEADING_SWEEP|a reconciler whose clock leads sweeps (DropBucket) minutes handlers still write into: stranded|changes.pml"
  "bug/change-id-reuse|fail|-DRETAIN=1 -DBUG_NO_CHANGE_RECORD|no change_outcomes: a change request id reused after its ledger row expired is accepted again under the same change id|changes.pml"
  "bug/obligation-expires|fail|-DRETAIN=1 -DBUG_OBLIGATION_EXPIRES|an undelivered event's obligation (the due entry) expires with the ledger row|changes.pml"
  "pass/owed|pass|-DOWED=1 -DNCH=1 -DMAXFAULTS=2|an undelivered change's ledger row expires (its entry owes the event) and the request id is reused for another order: the owed event is delivered from the order|changes.pml"
  "bug/owed-drop|fail|-DOWED=1 -DNCH=1 -DTRIES1=1 -DMAXFAULTS=2 -DMAXCRASH=0 -DBUG_OWED_DROP|an owed entry meeting a newer claim of its request id is dropped as a losing attempt's: the event is never delivered|changes.pml"
  "bug/stale-ahead|fail|-DAHEAD=1 -DNCH=1 -DTRIES1=1 -DBUG_NO_CHANGE_RECORD|no change_outcomes: a STALE_VERSION for a change ahead of the order, redelivered after retention, applies|changes.pml"
  "bug/stale-ahead-race|fail|-DAHEAD=2 -DNCH=1 -DTRIES1=1 -DBUG_NO_CHANGE_RECORD|... and without retention: a finisher that read the claim PENDING applies it after another recorded STALE_VERSION|changes.pml"
  "bug/refusal-blind|fail|-DAHEAD=2 -DNCH=1 -DTRIES1=1 -DBUG_REFUSAL_BLIND|a refusal recorded whatever change_outcomes holds: it overwrites another finisher's acceptance|changes.pml"
  "pass/restore|pass|-DRESTORE=1|a restore leaves the history one change behind the order's row: the next finisher rebuilds it before deciding|changes.pml"
  "bug/restore-no-floor|fail|-DRESTORE=1 -DBUG_NO_FLOOR|the version check not floored by the order's row: after a restore a stale change makes the lost change's version again|changes.pml"
  "bug/version-by-read|fail|-DBUG_VERSION_BY_READ|the version checked by a read and written plainly: two changes based on one version both apply|changes.pml"
  "pass/leases|pass||a shard lease held by its holder's clock against Cassandra's whole-second TTLs, replicas' clocks within 250 ms: never two holders|leases.pml"
  "bug/lease-no-slack|fail|-DBUG_NO_SLACK|a hold counted until sent + TTL: another instance acquires while the old holder still works the shard|leases.pml"
  "assume/lease-clocks|fail|-DSKEW=2|replicas' clocks 500 ms from true time, past what the slack covers: two holders|leases.pml"
)

# Which property an assertion text is.
property() {
  case "$1" in
    *"Cust&(Cust-1)"*) echo "ONE_ORDER" ;;
    *"first==0"*) echo "FIRST_PAYLOAD" ;;
    *"(Ipay==ackPay)"*) echo "ACK_HOLDS" ;;
    *"!(failedAns)"*) echo "FAILED_HOLDS" ;;
    *"reused&"*) echo "REUSED_HOLDS" ;;
    *"ent[Ltok]!=0"*) echo "NOT_STRANDED" ;;
    *"!(wrongOrder)"*) echo "ANSWER_IS_OWN_COMMAND" ;;
    *"!(disagree)"*) echo "ANSWERS_AGREE" ;;
    *"(Lst!=1)||(Ipay!=0)"*) echo "QUIESCENT_NOTHING_PENDING" ;;
    *"!(clash)"*) echo "EVENT_ID_UNIQUE" ;;
    *"(hist[2]!=0)&&(hist[3]!=0)"*) echo "CHANGE_ID_ONCE" ;;
    *"(accAns&"*) echo "ONE_PER_VERSION" ;;
    *"(staleAns&applied)"*) echo "STALE_NEVER_APPLIES" ;;
    *"(Iint==0)||"*) echo "ROWS_SHOW_HISTORY" ;;
    *"ent[Ltok[1]]"*) echo "NOT_STRANDED" ;;
    *"(applied&(1<<1)))||(pub["*) echo "QUIESCENT_ALL_DELIVERED" ;;
    *"(Lst[1]!=1)||"*) echo "QUIESCENT_NOTHING_PENDING" ;;
    *"(now<deadline[1])"*) echo "MUTEX" ;;
    *) echo "$1" ;;
  esac
}

run_one() { # name expect flags model
  local name=$1 expect=$2 flags=$3 model=$4 dir="$OUT/$1" t0 t1 secs rc=0
  rm -rf "$dir" && mkdir -p "$dir"
  cp "$MODELS/$model" "$dir/$model"
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  (
    cd "$dir"
    spin -a $flags "$model" >spin.txt 2>&1 &&
      gcc $CFLAGS -o pan pan.c >gcc.txt 2>&1 &&
      ./pan -m1000000 -w24 >pan.txt 2>&1
  ) || rc=$?
  t1=$(date +%s.%N)
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  local errors states what ok
  errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$dir/pan.txt" 2>/dev/null | head -1) || true
  states=$(awk '/states, stored/ { print $1; exit }' "$dir/pan.txt" 2>/dev/null) || true
  if [[ $rc -ne 0 && -z "$errors" ]]; then
    what="did not run (see $dir/spin.txt, gcc.txt, pan.txt)"
    ok=no
  elif [[ "$errors" == 0 ]] && grep -q "Search not completed\|max search depth too small\|out of memory" "$dir/pan.txt"; then
    what="search incomplete (depth or memory bound hit)"
    ok=no
  elif [[ "$errors" == 0 ]]; then
    what="no errors"
    [[ $expect == pass ]] && ok=yes || ok=no
  else
    local text
    text=$(sed -n 's/^pan:1: \(.*\) (at depth [0-9]*)$/\1/p' "$dir/pan.txt" | head -1)
    case "$text" in
      "assertion violated "*) what="counterexample: $(property "${text#assertion violated }")" ;;
      *) what="counterexample: ${text:-see $dir/pan.txt}" ;;
    esac
    [[ $expect == fail ]] && ok=yes || ok=no
  fi
  local verdict
  if [[ $ok == yes ]]; then verdict=ok; else verdict=FAIL; fi
  printf '%-4s %-30s expect %-4s %10s states %6ss  %s\n' "$verdict" "$name" "$expect" "${states:-?}" "$secs" "$what" >"$dir/summary"
  if [[ "$what" == counterexample:* ]]; then
    echo "     replay: (cd $dir && spin -t -p -g $flags $model)" >>"$dir/summary"
  fi
  [[ $ok == yes ]]
}

selected=()
if (($#)); then
  for want in "$@"; do
    found=
    for r in "${RUNS[@]}"; do [[ ${r%%|*} == "$want" ]] && selected+=("$r") && found=1; done
    [[ -n $found ]] || { echo "model-check: no run named $want" >&2; exit 2; }
  done
else
  selected=("${RUNS[@]}")
fi

mkdir -p "$OUT"
echo "model-check: spin $(spin -V | sed -n 's/Spin Version \([^ ]*\).*/\1/p'), ${#selected[@]} runs, $JOBS at a time ($MODELS)"
start=$(date +%s)
pids=()
for r in "${selected[@]}"; do
  IFS='|' read -r name expect flags _ model <<<"$r"
  while (($(jobs -rp | wc -l) >= JOBS)); do wait -n || true; done
  run_one "$name" "$expect" "$flags" "${model:-orderd.pml}" &
  pids+=($!)
done
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=$((failed + 1)); done

for r in "${selected[@]}"; do
  IFS='|' read -r name _ _ desc <<<"$r"
  cat "$OUT/$name/summary"
done
echo "model-check: $((${#selected[@]} - failed)) of ${#selected[@]} as expected in $(($(date +%s) - start))s"
if ((failed)); then
  echo "model-check: error: $failed run(s) not as expected: a pass run found a counterexample (or did not finish), or a bug/finding run was not caught" >&2
  exit 1
fi
