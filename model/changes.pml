/*
 * orderd beyond CreateOrder, for the SPIN model checker: the change
 * protocol (CancelOrder, AmendOrder: docs/changes.md), event delivery (the
 * outbox: docs/outbox.md), a reconciler of an older release, a reconciler
 * whose clock leads, and a change request id reused after its ledger row
 * expired. model/README.md ("The change and delivery model") says what is
 * modelled, what is abstracted, how to run it and which configuration
 * finds which defect; scripts/model-check.sh runs every configuration.
 * orderd.pml models CreateOrder's own write protocol; here a create is
 * only its delivery obligation (its order is recorded, its due entry live).
 *
 * It follows: internal/app/workflow/change.go (changeOrder, changeRecorded,
 * duplicateChange, finishChange, recordConflict, settleChange),
 * internal/stores/versions/protocol.go (Check, awaits, decide, refuse, each
 * LWT through lwt.Do in internal/platform/lwt/lwt.go),
 * internal/app/workflow/workflow.go (settleLater, releaseLater, Settle,
 * publish), reconciler/reconciler.go (handle, drop, retryLater,
 * passShard's DropBucket), internal/domain/order/event.go and change.go (event
 * and change ids).
 *
 * ABSTRACTIONS (model/README.md repeats them)
 *  - One order O of tenant 1, created at version 1. Four change intents
 *    on it (and a fifth, on another order): 1 = request r1, an amendment, expected version 1; 2 = request
 *    r2, a cancellation, expected version 1 (so 1 and 2 race for version
 *    2); 3 = request r1 again, another amendment, expected version 2, sent
 *    only after r1's ledger row expired (-DRETAIN=1); 4 = request r3, an
 *    amendment expecting version 2 while the order may still be at 1
 *    (ahead of it), retried (-DAHEAD=1: r3's row may expire; 2: not);
 *    5 = request r1 again, for another order, once r1's row expired
 *    with its event still owed (-DOWED=1).
 *    A cancelled order
 *    refusing later changes is not modelled: intent 3 is sent only when
 *    intent 1 (not the cancel) made version 2.
 *  - Ids: the change id is ChangeID(tenant, operation, request id), so it
 *    names the request: intents 1 and 3 share one. Event ids: a change's
 *    is its change id; an ORDER_CREATED event's is derived from (tenant,
 *    operation, request id) too, so the two tenants' creates below have
 *    two ids; -DBUG_CREATED_EVENT_ID gives both the bare request id.
 *  - Creates (-DCREATES=1): tenants 1 and 2 each created an order with
 *    the same request id. Their write protocol is orderd.pml's; here each
 *    starts recorded, with its due entry live and its handler's
 *    settleLater about to publish; the reconciler's Finish of a recorded
 *    order rewrites rows that are already there, so only its publish and
 *    the entry's removal are modelled.
 *  - The topic is seen as a consumer that deduplicates by event id sees
 *    it: pub[id] is the content of the first record published under id; a
 *    record under an id that already names another content sets clash (the
 *    consumer drops it as a duplicate). At least once is free: a record
 *    may be published and its acknowledgement lost, or published twice.
 *  - orders_by_id stands for the order's rows (listing, event row,
 *    orders_by_id: WriteChange writes the first two, concurrently, before
 *    the last, all with one write timestamp per version): its version cell
 *    and the change that set it, last-write-wins by version (a tie: the
 *    larger value). A failed write of the first two is a failed write here.
 *  - Every statement is one atomic step; LWTs are linearizable per
 *    partition; an LWT whose answer is lost is decided when it is sent
 *    and settled by a LOCAL_SERIAL read (as in orderd.pml). The history
 *    reads that follow a decided version LWT (decide, History) and the
 *    order read are not modelled failing: their failure ends the attempt
 *    as an unsettled version check does.
 *  - Time is not modelled. T1: a claim's due entry falls due only once the
 *    attempt that wrote it has ended (the grace exceeds the handler's
 *    deadline) and, with -DSKEW=1, only while the reconciler's clock is
 *    within the measured skew bound (see the clock below). T2: a duplicate
 *    may take over at any moment. T3 (-DRETAIN=1: r1's row; -DAHEAD=1:
 *    r3's): the row expires at any moment once its request is settled (its
 *    conflict recorded, or its change projected AND its event delivered:
 *    the delivery obligation outlives nothing it needs), provided the
 *    operations running then have ended since; other rows outlive the run.
 *  - The due queue: one entry row per attempt (the claim's) and one per
 *    create; a reschedule (insert the new row, then delete the old) is
 *    the entry staying; shards, buckets, cursors, leases are not modelled.
 *  - Bounds: MAXFAULTS failed or timed-out statements and MAXCRASH crashes
 *    per run; intent 1's client makes TRIES1 attempts, the others one; a
 *    version check found still awaiting after a lost answer is sent again
 *    once, then given up (the code: SettleAttempts); a claim found absent
 *    after a lost answer is sent again once.
 *
 * SWITCHES (spin -D...): NCH (change intents 1..NCH race: 0, 1 or 2),
 * TRIES1, CREATES, RETAIN (r1's row expires; intent 3 reuses r1), AHEAD
 * (intent 4), OWED (r1's row expires with its event owed by its entry;
 * intent 5 reuses r1 for another order), OLDREC (a reconciler of the release before changes runs
 * beside the new one), SKEW (the reconciler's clock leads by more than the
 * bound for a while), RESTORE (a restore leaves the history one change
 * behind the order's row), MAXFAULTS, MAXCRASH. Without a BUG_ switch the
 * model is the fixed protocol, rules F1 to F6 of model/README.md; each BUG_
 * switch drops one: BUG_CREATED_EVENT_ID (F1), BUG_OLD_RECONCILER_AS_CREATE
 * and BUG_UNKNOWN_OP_DEADLETTER (F2), BUG_LEADING_CLOCK and
 * BUG_LEADING_SWEEP (F3), BUG_NO_CHANGE_RECORD (F4), BUG_OBLIGATION_EXPIRES
 * (F5), BUG_REFUSAL_BLIND (F4's refusal not conditional on the record),
 * BUG_NO_FLOOR (F6), BUG_OWED_DROP (F5 with OWED: an owed entry meeting a
 * newer claim of its request id dropped);
 * BUG_VERSION_BY_READ replaces the version LWT
 * by a read and a plain write (promise 5's check can fail).
 */

