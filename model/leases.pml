/*
 * leases.pml: a reconciler shard lease, held by its holder's own clock,
 * against how Cassandra expires it (reconciler/lease.go,
 * internal/stores/leases).
 *
 * Promise (MUTEX): while an instance counts a shard held (the true time is
 * before its hold's deadline), no other instance's acquire of that shard
 * applies. The passes rely on it: a pass works a shard only while its hold
 * lasts, so two instances never work one shard at once.
 *
 * What is modelled, in ticks of 250 ms:
 *   - two instances, each sending acquires (INSERT IF NOT EXISTS USING TTL)
 *     and renewals (UPDATE USING TTL IF owner = me) at any time (up to
 *     SENDS each), each
 *     write landing at any later moment (an LWT lands in one step, at one
 *     replica's clock), its answer coming back later still;
 *   - Cassandra's TTL: the landing replica sets the lease's local deletion
 *     time to the whole second of its own clock plus the TTL, and a replica
 *     that later judges it reads its own clock; each replica's clock is
 *     within SKEW ticks of true time;
 *   - the holder's deadline: an applied acquire or renewal moves it to its
 *     send time plus the lease's life (TTL - SLACK), by the holder's
 *     monotonic clock (true time here); one that did not apply ends the
 *     hold; one whose answer never comes changes nothing.
 * Not modelled: failures other than a lost answer, releases (a release
 * ends the hold before it is sent), membership.
 *
 *   -DBUG_NO_SLACK   the life is the whole TTL (the deadline before the
 *                    fix): an acquire applies while the old holder still
 *                    counts the shard held (MUTEX fails).
 *   -DSKEW=n         replicas' clocks within n ticks of true time (default
 *                    1: 250 ms). Past what SLACK covers (SKEW=2: 500 ms,
 *                    1 s between two replicas) MUTEX fails.
 */

#define TICK    4       /* ticks per second */
#define TTL     8       /* 2 s: the TTL in ticks (a whole number of seconds; what MUTEX rests on is SLACK against the second and the clocks, not the TTL) */
#ifdef BUG_NO_SLACK
#define SLACK   0
#else
#define SLACK   6       /* leaseSlack: 1.5 s */
#endif
#define LIFE    (TTL - SLACK)
#ifndef SKEW
#define SKEW    1
#endif
#ifndef SENDS
#define SENDS   2       /* the holder's sends: an acquire and a renewal */
#endif
#define START   4       /* true time starts here, so a slow replica's clock is never negative */
#define HORIZON (START + 2 * TTL + 4) /* true time stops here */
#define NONE    0

byte now = START;       /* true time */
byte owner = NONE;      /* the lease row: its owner (1 or 2), NONE if no row */
byte ldt;               /* its local deletion time: gone once a replica's clock reaches it */
byte deadline[3];       /* each instance's hold: held while now < deadline[i]; 0: none */

/* MUTEX: never do both instances count the shard held at once */
active proctype mutex() {
end:	atomic { (now < deadline[1] && now < deadline[2]) -> assert(!(now < deadline[1] && now < deadline[2])) }
}

/* time moves on, one tick at a time, until the horizon */
active proctype clock() {
	do
	:: now < HORIZON -> now++
	:: else -> break
	od
}

/* one instance: sends acquires or renewals, one at a time */
proctype instance(byte me; byte most) {
	byte sent, c, sends;
	bool renewing, applied, gone;
	do
	:: now >= HORIZON || sends == most -> break
	:: now < HORIZON && sends < most ->
		sends++;
		/* send: a renewal while it holds the shard, else an acquire */
		sent = now;
		renewing = (now < deadline[me]);
		/* ... the write lands at some later moment, at one replica's clock */
		atomic {
			select(c : now - SKEW .. now + SKEW);
			gone = (owner != NONE && c >= ldt);
			if
			:: gone -> owner = NONE
			:: else
			fi;
			if
			:: renewing && owner == me ->
				applied = true
			:: !renewing && owner == NONE ->
				applied = true;
				owner = me
			:: else ->
				applied = false
			fi;
			if
			:: applied -> ldt = (c / TICK) * TICK + TTL
			:: else
			fi;
			c = 0; gone = false	/* dead from here: fewer states */
		}
		/* ... and its answer comes back later, or never */
		if
		:: atomic {
			if
			:: applied -> deadline[me] = sent + LIFE
			:: !applied && renewing -> deadline[me] = 0
			:: else
			fi
		   }
		:: skip /* the answer is lost: the outcome stays unknown, the hold as it was */
		fi;
		atomic { sent = 0; applied = false; renewing = false }
	od
}

init {
	atomic {
		run instance(1, SENDS);	/* the holder: acquires, renews */
		run instance(2, 1)	/* the other: one acquire, at any moment */
	}
}
