/*
 * orderd's CreateOrder write protocol, for the SPIN model checker
 * (docs/architecture.md: "The path of one CreateOrder", "A request's
 * states", "Why one LWT is enough"). model/README.md says what is
 * modelled, what is abstracted, how to run it and what it found;
 * scripts/model-check.sh runs every configuration.
 *
 * It follows: internal/app/workflow/workflow.go (createOrder, answer,
 * recorded, duplicate, Finish, project, withdraw), ledger/store.go
 * (Claim, claim, settle, run, Withdraw, MarkFailed, Requeue), whose every
 * LWT is settled by the one loop in internal/platform/lwt/lwt.go (Do:
 * send; on an unknown outcome a serial read decides; resend, bounded,
 * only while the row awaits the write),
 * ledger/queue.go (entries, Reschedule), reconciler/reconciler.go
 * (handle, read, retryLater, deadLetter, removeIfNotClaims).
 *
 * ABSTRACTIONS (each is noted again where it is used)
 *  - One tenant and one request id: one ledger row, one order id, one
 *    event id. Two payloads, A and B: commands with different customers,
 *    so different orders_by_customer_time partitions.
 *  - A claim token and the claim's created_at are one number: the attempt
 *    that drew them (1..MAXTOK, in the order attempts start; createOrder
 *    draws both before H1). Real clocks are skewed; the order of created_at
 *    matters only when two different claims both write an order, which the
 *    correct protocol never does.
 *  - Every statement is one atomic step. LWTs are linearizable per
 *    partition. An LWT whose answer is lost is decided (applied or not)
 *    when it is sent and its caller learns nothing: the LOCAL_SERIAL read
 *    that settles it finishes or invalidates a round in flight, and every
 *    reader that acts on a row's absence reads at LOCAL_SERIAL (a
 *    LOCAL_QUORUM read that returns a row returns a committed one), so
 *    Peek and Get read the same row here. A plain write that fails may
 *    have applied or not; one that lands late lands with its own write
 *    timestamp and bytes, which is what another finisher writing the same
 *    bytes later looks like.
 *  - Plain tables are last-write-wins by write timestamp = the order's
 *    created_at (on a tie the larger value wins, as Cassandra compares
 *    cells). orders_by_customer_time is keyed here by (payload,
 *    created_at), standing for (customer, month, created_at, order id): one
 *    row per distinct order, as in Cassandra since migration 0005 (before
 *    it, orders_by_customer had no created_at in its key, and two
 *    created_at in one month overwrote one row instead; orders_by_id's
 *    check catches either alike).
 *  - Time is not modelled. The timing the design relies on becomes rules:
 *      T1 a claim's due entry falls due only once the attempt that wrote
 *         it has ended (DueAfter 30 s exceeds the handler's deadline, 15 s:
 *         the claim is sent, or never will be, before a reconciler looks;
 *         -DDUE_ANYTIME drops the rule); rescheduled and requeued entries
 *         are due at once;
 *      T2 a duplicate may take over a PENDING claim at any moment
 *         (TakeoverAfter 1 s: the claimant may still be running);
 *      T3 the ledger row expires (TTL = retention, 7 days) at any moment
 *         once it is FAILED or its order is recorded, provided every
 *         operation running at that moment has ended since (the retention
 *         outlasts finishing a request plus any one operation: the
 *         RequestsStuck alert pages long before). A PENDING row whose order
 *         is not recorded never expires: the documented "one window left"
 *         of docs/architecture.md, run as -DEXPIRE_UNFINISHED.
 *    A claim's due entries expire with its row.
 *  - The due queue is a set of entry rows (token, slot): the claim's (C),
 *    two rescheduled ones (R1, R2: a reschedule inserts the other one,
 *    then deletes the old one), the requeue's (Q). Shards, buckets, cursors
 *    and leases are not modelled: the reconciler may pick any due entry at
 *    any time; one instance (leases keep a second off a shard).
 *  - attempts/last_error only feed logs and metrics in the correct
 *    protocol; they are modelled only for -DBUG_DEADLETTER_VISIBLE, which
 *    decides on them. The replay cache (H0) is not modelled: it is filled
 *    only from a confirmed order and answers exactly what H1 would.
 *  - A crash may happen before every write (a crash before a read is the
 *    same as one after the write before it: no other process can tell).
 *    After the last write an answer follows; a crash there only withholds
 *    the answer, which promises nothing.
 *  - Bounded: MAXFAULTS failed or timed-out statements and MAXCRASH crashes
 *    in a whole run; handler 1 makes TRIES1 attempts (its client retries,
 *    maybe long after: a late retry), handler 2 TRIES2; a waiting
 *    duplicate polls at most MAXPOLL times; a claim that settles as "not
 *    applied" is sent again once (the code: up to SettleAttempts); an
 *    update that settles as still awaiting is given up (the code resends
 *    it, then gives up).
 *  - An unreadable stored command (the only thing ever dead-lettered):
 *    assumption A5, its claimant never projects it (it stops after the
 *    claim). The code's handler projects from the command it holds in
 *    memory; -DDOUBT_UNREADABLE_PROJECTED models that. The operator's fix
 *    deployment restarts every instance: no operation of the old binary
 *    outlives it.
 *
 * SWITCHES (spin -D...): P2=A|B, MAXFAULTS, MAXCRASH, MAXPOLL, TRIES1,
 * TRIES2, MAXBAD (unreadable claims), REQUEUE=0|1|2 (no operator, Requeue
 * as coded, the proposed fix); EXPIRE_UNFINISHED, DUE_ANYTIME (drop T3's
 * or T1's assumption), DOUBT_UNREADABLE_PROJECTED (drop A5); defects fixed
 * earlier in the code, put back: BUG_DEADLETTER_VISIBLE,
 * BUG_LATE_RETRY_REWRITE, BUG_CLAIM_BEFORE_ENTRY, BUG_RELEASE_EARLY.
 */