/* ---- configuration ------------------------------------------------ */
#ifndef NCH
#define NCH 2
#endif
#ifndef TRIES1
#define TRIES1 2
#endif
#ifndef CREATES
#define CREATES 0
#endif
#ifndef RETAIN
#define RETAIN 0
#endif
#ifndef AHEAD
#define AHEAD 0
#endif
#ifndef OWED
#define OWED 0
#endif
/* the request whose ledger row expires in the run (T3): r1 with RETAIN or
   OWED, r3 with AHEAD=1 (AHEAD=2: intent 4 without the expiry) */
#define TTL (RETAIN || AHEAD == 1 || OWED)
#if RETAIN && AHEAD || OWED && (RETAIN || AHEAD)
#error "RETAIN, AHEAD and OWED each need their own row expiry: run them apart"
#endif
#if AHEAD
#define TR 3
#else
#define TR 1
#endif
#ifndef OLDREC
#define OLDREC 0
#endif
#ifndef SKEW
#define SKEW 0
#endif
#ifndef RESTORE
#define RESTORE 0
#endif
#ifndef MAXFAULTS
#define MAXFAULTS 1
#endif
#ifndef MAXCRASH
#define MAXCRASH 1
#endif
#define MAXTOK 4             /* TRIES1 + 1 (intent 2) + 1 (intent 3) <= MAXTOK */

#define NONE 0
#define PENDING 1
#define COMPLETE 2           /* a change's recorded conflict (ledger.Complete) */
#define FAILED 3

/* intent k: its request (r1 or r2, which is also its change id), its
   expected version, the version it makes, its event's content */
#define REQ(k) ((k) == 2 -> 2 : ((k) == 4 -> 3 : ((k) == 0 -> 0 : 1)))
#define EXPV(k) ((k) >= 3 -> 2 : 1)
#define MADE(k) (EXPV(k) + 1)
#define BIT(k) (1 << (k))
/* event ids: 1, 2 the tenants' ORDER_CREATED; 3, 4, 5 the change ids of r1, r2, r3 */
#ifdef BUG_CREATED_EVENT_ID
#define EVCR(tn) 1           /* BUG: the bare request id, the same for both tenants */
#else
#define EVCR(tn) (tn)        /* derived from (tenant, operation, request id) */
#endif
#define EVCH(k) (2 + REQ(k))
/* contents: 1, 2 the tenants' orders as created; 3 to 6 the order as
   intent 1 to 4 left it */
#define CONTENT(k) (2 + (k))

/* process bits (busy, stale): change clients 1, 2, 4, 8 (a parameter) */
#define RBIT 32                      /* the reconciler */
#define OBIT 64                      /* the older reconciler */

/* ---- storage ------------------------------------------------------ */
/* write_requests_by_id of r1, r2, r3: state, claim token, intent (its command) */
byte Lst[4], Ltok[4], Lint[4];
/* order_versions: current_version (1: no partition yet) and the intent
   that made each version (its row: change id, fingerprint) */
byte Vcur = 1;
byte hist[4];
/* orders_by_id (standing for the order's rows): version cell, and the
   intent that set it (0: the creation) */
byte Iver = 1, Iint;
#ifndef BUG_NO_CHANGE_RECORD
/* order_versions.change_outcomes: per change id (request), the intent
   whose outcome is recorded (0: none) and whether it was accepted (else
   refused: STALE_VERSION); in the order's partition, written only by
   LWTs conditional on the change id having no record */
byte rec[4];
bit recAcc[4];
#endif
/* pending_requests: a claim's entry per attempt token; a create's per tenant */
bit ent[MAXTOK + 1];
bit cent[3] = CREATES;   /* (index 0 unused) */
#if OWED
/* the owed_order cell of attempt t's entry: the entry owes its change's
   event, outlives its claim's row, and is redelivered from the order */
bit owed[MAXTOK + 1];
#endif
/* the topic, as a deduplicating consumer sees it */
byte pub[6];
bit clash;                   /* a record under an id that names another event */

/* ---- environment and ghosts -------------------------------------- */
byte nextTok = 1;
byte tokInt[MAXTOK + 1];     /* the intent attempt t is for */
bit live[MAXTOK + 1];        /* attempt t still running (T1) */
bit clive[3] = CREATES;                /* create t's handler still settling (T1) */
byte faults, crashes;
byte busy, stale;            /* T3, as in orderd.pml */
bit elig, expired;           /* TR's row expirable; TR's row expired once */
byte applied;                /* bit k: intent k's change was written into order_versions */
byte accAns, staleAns, reusedAns;   /* bit k: a client of intent k was answered accepted,
                                       a conflict (STALE_VERSION), REQUEST_ID_REUSED */
#if SKEW
bit skew;                    /* the reconciler's clock leads by more than the bound */
bit tomb;                    /* BUG_LEADING_SWEEP: a future-dated bucket tombstone */
#endif

#define CANFAULT (faults < MAXFAULTS)
#define CRASHOPT :: atomic { crashes < MAXCRASH -> crashes++ }; goto crashed
#define DELIVERED(k) (pub[EVCH(k)] == CONTENT(k))
#define CDELIVERED(tn) (pub[EVCR(tn)] == (tn))