/* ---- configuration ------------------------------------------------ */
#ifndef P2
#define P2 A                 /* handler 2's payload: A (a duplicate) or B (a reuse) */
#endif
#ifndef MAXFAULTS
#define MAXFAULTS 1
#endif
#ifndef MAXCRASH
#define MAXCRASH 1
#endif
#ifndef MAXPOLL
#define MAXPOLL 1
#endif
#ifndef TRIES1
#define TRIES1 2
#endif
#ifndef TRIES2
#define TRIES2 1
#endif
#ifndef MAXBAD
#define MAXBAD 0             /* claims (by handler 1) whose stored command is unreadable */
#endif
#ifndef REQUEUE
#define REQUEUE 0            /* the operator: 0 none, 1 ledger.Requeue as coded, 2 the proposed fix */
#endif
#ifndef OPRUNS
#define OPRUNS (MAXFAULTS + MAXCRASH + 1)   /* an operator whose requeue fails or crashes runs it again */
#endif
#define MAXATT 1             /* BUG_DEADLETTER_VISIBLE: dead letter after this many failed attempts */
#define MAXTOK 4             /* TRIES1 + TRIES2 <= MAXTOK */

#define NONE 0
#define A 1
#define B 2
#define PENDING 1
#define FAILED 2

#define SC 1                 /* the claim's entry */
#define SR1 2                /* rescheduled entries */
#define SR2 4
#define SQ 8                 /* the requeue's entry (written before its LWT) */
#define SQ2 16               /* REQUEUE=2: the entry written after the LWT, in another row */

#define HBIT(me) (1 << ((me) - 1))   /* handlers 1, 2: bits 1, 2 */
#define RBIT 4                       /* the reconciler */
#define OBIT 8                       /* the operator */

/* ---- storage ------------------------------------------------------ */
/* write_requests_by_id: state, claim token (= created_at), payload,
   stored command readable, attempts */
byte Lst, Ltok, Lpay, Latt;
bit Lok;
/* orders_by_id and order_events_by_order: one row each */
byte Ipay, Its, Epay, Ets;
/* orders_by_customer_time: bit (payload-1)*MAXTOK + (created_at-1) */
byte Cust;
/* pending_requests: ent[token] = its set of entry rows (slots) */
byte ent[MAXTOK + 1];

/* ---- environment and ghosts -------------------------------------- */
byte nextTok = 1;            /* the next attempt's token and created_at */
byte faults, crashes, bads;
bit live[MAXTOK + 1];        /* attempt t is still running (T1) */
byte busy;                   /* processes running an operation */
byte stale;                  /* ... of them, those running when the row became expirable (T3) */
bit elig;                    /* the row is expirable (T3) */
bit fixed;                   /* the operator deployed a decoder for unreadable commands
                                (an operation started before runs the old binary) */
byte first;                  /* payload of the first claim applied since the id was last forgotten */
byte ackPay, ackTs;          /* the order clients were told they have */
byte reused;                 /* bit p: a client with payload p was told REQUEST_ID_REUSED */
bit failedAns;               /* a client was told REQUEST_FAILED */
bit wrongOrder;              /* a client was answered with an order of another command */
bit disagree;                /* two answers gave different orders */

#define CANFAULT (faults < MAXFAULTS)
#define BITP(p) (1 << (p))
#define CB(p, ts) (1 << (((p) - 1) * MAXTOK + (ts) - 1))
#define CMASK(p) (15 << (((p) - 1) * MAXTOK))
#define VIS(p) (Ipay == (p) || Epay == (p) || (Cust & CMASK(p)) != 0)
#define NOTHING_VISIBLE (Ipay == NONE && Epay == NONE && Cust == 0)

/* ---- properties: the monitor process below checks them in every
   state reached between atomic steps ------------------------------- */
/* (1) at most one order per intent: every visible row is the same order */
#define ONE_ORDER ((Cust & (Cust - 1)) == 0 \
	&& (Ipay == NONE || Cust == 0 || Cust == CB(Ipay, Its)) \
	&& (Epay == NONE || Cust == 0 || Cust == CB(Epay, Ets)) \
	&& (Ipay == NONE || Epay == NONE || (Ipay == Epay && Its == Ets)))
/* (1) ... carrying the first accepted payload */
#define FIRST_PAYLOAD (first == NONE || NOTHING_VISIBLE \
	|| ((Ipay == NONE || Ipay == first) && (Epay == NONE || Epay == first) \
	    && (Cust & ~CMASK(first)) == 0))
/* (2) an acknowledged order stays recorded as acknowledged (payload and
   created_at) */
#define ACK_HOLDS (ackPay == NONE || (Ipay == ackPay && Its == ackTs))
/* (2) REQUEST_FAILED: no order row is visible (until an operator requeues
   the request, or its retention ends and the id is forgotten) */
#define FAILED_HOLDS (!failedAns || NOTHING_VISIBLE)
/* (2) REQUEST_ID_REUSED: the rejected payload's order never appears */
#define REUSED_HOLDS ((!(reused & BITP(A)) || !VIS(A)) && (!(reused & BITP(B)) || !VIS(B)))
/* (2) every order answered is the client's command, and all agree */
#define ANSWERS_AGREE (!wrongOrder && !disagree)
/* (3) a PENDING request whose order is not recorded has a due entry,
   except while an operator's requeue (which reports success only once
   it is) is running */
#define NOT_STRANDED (!(Lst == PENDING && Ipay == NONE) || ent[Ltok] != 0 || (busy & OBIT) != 0)

/* T3: the row becomes expirable when it is FAILED or its order recorded;
   the operations running then must end before it can expire. */
#ifdef EXPIRE_UNFINISHED
#define ELIGNOW (Lst != NONE)
#else
#define ELIGNOW (Lst == FAILED || (Lst == PENDING && Ipay != NONE))
#endif
inline updElig() {
	if
	:: !elig && ELIGNOW -> elig = 1; stale = busy
	:: elig && !ELIGNOW -> elig = 0
	:: else
	fi
}

/* an operation starts / ends (_me: the process's bit) */
inline opStart(_me) { busy = busy | _me; stale = stale & ~_me }
inline opEnd(_me) { busy = busy & ~_me }

/* the crash option of every write: the process stops before it */
#define CRASHOPT :: atomic { crashes < MAXCRASH -> crashes++ }; goto crashed

/* H1, the handler's read of the recorded outcome (orders_by_id);
   BUG (b) has none: fp = NONE, as if nothing were recorded */
#ifdef BUG_LATE_RETRY_REWRITE
#define READ_RECORDED atomic { fp = NONE; ok = 1 }
#else
#define READ_RECORDED readById(fp, ft, ok)
#endif

/* ---- plain writes: applied and confirmed; applied but the client got
   an error (timeout); not applied (unavailable, or timed out before any
   replica had it); or a crash before sending it ---------------------- */
#define LWW_ID(p, ts) if :: (Ipay == NONE || (ts) > Its || ((ts) == Its && (p) > Ipay)) -> Ipay = p; Its = ts :: else fi
#define LWW_EV(p, ts) if :: (Epay == NONE || (ts) > Ets || ((ts) == Ets && (p) > Epay)) -> Epay = p; Ets = ts :: else fi