/* ---- properties (the monitor checks them in every state) ---------- */
/* (4) an event id names one event: no two orders or changes share one */
#define EVENT_ID_UNIQUE (!clash)
/* (4) a change id (request) names one accepted change */
#define CHANGE_ID_ONCE (!(hist[2] != 0 && hist[3] != 0 && REQ(hist[2]) == REQ(hist[3])))
/* (5) two changes based on one version never both apply */
#define ONE_PER_VERSION ((applied & (BIT(1) | BIT(2))) != (BIT(1) | BIT(2)) \
	&& (accAns & (BIT(1) | BIT(2))) != (BIT(1) | BIT(2)))
/* (5) a change answered with a conflict (stale) or REQUEST_ID_REUSED never applies */
#define STALE_NEVER_APPLIES ((staleAns & applied) == 0 && (reusedAns & applied) == 0)
/* (5) the order's rows show only the change that made their version
   (or, after a restore, one the history lost and has not made again) */
#if RESTORE
#define ROWS_SHOW_HISTORY (Iint == 0 || hist[Iver] == Iint || Vcur < Iver && hist[Iver] == 0)
#else
#define ROWS_SHOW_HISTORY (Iint == 0 || hist[Iver] == Iint)
#endif
/* (3, 4) a PENDING change request whose event is not delivered has its
   claim's due entry; so has a create whose event is not delivered */
#define CH_NOT_STRANDED(r) (!(Lst[r] == PENDING && !DELIVERED(Lint[r])) || ent[Ltok[r]])
#define CR_NOT_STRANDED(tn) (!CREATES || CDELIVERED(tn) || cent[tn])
#define NOT_STRANDED (CH_NOT_STRANDED(1) && CH_NOT_STRANDED(2) && CH_NOT_STRANDED(3) \
	&& CR_NOT_STRANDED(1) && CR_NOT_STRANDED(2))
/* (4) once nothing can move: every accepted change and order is delivered
   under its own id, no request is left PENDING undelivered */
#define ALL_DELIVERED ((!(applied & BIT(1)) || DELIVERED(1)) && (!(applied & BIT(2)) || DELIVERED(2)) \
	&& (!(applied & BIT(3)) || DELIVERED(3)) && (!(applied & BIT(4)) || DELIVERED(4)) \
	&& (!CREATES || CDELIVERED(1) && CDELIVERED(2)))
#define NOTHING_PENDING ((Lst[1] != PENDING || DELIVERED(Lint[1])) && (Lst[2] != PENDING || DELIVERED(Lint[2])) \
	&& (Lst[3] != PENDING || DELIVERED(Lint[3])))

/* ---- T3: TR's row becomes expirable once its request is settled ---- */
#ifdef BUG_OBLIGATION_EXPIRES
#define TRDELIVERED 1        /* BUG: the row (and its entries) expire whether or not the event was delivered */
#elif OWED
/* the code's F5: the row expires with its retention, delivered or not;
   an entry that owes the event (the reconciler's first failed delivery
   marked it) outlives it. The row expires only once the reconciler had
   that chance: an entry no reconciler looked at within the whole
   retention expires with it (documented, not modelled) */
#define TRDELIVERED (DELIVERED(Lint[TR]) || owed[Ltok[TR]])
#else
#define TRDELIVERED DELIVERED(Lint[TR])
#endif
#define ELIGNOW (Lst[TR] == COMPLETE || Lst[TR] == PENDING && (applied & BIT(Lint[TR])) && Iver >= MADE(Lint[TR]) && TRDELIVERED)
inline updElig() {
#if TTL
	if
	:: !elig && ELIGNOW -> elig = 1; stale = busy
	:: elig && !ELIGNOW -> elig = 0
	:: else
	fi
#else
	skip
#endif
}
inline opStart(_me) { busy = busy | _me; stale = stale & ~_me }
inline opEnd(_me) { busy = busy & ~_me }

/* ---- plain writes and deletes: applied; applied with an error; not
   applied (an error); a crash before sending ---------------------------- */
#if SKEW
#define SHADOWED (tomb && skew)      /* BUG_LEADING_SWEEP: under the future-dated tombstone */
#else
#define SHADOWED 0
#endif
inline entAdd(_t, _ok) {
	if
	:: atomic { if :: !SHADOWED -> ent[_t] = 1 :: else fi; _ok = 1 }
	:: atomic { CANFAULT -> faults++; if :: !SHADOWED -> ent[_t] = 1 :: else fi; _ok = 0 }
	:: atomic { CANFAULT -> faults++; _ok = 0 }
	CRASHOPT
	fi
}
inline entDel(_t, _ok) {
	if
	:: atomic { ent[_t] = 0; _ok = 1 }
	:: atomic { CANFAULT -> faults++; _ok = 0 }
	CRASHOPT
	fi
}
inline centDel(_tn, _ok) {
	if
	:: atomic { cent[_tn] = 0; _ok = 1 }
	:: atomic { CANFAULT -> faults++; _ok = 0 }
	CRASHOPT
	fi
}
/* orders_by_id (with the listing and event rows before it): version _v by intent _k */
#define LWW_ID(v, k) if :: (v) > Iver || (v) == Iver && (k) > Iint -> Iver = v; Iint = k :: else fi
inline wById(_v, _k, _ok) {
	if
	:: atomic { LWW_ID(_v, _k); updElig(); _ok = 1 }
	:: atomic { CANFAULT -> faults++; LWW_ID(_v, _k); updElig(); _ok = 0 }
	:: atomic { CANFAULT -> faults++; _ok = 0 }
	CRASHOPT
	fi
}