inline wById(_p, _ts, _ok) {
	if
	:: atomic { LWW_ID(_p, _ts); updElig(); _ok = 1 }
	:: atomic { CANFAULT -> faults++; LWW_ID(_p, _ts); updElig(); _ok = 0 }
	:: atomic { CANFAULT -> faults++; _ok = 0 }
	CRASHOPT
	fi
}
inline wEvent(_p, _ts, _ok) {
	if
	:: atomic { LWW_EV(_p, _ts); _ok = 1 }
	:: atomic { CANFAULT -> faults++; LWW_EV(_p, _ts); _ok = 0 }
	:: atomic { CANFAULT -> faults++; _ok = 0 }
	CRASHOPT
	fi
}
inline wCust(_p, _ts, _ok) {
	if
	:: atomic { Cust = Cust | CB(_p, _ts); _ok = 1 }
	:: atomic { CANFAULT -> faults++; Cust = Cust | CB(_p, _ts); _ok = 0 }
	:: atomic { CANFAULT -> faults++; _ok = 0 }
	CRASHOPT
	fi
}
/* a due-queue entry row (token _t, slot _s): insert / delete */
inline entAdd(_t, _s, _ok) {
	if
	:: atomic { ent[_t] = ent[_t] | _s; _ok = 1 }
	:: atomic { CANFAULT -> faults++; ent[_t] = ent[_t] | _s; _ok = 0 }
	:: atomic { CANFAULT -> faults++; _ok = 0 }
	CRASHOPT
	fi
}
inline entDel(_t, _s, _ok) {
	if
	:: atomic { ent[_t] = ent[_t] & ~_s; _ok = 1 }
	:: atomic { CANFAULT -> faults++; ent[_t] = ent[_t] & ~_s; _ok = 0 }
	:: atomic { CANFAULT -> faults++; _ok = 0 }
	CRASHOPT
	fi
}

/* ---- reads (_ok = 0: the read failed) ------------------------------ */
/* orders_by_id at LOCAL_QUORUM */
inline readById(_rp, _rt, _ok) {
	if
	:: atomic { _rp = Ipay; _rt = Its; _ok = 1 }
	:: atomic { CANFAULT -> faults++; _ok = 0 }
	fi
}
/* the ledger row: Get (LOCAL_SERIAL) or Peek (LOCAL_QUORUM), see above */
inline readLedger(_cst, _ctok, _cpay, _cok, _ok) {
	if
	:: atomic { _cst = Lst; _ctok = Ltok; _cpay = Lpay; _cok = Lok; _ok = 1 }
	:: atomic { CANFAULT -> faults++; _ok = 0 }
	fi
}

/* ---- answers to clients ------------------------------------------- */
/* the order (_p, _ts) to a client whose command is _pay */
inline ansOrder(_pay, _p, _ts) {
	atomic {
		if :: _p != _pay -> wrongOrder = 1 :: else fi;                                     /* not this client's command */
		if :: ackPay != NONE && (ackPay != _p || ackTs != _ts) -> disagree = 1 :: else fi; /* contradicts an earlier answer */
		ackPay = _p; ackTs = _ts
	}
}
/* REQUEST_ID_REUSED: the id is bound to another command, by its order
   (for ever) or by its claim (while the ledger row lives: an id without an
   order is forgotten when its row expires); an answer sent once the id was
   already forgotten promises nothing */
inline ansReused(_pay) {
	atomic { if :: !(Lst == NONE && NOTHING_VISIBLE) -> reused = reused | BITP(_pay) :: else fi }
}
/* REQUEST_FAILED, read from claim _tok's FAILED row: the promise lasts
   while that row is FAILED (an operator's requeue or the retention ends
   it); an answer sent after either promises nothing */
inline ansFailed(_tok) {
	atomic { if :: Lst == FAILED && Ltok == _tok -> failedAns = 1 :: else fi }
}

/* ---- Finish and project (workflow.Finish, workflow.project) ------- */
#define F_OK 0        /* the order (fp, ft) is recorded */
#define F_CONFLICT 1  /* the claim was withdrawn: REQUEST_ID_REUSED */
#define F_UNFIN 2     /* the stored command is unreadable, nothing written (ErrUnfinishable) */
#define F_RETRY 3     /* Unavailable / OutcomeUnknown: may have written; stays PENDING */
#define F_ERR 4       /* another error (withdraw found the row in another state) */
#define F_PROJECT 5   /* Finish goes on to project (fp, ft): the caller runs project() */

/* project: orders_by_customer_time and order_events_by_order (concurrent:
   either order; a sibling cancelled by the other's failure is a write not
   applied, or a crash), then orders_by_id (the recorded outcome), then
   release the claim's entry, best effort. _res = F_OK or F_RETRY. */
inline project(_p, _ts, _tok, _res, _ok, _ok2) {
#ifdef BUG_RELEASE_EARLY
	/* BUG (c2): the claim's entry released before the order is recorded */
	entDel(_tok, SC, _ok);
#endif
	if
	:: wCust(_p, _ts, _ok); wEvent(_p, _ts, _ok2)
	:: wEvent(_p, _ts, _ok2); wCust(_p, _ts, _ok)
	fi;
	if
	:: _ok && _ok2 ->
		wById(_p, _ts, _ok);
		if
		:: _ok ->
#ifndef BUG_RELEASE_EARLY
			entDel(_tok, SC, _ok);   /* H6: its error is only logged */
#endif
			_res = F_OK
		:: else -> _res = F_RETRY
		fi
	:: else -> _res = F_RETRY
	fi
}

/* the withdraw LWT: DELETE IF state = 'PENDING' AND claim_token = _ctok */
#define WITHDRAW_APPLY Lst = NONE; Ltok = 0; Lpay = 0; Lok = 0; Latt = 0; updElig()

/* isOwnOrder: the order row (_fp, _ft) is the one the claim makes. A
   readable command is compared by payload; an unreadable one by claim time
   (every row of an order is dated by the claim that made it). */
#define OWNORDER ((_cok || _fx) && _fp == _cpay || !(_cok || _fx) && _ft == _ctok)

/* Finish(rec = (_ctok, _cpay, _cok)) up to project(): _res = F_PROJECT.
   It reads the order row before it decodes the command, so a request whose
   order is recorded is never dead-lettered (model/README.md finding 2).
   The order to write is (_fp, _ft); the caller then runs project()
   (one copy of it per process keeps the verifier small) */
inline finish(_ctok, _cpay, _cok, _fx, _fp, _ft, _res, _ok, _rst, _rtok, _rpay, _rok) {
#ifdef BUG_LATE_RETRY_REWRITE
	/* BUG (b): no read before the write: the order from the ledger row */
	_fp = NONE; _ok = 1;
#else
	readById(_fp, _ft, _ok);                     /* the order row first */
#endif
	if
	:: !_ok -> _res = F_RETRY
	:: _ok && _fp == NONE && !(_cok || _fx) -> _res = F_UNFIN   /* DecodeCommand failed, nothing recorded */
	:: _ok && _fp == NONE && (_cok || _fx) ->   /* not recorded: the order from the ledger row */
		_fp = _cpay; _ft = _ctok; _res = F_PROJECT
	:: _ok && _fp != NONE && OWNORDER ->        /* recorded: rewrite it exactly as it is */
		_res = F_PROJECT
	:: _ok && _fp != NONE && !OWNORDER ->
		/* another command's order: withdraw the claim */
		if
		:: atomic { Lst == PENDING && Ltok == _ctok -> WITHDRAW_APPLY; _res = F_CONFLICT }
		:: atomic { !(Lst == PENDING && Ltok == _ctok) -> _res = F_ERR }   /* not applied */
		:: atomic { CANFAULT -> faults++;                                   /* unknown */
			if :: Lst == PENDING && Ltok == _ctok -> WITHDRAW_APPLY :: true fi;
			_res = F_RETRY }
		CRASHOPT
		fi;
		if
		:: _res != F_CONFLICT ->
			/* not applied: the row read back; unknown: settled by a read */
			readLedger(_rst, _rtok, _rpay, _rok, _ok);
			if
			:: _ok && _rst == NONE -> _res = F_CONFLICT   /* gone: ErrNotFound, taken as withdrawn */
			:: _ok && _rst != NONE -> _res = F_ERR        /* another state (or still ours: given up) */
			:: else -> _res = F_RETRY                     /* unsettled */
			fi
		:: else
		fi;
		if
		:: _res == F_CONFLICT -> entDel(_ctok, SC, _ok)   /* Withdraw removes the claim's entry */
		:: else
		fi
	fi
}

/* the claim LWT: INSERT IF NOT EXISTS (PENDING, token, payload, created_at) */
#define CLAIM_APPLY Lst = PENDING; Ltok = t; Lpay = pay; Lok = !bad; Latt = 0; \
	if :: first == NONE -> first = pay :: else fi; updElig()