/* ---- publish (workflow.publish): acknowledged; published with its
   acknowledgement lost (a timeout); not published (the broker down); a
   crash before. _ok: acknowledged --------------------------------------- */
#define PUB(id, c) if :: pub[id] == 0 -> pub[id] = c :: pub[id] != 0 && pub[id] != (c) -> clash = 1 :: else fi
inline publish(_id, _c, _ok) {
	if
	:: atomic { PUB(_id, _c); updElig(); _ok = 1 }
	:: atomic { CANFAULT -> faults++; PUB(_id, _c); updElig(); _ok = 0 }
	:: atomic { CANFAULT -> faults++; _ok = 0 }
	CRASHOPT
	fi
}

/* ---- answers ------------------------------------------------------ */
#define ansAcc(k) accAns = accAns | BIT(k)
#define ansStale(k) staleAns = staleAns | BIT(k)
#define ansReused(k) reusedAns = reusedAns | BIT(k)

/* ---- the version check (versions.Check) ---------------------------- */
#ifdef BUG_NO_CHANGE_RECORD
/* BUG: the version check as before change_outcomes: no record */
#define NOREC(k) 1
#define RECORD_ACC(k) skip
#else
#define NOREC(k) (rec[REQ(k)] == 0)
#define RECORD_ACC(k) rec[REQ(k)] = k; recAcc[REQ(k)] = 1
#endif
/* awaits: the change id has no outcome and the order is at the change's
   expected version (the LWT's condition: IF current_version = E AND
   change_outcomes[id] = null) */
#define VAWAITS(k) (NOREC(k) && Vcur == EXPV(k))
/* the LWT's write: current_version = E+1, the change's row, its accepted
   record */
#define VAPPLY(k) Vcur = MADE(k); hist[MADE(k)] = k; applied = applied | BIT(k); RECORD_ACC(k); updElig()
/* decide: the row of version E+1 names this change (its change id) */
#define VHOLDS(k) (Vcur >= MADE(k) && REQ(hist[MADE(k)]) == REQ(k))

#define F_NONE 0
#define F_ACC 1      /* accepted and projected */
#define F_STALE 2    /* the conflict is recorded: its answer */
#define F_RETRY 3    /* an error: UNAVAILABLE / OUTCOME_UNKNOWN, the request stays PENDING */
#define F_UNKNOWN 4  /* the version LWT's answer was lost */
#define F_CONFLICT 5 /* not accepted: the ledger's receipt is still to be written */
#define F_REFUSE 6   /* decide: a refusal still to be recorded under the change id */
#define F_REUSEDR 7  /* the change id's outcome is another command's: REQUEST_ID_REUSED */

/* decide (versions.decide, fromRecord): the change id's record if it has
   one; else accepted if its version's row names the change; else a
   refusal to record */
#ifdef BUG_NO_CHANGE_RECORD
#define FROMREC(k) F_REFUSE
#define HASREC(k) 0
#else
#define HASREC(k) (rec[REQ(k)] != 0)
#define FROMREC(k) (rec[REQ(k)] != (k) -> F_REUSEDR : (recAcc[REQ(k)] -> F_ACC : F_CONFLICT))
#endif
#define DECIDE(k) (HASREC(k) -> FROMREC(k) : (VHOLDS(k) -> (hist[MADE(k)] == (k) -> F_ACC : F_REUSEDR) : F_REFUSE))

/* finishChange(rec = (intent _k, claim token _ctok)): the version check
   (versions.Check: the LWT, then decide, then refuse), then projections
   (accepted) or the ledger's conflict receipt (refused). _rd counts the
   sends of one LWT. */
/* the version LWT, once (versions.Statements.ApplyOnce) */
inline versionCheck(_k, _res, _ok) {
#ifdef BUG_VERSION_BY_READ
		/* BUG: the version read, then written by a plain write: no LWT */
		atomic { _ok = VAWAITS(_k); if :: !_ok -> _res = DECIDE(_k) :: else fi }
		if
		:: _ok -> if
			:: atomic { VAPPLY(_k); _res = F_ACC }
			CRASHOPT
			fi
		:: else
		fi
#else
		if
		:: atomic { VAWAITS(_k) -> VAPPLY(_k); _res = F_ACC }
		:: atomic { !VAWAITS(_k) -> _res = DECIDE(_k) }   /* not applied: decide on the state it found */
		:: atomic { CANFAULT -> faults++; if :: VAWAITS(_k) -> VAPPLY(_k) :: true fi; _res = F_UNKNOWN }
		CRASHOPT
		fi
#endif
}

#if RESTORE
/* the change the order's row shows and the history lost (Iint, at
   version Vcur+1), made again from its event row and its request's claim
   (Service.rebuildHistory): only if that claim is still in the ledger */
#define REBUILDABLE (Iver == Vcur + 1 && Iint != 0 && Lst[REQ(Iint)] != NONE && Lint[REQ(Iint)] == Iint \
	&& NOREC(Iint) && Vcur == EXPV(Iint))
#endif