/* ---- a client: a handler attempt per try, one command (pay) ---------- */
proctype handler(byte me; byte pay; byte tries) {
	byte t;                          /* this attempt's token = created_at */
	byte cst, ctok, cpay; bit cok;   /* the ledger row as read (cur) */
	byte rst, rtok, rpay; bit rok;
	byte fp, ft, res, polls, reclaims;
	bit ok, ok2, won, bad, fx;

attempt:
	atomic {
		tries--;
		t = nextTok; nextTok++; live[t] = 1; opStart(HBIT(me));
		fx = fixed;   /* the binary this attempt runs: can it read what the operator fixed? */
		/* A5: does this attempt store a command finishers cannot read? */
		if
		:: me == 1 && bads < MAXBAD && !fixed -> bads++; bad = 1
		:: true
		fi
	}

	/* H1 and H2 at once (Claim's check alongside its entry write): the
	   recorded outcome, orders_by_id, and the due entry, in either order.
	   (BUG (b) has no H1: every attempt, a late retry too, goes to the
	   claim. BUG (c1) writes the entry only after the claim.) */
#ifdef BUG_CLAIM_BEFORE_ENTRY
	READ_RECORDED; ok2 = 1;
#else
	if
	:: entAdd(t, SC, ok2); READ_RECORDED
	:: READ_RECORDED; entAdd(t, SC, ok2)
	fi;
#endif
	if
	:: !ok -> goto release                                      /* UNAVAILABLE */
	:: ok && fp == pay -> ansOrder(pay, fp, ft); goto release   /* replayed */
	:: ok && fp != NONE && fp != pay -> ansReused(pay); goto release
	:: !ok2 -> goto done         /* the entry failed: the claim is never sent, UNAVAILABLE */
	:: else
	fi;

	/* H3: the claim */
claim:
	if
	:: atomic { Lst == NONE -> CLAIM_APPLY; won = 1; ok = 1 }
	:: atomic { Lst != NONE -> cst = Lst; ctok = Ltok; cpay = Lpay; cok = Lok; won = 0; ok = 1 }
	:: atomic { CANFAULT -> faults++ }; goto done            /* unavailable: not applied, known */
	:: atomic { CANFAULT -> faults++;                        /* timed out: applied or not */
		if :: Lst == NONE -> CLAIM_APPLY :: true fi;
		ok = 0 }
	CRASHOPT
	fi;
	if
	:: !ok ->
		/* settle: a LOCAL_SERIAL read of the row */
		readLedger(cst, ctok, cpay, cok, ok);
		if
		:: !ok -> goto done                                   /* OUTCOME_UNKNOWN */
		:: ok && cst != NONE -> won = (ctok == t)
		:: ok && cst == NONE && reclaims == 0 -> reclaims++; goto claim   /* claim again */
		:: else -> goto done                                  /* UNAVAILABLE */
		fi
	:: else
	fi;

#ifdef BUG_CLAIM_BEFORE_ENTRY
	/* BUG (c1): the entry written after the claim */
	entAdd(t, SC, ok);
	if
	:: !ok -> goto done
	:: else
	fi;
#endif

	if
	:: won ->
#ifndef DOUBT_UNREADABLE_PROJECTED
		if
		:: bad -> goto crashed   /* A5: its claimant never projects an unreadable command */
		:: else
		fi;
#endif
		/* H4, H5, H6: the order built from the claim (its created_at) */
		atomic { fp = pay; ft = t; ctok = t };
		goto write
	:: else
	fi;

	/* lost the claim: this attempt's own entry goes (best effort) */
	entDel(t, SC, ok);
	if
	:: cpay != pay -> ansReused(pay); goto done
	:: else
	fi;

	/* duplicate() */
dup:
	if
	:: cst == FAILED -> ansFailed(ctok); goto done
	:: else
	fi;
	if
	:: true ->
		/* old enough (T2): take over, Finish from the row */
		finish(ctok, cpay, cok, fx, fp, ft, res, ok, rst, rtok, rpay, rok);
		if
		:: res == F_PROJECT -> goto write
		:: res == F_CONFLICT -> ansReused(pay)
		:: res == F_RETRY -> goto noted                       /* UNAVAILABLE */
		:: else                                               /* COMMAND_UNREADABLE (internal), another error */
		fi;
		goto done
	:: polls < MAXPOLL ->
		/* presumed in flight: wait, read the order row, Peek the ledger */
		polls++;
		readById(fp, ft, ok);
		if
		:: !ok -> goto done
		:: ok && fp == pay -> ansOrder(pay, fp, ft); goto done
		:: ok && fp != NONE && fp != pay -> ansReused(pay); goto done
		:: else
		fi;
		readLedger(cst, ctok, cpay, cok, ok);
		if
		:: !ok || cst == NONE -> goto done                    /* an error (not found: internal) */
		:: else -> goto dup                                   /* cur = next (no fingerprint check) */
		fi
	:: true -> goto done                                      /* REQUEST_IN_PROGRESS */
	fi;

write:
	/* project(): by the winner (new) or a takeover (replayed) */
	project(fp, ft, ctok, res, ok, ok2);
	if
	:: res == F_OK -> ansOrder(pay, fp, ft); goto done
	:: else                                                   /* UNAVAILABLE */
	fi;

noted:
#ifdef BUG_DEADLETTER_VISIBLE
	/* note(): RecordAttempt, IF state = 'PENDING' AND claim_token AND attempts */
	atomic {
		if
		:: won == 0 && Lst == PENDING && Ltok == ctok && Latt < MAXATT -> Latt++
		:: won == 1 && Lst == PENDING && Ltok == t && Latt < MAXATT -> Latt++
		:: else
		fi
	}
#endif
	goto done;

release:
	/* the check ended the attempt: its entry, if written, is released (best effort) */
#ifndef BUG_CLAIM_BEFORE_ENTRY
	entDel(t, SC, ok);
#endif
	goto done;
crashed:
	skip;
done:
	atomic {
		live[t] = 0; opEnd(HBIT(me));
		/* forget this attempt's locals (fewer distinct states) */
		t = 0; cst = 0; ctok = 0; cpay = 0; cok = 0; rst = 0; rtok = 0; rpay = 0; rok = 0;
		fp = 0; ft = 0; res = 0; polls = 0; reclaims = 0; ok = 0; ok2 = 0; won = 0; bad = 0; fx = 0;
		if
		:: tries > 0 -> goto attempt     /* the client retries, at once or much later */
		:: true
		fi
	}
}

/* ---- the reconciler: handle() one due entry at a time ---------------- */
/* T1: a claim's entry is due once its attempt has ended; -DDUE_ANYTIME
   drops T1 (a reconciler grace shorter than the handler's deadline) */
#ifdef DUE_ANYTIME
#define DUE(tt, s) 1
#else
#define DUE(tt, s) ((s) != SC || !live[tt])
#endif
#define PICK(tt, s) :: atomic { (ent[tt] & (s)) != 0 && DUE(tt, s) -> et = tt; es = s }; break
#define PICKT(tt) PICK(tt, SC) PICK(tt, SR1) PICK(tt, SR2) PICK(tt, SQ) PICK(tt, SQ2)

active proctype reconciler() {
	byte et, es, ns;                 /* the entry: token, slot */
	byte cst, ctok, cpay; bit cok;
	byte rst, rtok, rpay; bit rok;
	byte fp, ft, res;
	bit ok, ok2, fx;

end:
	do
	PICKT(1) PICKT(2) PICKT(3) PICKT(4)
	od;

	atomic { opStart(RBIT); fx = fixed }
	/* read(): Peek, "not found" confirmed by Get */
	readLedger(cst, ctok, cpay, cok, ok);
	if
	:: !ok -> goto over                            /* kept for the next pass */
	:: ok && (cst == NONE || cst == FAILED || ctok != et) ->
		entDel(et, es, ok);                        /* gone, terminal, or another claim's: drop */
		goto over
	:: else
	fi;
	finish(ctok, cpay, cok, fx, fp, ft, res, ok, rst, rtok, rpay, rok);
	if
	:: res == F_PROJECT -> project(fp, ft, ctok, res, ok, ok2)
	:: else
	fi;
	if
	:: res == F_OK || res == F_CONFLICT ->
		/* removeIfNotClaims: Finish released the claim's entry */
		if
		:: es != SC -> entDel(et, es, ok)
		:: else
		fi
	:: res == F_UNFIN ->
		/* deadLetter: MarkFailed, IF state = 'PENDING' AND claim_token = ? */
		if
		:: atomic { Lst == PENDING && Ltok == ctok -> Lst = FAILED; updElig(); ok = 1 }
		:: atomic { !(Lst == PENDING && Ltok == ctok) -> ok = 1 }   /* not applied: read back */
		:: atomic { CANFAULT -> faults++;                              /* unknown: settled by a read */
			if :: Lst == PENDING && Ltok == ctok -> Lst = FAILED; updElig() :: true fi;
			ok = 1 }
		:: atomic { CANFAULT -> faults++; ok = 0 }                     /* unavailable */
		CRASHOPT
		fi;
		if
		:: !ok -> goto over
		:: else
		fi;
		readLedger(rst, rtok, rpay, rok, ok);
		if
		:: ok && (rst == NONE || rst == FAILED || rtok != ctok) ->
			entDel(et, es, ok)                     /* terminal, or claimed afresh: its own entry */
		:: else                                    /* unsettled, or still this claim's: kept */
		fi
	:: else ->
		/* retryLater: RecordAttempt (an LWT; here only its failure
		   matters), then Reschedule */
		if
		:: atomic { CANFAULT -> faults++ }; goto over   /* not noted: the entry stays as it is */
		:: atomic {
#ifdef BUG_DEADLETTER_VISIBLE
			if :: Lst == PENDING && Ltok == ctok && Latt < MAXATT -> Latt++ :: else fi;
#endif
			skip }
		fi;
#ifdef BUG_DEADLETTER_VISIBLE
		/* BUG (a): past MaxAttempts, dead-lettered though its projections
		   may be visible */
		if
		:: Latt >= MAXATT ->
			if
			:: atomic { Lst == PENDING && Ltok == ctok -> Lst = FAILED; updElig() }
			:: atomic { !(Lst == PENDING && Ltok == ctok) -> skip }
			CRASHOPT
			fi;
			entDel(et, es, ok);
			goto over
		:: else
		fi;
#endif
		atomic { if :: es == SR1 -> ns = SR2 :: else -> ns = SR1 fi }
		entAdd(et, ns, ok);                        /* insert first: a crash leaves two, never none */
		if
		:: ok -> entDel(et, es, ok)
		:: else
		fi
	fi;
	goto over;

crashed:
	skip;                                          /* restarted: the entry is read again */
over:
	atomic { opEnd(RBIT); et = 0; es = 0; ns = 0; cst = 0; ctok = 0; cpay = 0; cok = 0;
		rst = 0; rtok = 0; rpay = 0; rok = 0; fp = 0; ft = 0; res = 0; ok = 0; ok2 = 0; fx = 0; goto end }
}