inline finishChange(_k, _ctok, _res, _ok, _rd, _sh) {
	_res = F_NONE; _rd = 0;
	do
	:: _res != F_NONE && _res != F_UNKNOWN -> break
	:: _res == F_NONE ->
#if RESTORE && !defined(BUG_NO_FLOOR)
		/* the floor (versions.Check's shown): the order's row as this
		   finisher read it is a floor under the history. A history behind
		   it is rebuilt before anything is decided (else the attempt ends:
		   VERSION_HISTORY_BEHIND); a change the row shows past is decided
		   from the order's state, without the version LWT */
		_sh = Iver;
		if
		:: atomic { Vcur < _sh && REBUILDABLE -> VAPPLY(Iint) }
		:: atomic { Vcur < _sh && !REBUILDABLE -> _res = F_RETRY }
		:: atomic { Vcur >= _sh && _sh >= MADE(_k) -> _res = DECIDE(_k) }
		:: Vcur >= _sh && _sh < MADE(_k) -> versionCheck(_k, _res, _ok)
		fi
#else
		versionCheck(_k, _res, _ok)
#endif
	:: _res == F_UNKNOWN ->
		/* settle: a LOCAL_SERIAL read of the order's version */
		if
		:: atomic { VAWAITS(_k) && _rd == 0 -> _rd = 1; _res = F_NONE }   /* not applied: sent again */
		:: atomic { VAWAITS(_k) && _rd != 0 -> _res = F_RETRY }           /* UNAVAILABLE after the tries */
		:: atomic { !VAWAITS(_k) -> _res = DECIDE(_k) }
		:: atomic { CANFAULT -> faults++; _res = F_RETRY }                /* unsettled: OUTCOME_UNKNOWN */
		fi
	od;
	if
	:: _res == F_REFUSE ->
#ifdef BUG_NO_CHANGE_RECORD
		_res = F_CONFLICT          /* BUG: the refusal lives in the ledger's receipt only */
#else
		/* refuse: record the refusal under the change id, IF
		   change_outcomes[id] = null; not applied: the record there
		   decides (another finisher's outcome, maybe an acceptance) */
		_rd = 0;
		do
		:: _res != F_REFUSE -> break
		:: _res == F_REFUSE ->
			if
#ifdef BUG_REFUSAL_BLIND
			/* BUG: the refusal written whatever is recorded there */
			:: atomic { rec[REQ(_k)] = _k; recAcc[REQ(_k)] = 0; _res = F_CONFLICT }
#else
			:: atomic { !HASREC(_k) -> rec[REQ(_k)] = _k; recAcc[REQ(_k)] = 0; _res = F_CONFLICT }
			:: atomic { HASREC(_k) -> _res = FROMREC(_k) }
#endif
			:: atomic { CANFAULT -> faults++;
				if :: !HASREC(_k) -> rec[REQ(_k)] = _k; recAcc[REQ(_k)] = 0 :: true fi;
				/* unknown: a serial read settles it */
				if
				:: HASREC(_k) -> _res = FROMREC(_k)
				:: !HASREC(_k) && _rd == 0 -> _rd = 1     /* sent again */
				:: !HASREC(_k) && _rd != 0 -> _res = F_RETRY
				fi }
			:: atomic { CANFAULT -> faults++; _res = F_RETRY }   /* unknown and unsettled */
			CRASHOPT
			fi
		od
#endif
	:: else
	fi;
	if
	:: _res == F_ACC ->
		if
		:: _res == F_ACC ->
			/* WriteChange */
			wById(MADE(_k), _k, _ok);
			if
			:: !_ok -> _res = F_RETRY
			:: else
			fi
		:: else
		fi
	:: _res == F_CONFLICT || _res == F_REUSEDR ->
		/* recordConflict: ledger.Complete, IF state = 'PENDING' AND
		   claim_token = ?; not applied (another finisher recorded it, the
		   row expired or was withdrawn) answers the refusal all the same */
		if
		:: atomic { Lst[REQ(_k)] == PENDING && Ltok[REQ(_k)] == _ctok -> Lst[REQ(_k)] = COMPLETE; updElig();
			_res = (_res == F_REUSEDR -> F_REUSEDR : F_STALE) }
		:: atomic { !(Lst[REQ(_k)] == PENDING && Ltok[REQ(_k)] == _ctok) -> _res = (_res == F_REUSEDR -> F_REUSEDR : F_STALE) }
		:: atomic { CANFAULT -> faults++;
			if :: Lst[REQ(_k)] == PENDING && Ltok[REQ(_k)] == _ctok -> Lst[REQ(_k)] = COMPLETE; updElig() :: true fi;
			_res = F_RETRY }
		CRASHOPT
		fi
	:: else
	fi
}

/* the claim LWT: INSERT IF NOT EXISTS (PENDING, token, command) */
#define CLAIM_APPLY(r, t, k) Lst[r] = PENDING; Ltok[r] = t; Lint[r] = k; updElig()

/* changeRecorded, the receipt check (Lookup of the change id): another
   command's outcome → REQUEST_ID_REUSED; a recorded refusal → the
   conflict; an acceptance the order's rows show → replay; else claim */
#define RECID(k) (Iver >= MADE(k) && REQ(hist[MADE(k)]) == REQ(k))
#ifdef BUG_NO_CHANGE_RECORD
/* BUG: as before change_outcomes, only the row of version E+1 */
#define LK_REUSED(k) (RECID(k) && hist[MADE(k)] != (k))
#define LK_STALE(k) 0
#define LK_REPLAY(k) (RECID(k) && hist[MADE(k)] == (k))
#else
#define LK_REUSED(k) (HASREC(k) && rec[REQ(k)] != (k))
#define LK_STALE(k) (HASREC(k) && rec[REQ(k)] == (k) && !recAcc[REQ(k)])
#define LK_REPLAY(k) (HASREC(k) && rec[REQ(k)] == (k) && recAcc[REQ(k)] && Iver >= MADE(k))
#endif