/* ---- the operator: orderd requeue (ledger.Requeue) of a FAILED request,
   after deploying what reads its command. An operator whose requeue fails
   or crashes runs it again (OPRUNS runs at most). REQUEUE=1: as coded
   (the entry, then the LWT; a PENDING request only gets the entry);
   REQUEUE=2: the proposed fix: the entry, the LWT, then a second entry
   in another row (Q2), written only once the request is PENDING; a
   PENDING request gets that row too. -------------------------------- */
#if REQUEUE
active proctype operator() {
	byte cst, ctok, cpay, runs = OPRUNS; bit cok, ok, done;

end:
	/* the fix is deployed: every instance restarted (no operation of the
	   old binary is still running), then the operator requeues */
	atomic { Lst == FAILED && busy == 0 -> fixed = 1 }
again:
	atomic { runs--; done = 0; opStart(OBIT) }
	readLedger(cst, ctok, cpay, cok, ok);          /* Get */
	if
	:: !ok -> goto over
	:: ok && cst == NONE -> done = 1; goto over    /* not found */
	:: else
	fi;
#if REQUEUE == 2
	if
	:: cst != FAILED ->
		/* FIX: a PENDING request gets its entry in the row written only
		   once it is PENDING (no drop decided on a FAILED read targets it) */
		entAdd(ctok, SQ2, ok); done = ok; goto over
	:: else
	fi;
#endif
	entAdd(ctok, SQ, ok);                          /* the entry first, due now */
	if
	:: !ok -> goto over
	:: ok && cst != FAILED -> done = 1; goto over  /* PENDING: it only gets the entry */
	:: else
	fi;
	/* FAILED -> PENDING, IF state = 'FAILED' AND claim_token = ? */
	if
	:: atomic { Lst == FAILED && Ltok == ctok -> Lst = PENDING; Latt = 0; failedAns = 0; updElig(); ok = 1 }
	:: atomic { !(Lst == FAILED && Ltok == ctok) -> ok = 1 }    /* not applied: the row as it is */
	:: atomic { CANFAULT -> faults++;                           /* unknown, unsettled: an error */
		if :: Lst == FAILED && Ltok == ctok -> Lst = PENDING; Latt = 0; failedAns = 0; updElig() :: true fi;
		ok = 0 }
	CRASHOPT
	fi;
#if REQUEUE == 2
	if
	:: ok -> entAdd(ctok, SQ2, ok)                 /* FIX: an entry after the LWT, in another row */
	:: else
	fi;
#endif
	done = ok;
	goto over;
crashed:
	skip;
over:
	atomic { if :: !done && runs > 0 -> goto again :: else -> opEnd(OBIT) fi }   /* run it again at once */
}
#endif

/* ---- the ledger row's TTL (T3) ------------------------------------ */
active proctype ttl() {
end:
	do
	:: atomic { Lst != NONE && elig && (stale & busy) == 0 ->
		ent[Ltok] = 0;                             /* its entries expire with it */
		if :: Lst == FAILED -> failedAns = 0 :: else fi;
		Lst = NONE; Ltok = 0; Lpay = 0; Lok = 0; Latt = 0;
		if :: NOTHING_VISIBLE -> first = NONE; reused = 0 :: else fi;   /* no order: the id is forgotten */
		updElig() }
	od
}

/* ---- the invariants, in every state: the monitor can move only when
   one is violated, and then fails (it adds no states otherwise) -------- */
active proctype monitor() {
end:
	atomic {
		!(ONE_ORDER && FIRST_PAYLOAD && ACK_HOLDS && ANSWERS_AGREE && FAILED_HOLDS && REUSED_HOLDS && NOT_STRANDED) ->
		assert(ONE_ORDER);
		assert(FIRST_PAYLOAD);
		assert(ACK_HOLDS);
		assert(!wrongOrder);
		assert(!disagree);
		assert(FAILED_HOLDS);
		assert(REUSED_HOLDS);
		assert(NOT_STRANDED)
	}
}

/* ---- when nothing can move any more: every request the reconciler
   could find is finished, none is left PENDING without its order ------- */
active proctype quiescent() {
	timeout -> assert(Lst != PENDING || Ipay != NONE)
}

init {
	atomic {
		run handler(1, A, TRIES1);
		run handler(2, P2, TRIES2)
	}
}