/* ---- a client of change intent k: one handler attempt per try ------ */
proctype changer(byte k; byte tries; byte me) {
	byte t, rq, cst, ctok, cint, res, rd, reclaims, sh;
	bit ok, won;

#if RETAIN
	/* intent 3 is sent long after intent 1 made version 2: once r1's
	   ledger row expired */
end:
	(k != 3 || expired && hist[2] == 1);
#endif
attempt:
	atomic {
		assert(nextTok <= MAXTOK);
		tries--; t = nextTok; nextTok++; tokInt[t] = k; live[t] = 1; opStart(me); rq = REQ(k)
	}
	/* Claim: the due entry (the check runs alongside it; the order of the
	   two does not matter here: T1 keeps the entry from falling due) */
	entAdd(t, ok);
	if
	:: !ok -> goto done          /* the claim is never sent: UNAVAILABLE */
	:: else
	fi;
	/* changeRecorded */
	if
	:: atomic { LK_REUSED(k) -> ansReused(k) }; goto release
	:: atomic { LK_STALE(k) -> ansStale(k) }; goto release      /* the recorded refusal */
	:: atomic { LK_REPLAY(k) -> ansAcc(k) }; goto release       /* replayed */
	:: atomic { !LK_REUSED(k) && !LK_STALE(k) && !LK_REPLAY(k) }
	:: atomic { CANFAULT -> faults++ }; goto release                             /* UNAVAILABLE */
	fi;

	/* the claim */
claim:
	if
	:: atomic { Lst[rq] == NONE -> CLAIM_APPLY(rq, t, k); won = 1; ok = 1 }
	:: atomic { Lst[rq] != NONE -> cst = Lst[rq]; ctok = Ltok[rq]; cint = Lint[rq]; won = 0; ok = 1 }
	:: atomic { CANFAULT -> faults++ }; goto done                                /* unavailable: not applied */
	:: atomic { CANFAULT -> faults++; if :: Lst[rq] == NONE -> CLAIM_APPLY(rq, t, k) :: true fi; ok = 0 }
	CRASHOPT
	fi;
	if
	:: !ok ->
		/* settle: a LOCAL_SERIAL read of the row */
		if
		:: atomic { CANFAULT -> faults++ }; goto done                            /* OUTCOME_UNKNOWN */
		:: atomic { Lst[rq] != NONE -> cst = Lst[rq]; ctok = Ltok[rq]; cint = Lint[rq]; won = (ctok == t) }
		:: atomic { Lst[rq] == NONE && reclaims == 0 -> reclaims++ }; goto claim
		:: atomic { Lst[rq] == NONE && reclaims != 0 }; goto done
		fi
	:: else
	fi;
	if
	:: won -> atomic { ctok = t; cint = k }; goto work
	:: else
	fi;

	/* lost the claim: this attempt's own entry goes */
	entDel(t, ok);
	if
	:: cint != k -> atomic { ansReused(k) }; goto done
	:: cint == k && cst == COMPLETE -> atomic { ansStale(k) }; goto done    /* the recorded conflict */
	:: cint == k && cst == FAILED -> goto done                            /* REQUEST_FAILED */
	:: cint == k && cst == PENDING -> skip
	fi;
	/* duplicateChange: take over (T2) or give up (REQUEST_IN_PROGRESS) */
	if
	:: true
	:: true -> goto done
	fi;

work:
	finishChange(cint, ctok, res, ok, rd, sh);
	/* settleChange */
	if
	:: res == F_ACC ->
		atomic { ansAcc(k) };
		/* settleLater: publish, and only once acknowledged release the
		   claim's entry */
		publish(EVCH(cint), CONTENT(cint), ok);
		if
		:: ok -> entDel(ctok, ok)
		:: else
		fi
	:: res == F_STALE ->
		atomic { ansStale(k) };
		entDel(ctok, ok)         /* releaseLater: no event */
	:: res == F_REUSEDR ->
		atomic { ansReused(k) };
		entDel(ctok, ok)
	:: else                      /* noted; UNAVAILABLE or OUTCOME_UNKNOWN */
	fi;
	goto done;

release:
	entDel(t, ok);               /* the check ended the attempt */
	goto done;
crashed:
	skip;
done:
	atomic {
		live[t] = 0; opEnd(me);
		t = 0; rq = 0; cst = 0; ctok = 0; cint = 0; res = 0; rd = 0; reclaims = 0; ok = 0; won = 0; sh = 0;
		if
		:: tries > 0 -> goto attempt    /* the client retries, at once or later */
		:: else
		fi
	}
}

/* ---- a create's delivery: its handler's settleLater ---------------- */
#if CREATES
proctype creator(byte tn) {
	bit ok;
	publish(EVCR(tn), tn, ok);
	if
	:: ok -> centDel(tn, ok)
	:: else
	fi;
crashed:
	atomic { clive[tn] = 0 }
}
#endif

/* the reconciler's Settle of a create's entry: Finish (the order is
   recorded: its rows rewritten as they are), publish, then RemoveEntry;
   a failed publication keeps the entry (retryLater) */
inline settleCreate(_tn, _ok) {
	publish(EVCR(_tn), _tn, _ok);
	if
	:: _ok -> centDel(_tn, _ok)
	:: else
	fi
}

#if OWED
/* the reschedule after a failed delivery (retryLater) writes the entry's
   owed_order cell: from then on it owes the event and outlives its claim */
inline owe(_t) {
	if
	:: atomic { owed[_t] = 1; updElig() }
	:: atomic { CANFAULT -> faults++ }
	CRASHOPT
	fi
}
#endif

/* ---- the reconciler: handle() one due entry at a time ---------------- */
/* T1 and the clock. FIXED: a reconciler whose clock leads by more than the
   measured bound refuses to reconcile; within the bound, the grace plus
   the bound keeps a claim's entry from falling due while its attempt can
   still send the claim. BUG_LEADING_CLOCK: it reconciles, and a claim's
   entry is due before its claim lands; BUG_LEADING_SWEEP: it reconciles,
   and its final sweep drops whole minutes (DropBucket) handlers still
   write into, under a tombstone dated in its future. */
#if SKEW && (defined(BUG_LEADING_CLOCK) || defined(BUG_LEADING_SWEEP))
#define RECON_OK 1
#else
#if SKEW
#define RECON_OK (!skew)
#else
#define RECON_OK 1
#endif
#endif
#if SKEW && defined(BUG_LEADING_CLOCK)
#define DUE(t) (!live[t] || skew)
#else
#define DUE(t) (!live[t])
#endif
#define SWEEP(tt) if :: live[tt] -> ent[tt] = 0 :: else fi;
#define PICKC(tt) :: atomic { RECON_OK && ent[tt] && DUE(tt) -> et = tt }; break
#define PICKCR(tn) :: atomic { RECON_OK && CREATES && cent[tn] && !clive[tn] -> ec = tn }; break

active proctype reconciler() {
	byte et, ec, rq, cst, ctok, cint, res, rd, sh;
	bit ok;

end:
	do
	PICKC(1) PICKC(2) PICKC(3) PICKC(4)
	PICKCR(1) PICKCR(2)
#if SKEW && defined(BUG_LEADING_SWEEP)
	:: atomic { skew && !tomb ->
		/* the final sweep of a minute the leading clock thinks past:
		   every entry it listed is settled (the normal path above), then
		   DropBucket deletes the minute whole, with the entries attempts
		   still running wrote into it since, under a tombstone dated in
		   the reconciler's future that also hides later writes */
		SWEEP(1) SWEEP(2) SWEEP(3) SWEEP(4) tomb = 1 }
#endif
	od;
	atomic { opStart(RBIT) }
	if
	:: ec != 0 -> settleCreate(ec, ok); goto over
	:: else
	fi;
	/* read(): the ledger row (LOCAL_SERIAL when absent) */
	rq = REQ(tokInt[et]);
	if
	:: atomic { cst = Lst[rq]; ctok = Ltok[rq]; cint = Lint[rq] }
	:: atomic { CANFAULT -> faults++ }; goto over      /* kept for the next pass */
	fi;
#if OWED
	/* an entry that owes its change's event, whose claim is gone or is not
	   this entry's (a newer claim of the request id, in whatever state):
	   the event is delivered from the order (reconciler.redeliver).
	   BUG_OWED_DROP (the code before it): only once the row is gone; a
	   newer claim's row settles the entry like a losing attempt's: dropped */
#ifdef BUG_OWED_DROP
	if :: owed[et] && cst == NONE -> goto redeliver :: else fi;
#else
	if :: owed[et] && (cst == NONE || ctok != et) -> goto redeliver :: else fi;
#endif
#endif
	if
	:: cst != PENDING || ctok != et -> entDel(et, ok); goto over   /* gone, settled, or a losing attempt's: drop */
	:: else
	fi;
	/* Settle: finishChange, then publish */
	finishChange(cint, ctok, res, ok, rd, sh);
	if
	:: res == F_ACC ->
		publish(EVCH(cint), CONTENT(cint), ok);
		if
		:: ok -> entDel(et, ok)          /* RemoveEntry */
#if OWED
		:: else -> owe(et)               /* retryLater: rescheduled, kept, owing the event */
#else
		:: else                          /* retryLater: rescheduled, kept */
#endif
		fi
	:: res == F_STALE || res == F_REUSEDR -> entDel(et, ok)   /* a recorded refusal: nothing to deliver */
	:: else                              /* retryLater */
	fi;
#if OWED
	goto over;
redeliver:
	/* the event of the change the entry's claim made, rebuilt from the
	   order's rows and history (same id, same content); RemoveEntry once
	   acknowledged, else kept */
	publish(EVCH(tokInt[et]), CONTENT(tokInt[et]), ok);
	if
	:: ok -> entDel(et, ok)
	:: else
	fi;
#endif
crashed:
	skip;                                /* restarted: the entry is read again */
over:
	atomic { opEnd(RBIT); et = 0; ec = 0; rq = 0; cst = 0; ctok = 0; cint = 0; res = 0; rd = 0; ok = 0; sh = 0; goto end }
}

/* ---- a reconciler of the release before changes, beside the new one
   (a rolling upgrade). It knows creates only. FIXED: an entry of an
   operation it does not know is kept and nothing is done to its request
   (that step changes no state, so it is not modelled as one: the old
   reconciler only settles create entries). BUG_OLD_RECONCILER_AS_CREATE:
   it finishes a change claim as a create: reads the order at its
   EntityID, decodes the change command as a create command (it succeeds,
   empty), finds "another command", withdraws the claim (Withdraw removes
   the claim's entry). BUG_UNKNOWN_OP_DEADLETTER: Settle's default branch,
   an unknown operation is unfinishable: MarkFailed, then RemoveEntry. */
#if OLDREC
#if defined(BUG_OLD_RECONCILER_AS_CREATE) || defined(BUG_UNKNOWN_OP_DEADLETTER)
#define OPICKC(tt) :: atomic { ent[tt] && !live[tt] -> et = tt }; break
#else
#define OPICKC(tt)
#endif
#define OPICKCR(tn) :: atomic { CREATES && cent[tn] && !clive[tn] -> ec = tn }; break

active proctype oldrec() {
	byte et, ec, rq, cst, ctok;
	bit ok;

end:
	do
	OPICKC(1) OPICKC(2) OPICKC(3) OPICKC(4)
	OPICKCR(1) OPICKCR(2)
	od;
	atomic { opStart(OBIT) }
	if
	:: ec != 0 -> settleCreate(ec, ok); goto over
	:: else
	fi;
	rq = REQ(tokInt[et]);
	if
	:: atomic { cst = Lst[rq]; ctok = Ltok[rq] }
	:: atomic { CANFAULT -> faults++ }; goto over
	fi;
	if
	:: cst != PENDING || ctok != et -> entDel(et, ok); goto over
	:: else
	fi;
#ifdef BUG_OLD_RECONCILER_AS_CREATE
	/* Withdraw: DELETE IF state = 'PENDING' AND claim_token = ?, then the
	   claim's entry */
	if
	:: atomic { Lst[rq] == PENDING && Ltok[rq] == ctok -> Lst[rq] = NONE; Ltok[rq] = 0; Lint[rq] = 0; updElig() }
	:: atomic { !(Lst[rq] == PENDING && Ltok[rq] == ctok) }
	CRASHOPT
	fi;
	entDel(ctok, ok);
#endif
#ifdef BUG_UNKNOWN_OP_DEADLETTER
	/* deadLetter: MarkFailed IF state = 'PENDING' AND claim_token = ?,
	   then RemoveEntry */
	if
	:: atomic { Lst[rq] == PENDING && Ltok[rq] == ctok -> Lst[rq] = FAILED; updElig() }
	:: atomic { !(Lst[rq] == PENDING && Ltok[rq] == ctok) }
	CRASHOPT
	fi;
	entDel(et, ok);
#endif
crashed:
	skip;
over:
	atomic { opEnd(OBIT); et = 0; ec = 0; rq = 0; cst = 0; ctok = 0; ok = 0; goto end }
}
#endif

/* ---- the reconciler's clock: it leads the claimants' by more than the
   bound for a while, then is corrected (or the instance replaced) ------ */
#if SKEW
active proctype clock() {
	skew = 1;
	atomic { skew = 0; tomb = 0 }   /* the tombstone's date has passed */
}
#endif

/* ---- TR's ledger row's TTL (T3) ------------------------------------ */
#if TTL
#if OWED
#define EXPIRE_ENT(tt) if :: REQ(tokInt[tt]) == TR && (tt) <= Ltok[TR] && !owed[tt] -> ent[tt] = 0 :: else fi;
#else
#define EXPIRE_ENT(tt) if :: REQ(tokInt[tt]) == TR && (tt) <= Ltok[TR] -> ent[tt] = 0 :: else fi;
#endif
active proctype ttl() {
end:
	do
	:: atomic { Lst[TR] != NONE && elig && (stale & busy) == 0 ->
		/* the entries of its claim and of the attempts before it expire
		   with it (their TTL is the retention, from no later than the
		   claim); a later attempt's entry outlives it */
		EXPIRE_ENT(1) EXPIRE_ENT(2) EXPIRE_ENT(3) EXPIRE_ENT(4)
		Lst[TR] = NONE; Ltok[TR] = 0; Lint[TR] = 0; expired = 1;
		updElig() }
	od
}
#endif

#if RESTORE
/* ---- a restore from snapshots taken moments apart ------------------ */
/* With orderd stopped (nothing running: busy == 0), the history loses the
   change that made the version the order's row shows, and that change's
   record; the row, the ledger and the topic stay (docs/changes.md, "A
   history behind its order"). Once. */
bit restored;
active proctype restore() {
	atomic { busy == 0 && !restored && Vcur == 2 && Iver == 2 && hist[2] != 0 ->
		rec[REQ(hist[2])] = 0; recAcc[REQ(hist[2])] = 0; hist[2] = 0; Vcur = 1; restored = 1 }
}
#endif

#if OWED
/* ---- intent 5: request r1 reused for another order O2, once r1's
   ledger row expired. changeOrder on O2: the receipt check finds nothing
   in O2's partition; r1 is claimed afresh; finishChange's bindRequest
   finds r1 bound to O and records REQUEST_ID_REUSED (ledger.Complete);
   the attempt releases its entry. Its steps do not fail here (a change
   attempt's failures are the changer's): what matters is the row it
   leaves beside intent 1's owed entry, a newer claim of r1, PENDING and
   then COMPLETE ------------------------------------------------------- */
#define UBIT 16
proctype reuser() {
	byte t;
end:
	atomic { expired && Lst[1] == NONE ->
		t = nextTok; nextTok++; tokInt[t] = 5; live[t] = 1; opStart(UBIT); ent[t] = 1 }
	atomic { Lst[1] == NONE -> CLAIM_APPLY(1, t, 5) }
	atomic { Lst[1] == PENDING && Ltok[1] == t -> Lst[1] = COMPLETE; updElig() }
	atomic { ent[t] = 0; live[t] = 0; opEnd(UBIT) }
}
#endif

/* ---- the invariants, in every state ------------------------------- */
active proctype monitor() {
end:
	atomic {
		!(EVENT_ID_UNIQUE && CHANGE_ID_ONCE && ONE_PER_VERSION && STALE_NEVER_APPLIES && ROWS_SHOW_HISTORY && NOT_STRANDED) ->
		assert(EVENT_ID_UNIQUE);
		assert(CHANGE_ID_ONCE);
		assert(ONE_PER_VERSION);
		assert(STALE_NEVER_APPLIES);
		assert(ROWS_SHOW_HISTORY);
		assert(NOT_STRANDED)
	}
}

/* ---- when nothing can move any more ------------------------------- */
active proctype quiescent() {
	timeout -> assert(ALL_DELIVERED); assert(NOTHING_PENDING)
}

init {
	atomic {
#if CREATES
		cent[1] = 1; cent[2] = 1; clive[1] = 1; clive[2] = 1;
		run creator(1); run creator(2);
#endif
		if :: NCH >= 1 -> run changer(1, TRIES1, 1) :: else fi;
		if :: NCH >= 2 -> run changer(2, 1, 2) :: else fi;
#if RETAIN
		run changer(3, 1, 4);
#endif
#if AHEAD
		/* intent 4: a client that retries (at once, or after r3's row
		   expired) */
		run changer(4, 2, 8);
#endif
#if OWED
		run reuser();
#endif
		skip
	}
}
