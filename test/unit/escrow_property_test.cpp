/*
 * test/unit/escrow_property_test.cpp
 *
 * The escrow against a plain bucket fed the same committed calls, over
 * seeded random runs on one key: up to four transactions at once take (some
 * reserving), refund, reset, record first sightings and penalise, set
 * savepoints, roll back to them and release them, commit and abort; the
 * policy may be redefined (rate, burst, fixed windows, floor rate, initial
 * balance, penalty), also by a transaction that then calls under its own
 * definition and may roll it back; the whole limit is reset at once; a
 * bucket the escrow calls forgettable is forgotten (the reference forgets
 * it only if full too, as a purge would); the clock moves forward, often
 * not at all between calls.  Runs last minutes of clock, less than the
 * hour after which a stamp ahead of the clock restarts.
 *
 * The reference applies the calls of committed transactions (those a
 * rollback to a savepoint undid excluded), each at the instant and under
 * the limit it was made with, to one core bucket, in this order:
 * - with one transaction at a time, as they were made: that is the table
 *   engine itself;
 * - with several, takes, penalties and first sightings as they were made,
 *   refunds and resets where their transaction commits (in the order they
 *   were made): the escrow's own order, since it counts a take as spent
 *   for everyone from the moment it is decided, and applies a refund or a
 *   reset only at its commit.  Not commit order: a take that commits late
 *   was decided before the calls that commit ahead of it, which counted it
 *   as spent (a reservation may have gone into debt over it), and a call
 *   made after it but committed first would store refill from an instant
 *   the take, replayed after it, could not earn from.
 * An instant before the bucket's stamp credits no refill (Refill's rule:
 * no refill is counted twice); a penalty box holds only calls made after
 * the call that started it.  The reference consumes only what the escrow
 * granted: a take the escrow denied is a denial there too, which stores a
 * first sighting as the table does, and the box the reference's own
 * decision starts.  Refunds, resets, sightings and penalties it decides
 * itself, as the table does.
 *
 * Checked:
 * - every committed take the escrow granted, the reference grants at its
 *   place (to within 1e-9 of the burst);
 * - whenever no transaction is open, the escrow counts on no more than the
 *   reference holds, under the policy of that moment (refill lost while
 *   takes were pending makes it less);
 * - with one transaction at a time and the clock still while it is open
 *   (no take pending across a refill), exactly as much (where the policy is
 *   redefined only between transactions);
 * - after every step, the state's invariants.
 *
 * The enabled configurations leave out what makes the escrow admit more
 * than the reference today:
 * - penalty boxes the table starts where the escrow does not (kFollowBoxes):
 *   a take denied inside another transaction's box not yet committed
 *   (EscrowOverAdmission.DISABLED_ADenialInsideAnOpen... in escrow_test.cpp),
 *   and the refill such a denial stores with its box, which a policy then
 *   redefined to refill faster credits at its new rate where the table
 *   credited the old one;
 * - redefinitions while transactions are open (kRedefineHeld): the same
 *   with a denial inside a box the escrow started where the table granted
 *   (a refund of the caller's own, counted by the table at once, not yet
 *   by the escrow);
 * - with several transactions, redefinitions, and new balances below full
 *   with resets, where the reference is not the table either: it applies a
 *   reset where its transaction commits, after that transaction's later
 *   calls, which the table (and the escrow) count after the reset; and a
 *   take the escrow denied and the reference would grant stores nothing
 *   there, where the table's denial stores its box and the refill up to it.
 * One transaction at a time, everything but redefinitions while it is open
 * is checked (balances equal too).  The disabled instantiation runs
 * everything.
 *
 * The Sliding configurations run the same with every policy a sliding
 * window (sliding_window.hpp), balances compared as the room a take may
 * cost (the previous window's count weighed in).
 *
 * A failure is reported with its configuration, seed, run and step, and
 * the run's trace; every run is determined by its seed and number.
 */
#include "escrow_harness.hpp"
#include "sliding_window.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace {

/* What a take may cost from `b` under `limit` at `now_us`: the balance
 * refilled to then, or a sliding window's room. */
double
RoomAt(const Bucket &b, const Limit &limit, std::int64_t now_us)
{
	return limit.sliding ? ratelimit::core::SlidingRoom(b, limit, now_us)
	                     : Refill(b, limit, now_us).tokens;
}

using namespace escrow_harness;
using ratelimit::core::Admits;
using ratelimit::core::Available;
using ratelimit::core::Forget;
using ratelimit::core::Forgettable;
using ratelimit::core::InvariantsHold;
using ratelimit::core::NewBucket;
using ratelimit::core::StartsBelowFull;
using ratelimit::core::StartTokens;

/* Failures reported in full per property; the rest are counted. */
constexpr int kReported = 3;

std::string
Describe(const Limit &l)
{
	std::ostringstream s;
	s.precision(17);
	s << "rate=" << l.rate << " burst=" << l.burst;
	if (l.window_us > 0)
		s << " window_us=" << l.window_us << " phase_us=" << l.phase_us;
	if (l.floor_rate > 0)
		s << " floor_rate=" << l.floor_rate;
	if (l.penalty_us > 0)
		s << " penalty_us=" << l.penalty_us;
	if (l.has_initial)
		s << " initial=" << l.initial;
	return s.str();
}

std::string
Describe(const Request &r)
{
	std::ostringstream s;
	s.precision(17);
	s << r.cost;
	if (r.reserve)
		s << " reserving up to " << r.max_reserved;
	return s.str();
}

/* One call of a transaction (or a reset or purge of the key), as the
 * reference replays it once its transaction has committed. */
struct Recorded {
	std::int64_t seq; /* in the order calls were made, over the run */
	bool reset;
	Operation operation;
	Limit limit;
	std::int64_t at_us;
	int subxact;
	bool granted;     /* the escrow's answer */
	bool purge;       /* forget the bucket if it is full under `limit` */
	bool boxed;       /* the escrow stored a penalty box */
	std::string text; /* for the trace */
	/* Where the reference applies it: see the file header. */
	std::int64_t effect;
	std::int64_t effect_order;
};

struct SimTransaction {
	int id = 0;
	bool open = false;
	Transaction undo;
	std::vector<Recorded> calls;
	std::vector<int> savepoints; /* subtransaction ids, innermost last */
	bool wrote = false;          /* redefined the policy: its calls use `own` */
	Limit own{1, 1};
};

/* The reference: one bucket as the table engine keeps it, and the penalty
 * boxes stored on it with the call that started each. */
struct Reference {
	struct Box {
		std::int64_t seq; /* of the call that started it */
		std::int64_t end;
	};
	bool present = false;
	Bucket bucket{0, 0};
	std::vector<Box> boxes;

	/* The box a call made at `seq` is in: only boxes started before it. */
	std::int64_t
	BlockedFor(std::int64_t seq) const
	{
		std::int64_t blocked = ratelimit::core::kNotBlocked;
		for (const Box &box : boxes)
			if (box.seq < seq && box.end > blocked)
				blocked = box.end;
		return blocked;
	}

	Bucket
	Base(const Limit &limit, std::int64_t seq, std::int64_t at_us) const
	{
		Bucket base = present ? bucket : NewBucket(limit, at_us);
		base.blocked_until_us = BlockedFor(seq);
		return base;
	}

	void
	Store(const Bucket &next, std::int64_t seq, std::int64_t base_blocked)
	{
		if (next.blocked_until_us != base_blocked &&
		    next.blocked_until_us != ratelimit::core::kNotBlocked)
			boxes.push_back(Box{seq, next.blocked_until_us});
		bucket = next;
		bucket.blocked_until_us = ratelimit::core::kNotBlocked;
		present = true;
	}

	void
	Reset()
	{
		present = false;
		boxes.clear();
	}

	double
	Tokens(const Limit &limit, std::int64_t now_us) const
	{
		return present ? RoomAt(bucket, limit, now_us) : StartTokens(limit);
	}
};

/* What a run may do, beyond takes, refunds, first sightings, savepoints,
 * commits and aborts. */
enum Feature : unsigned {
	kResets = 1u << 0,       /* resets of the key in transactions */
	kRedefine = 1u << 1,     /* policies redefined while no transaction is open */
	kRedefineHeld = 1u << 2, /* also while transactions are open, and by them */
	kPenalties = 1u << 3,    /* policies with a penalty box */
	kInitial = 1u << 4,      /* policies whose new keys start below full */
	kResetLimit = 1u << 5,   /* the whole limit reset at once, while nobody holds the key */
	kEvict = 1u << 6,        /* a bucket the escrow may forget is forgotten */
	kEverything = (1u << 7) - 1,
	/* The reference starts a penalty box only where the escrow does.  A box
	 * starts at a denial and lasts a fixed time, so where the two deny at
	 * other moments their boxes differ.  The table engine starts one on a
	 * take denied inside another transaction's box not yet committed, and
	 * keeps it if that box is rolled back; the escrow does not
	 * (EscrowOverAdmission.DISABLED_ADenialInsideAnOpen...).  And where the
	 * escrow denies first (a refund counts for its own transaction only once
	 * committed, where the table counts it at once), its box starts, and
	 * ends, earlier: a later denial the table boxes falls inside it. */
	kFollowBoxes = 1u << 7,
	/* Every policy is a sliding window (no penalty, no initial balance, no
	 * reservation: the policy table allows none of them there). */
	kSliding = 1u << 8,
};

struct Config {
	const char *name;
	std::uint64_t seed;
	int runs;
	int steps;
	int max_open;      /* transactions open at once */
	bool serial;       /* one at a time, the clock still while it is open */
	bool equal;        /* serial: the balances must be equal, not only no more */
	unsigned features; /* Feature */
};

/* Counts violations of one property and reports the first few in full. */
class Property
{
public:
	explicit Property(const char *name) : name_(name) {}

	void
	Check(bool holds, const std::string &where, const std::string &detail)
	{
		checked_++;
		if (!holds && failed_++ < kReported)
			ADD_FAILURE() << name_ << " violated at " << where << ": " << detail;
	}

	~Property()
	{
		EXPECT_EQ(failed_, 0) << name_ << ": failed in " << failed_ << " runs (" << checked_
		                      << " checks)";
	}

private:
	const char *name_;
	long checked_ = 0;
	long failed_ = 0;
};

struct Properties {
	Property granted{"a grant of the escrow is one of the reference"};
	Property balance{"no transaction open: the escrow counts on no more than the reference"};
	Property equal{"serial, no transaction open: the escrow's balance is the reference's"};
	Property invariants{"the escrow's invariants hold"};
	long steps = 0;
	long grants = 0;
	long commits = 0;
};

class Simulation
{
public:
	Simulation(const Config &config, int number, Properties &properties)
	    : config_(config), number_(number), p_(properties),
	      rng_(config.seed * 0x9E3779B97F4A7C15ULL + static_cast<std::uint64_t>(number))
	{
	}

	void
	Go()
	{
		policy_ = RandomLimit();
		Log("policy " + Describe(policy_));
		txns_.resize(config_.max_open);
		for (int i = 0; i < config_.max_open; i++)
			txns_[i].id = i + 1;
		for (step_ = 0; step_ < config_.steps && !failed_; step_++) {
			p_.steps++;
			Step();
			CheckInvariants();
			CheckQuiet();
		}
		for (SimTransaction &txn : txns_)
			if (txn.open && !failed_)
				EndTransaction(txn, Chance(0.5));
		CheckQuiet();
	}

private:
	const Config &config_;
	int number_;
	Properties &p_;
	std::mt19937_64 rng_;
	int step_ = 0;
	std::int64_t now_ = kT0;
	std::int64_t seq_ = 0;
	Limit policy_{1, 1};
	Slot slot_;
	std::vector<int> writers_;
	std::vector<SimTransaction> txns_;
	Reference reference_;
	std::vector<Recorded> committed_; /* committed calls the reference has yet to apply */
	std::vector<std::string> trace_;
	bool failed_ = false;

	bool
	Has(unsigned feature) const
	{
		return (config_.features & feature) != 0;
	}

	/* A run stops at its first violation: what follows it would only
	 * repeat it. */
	void
	Verify(Property &property, bool holds, const std::string &detail)
	{
		if (failed_ || holds) {
			property.Check(true, "", "");
			return;
		}
		failed_ = true;
		property.Check(false, Where(), detail);
	}

	bool
	Chance(double p)
	{
		return std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < p;
	}

	int
	Below(int n)
	{
		return std::uniform_int_distribution<int>(0, n - 1)(rng_);
	}

	template <typename T, std::size_t N>
	T
	Pick(const T (&values)[N])
	{
		return values[Below(static_cast<int>(N))];
	}

	void
	Log(const std::string &line)
	{
		std::ostringstream s;
		s << "#" << step_ << " t=+" << (now_ - kT0) << "us " << line;
		trace_.push_back(s.str());
	}

	std::string
	Where()
	{
		std::ostringstream s;
		s << config_.name << " seed=" << config_.seed << " run=" << number_ << " step=" << step_
		  << "\ntrace of the run:";
		for (const std::string &line : trace_)
			s << "\n  " << line;
		return s.str();
	}

	Limit
	RandomLimit()
	{
		static const double kRates[] = {0.0, 0.25, 1.0, 2.5, 10.0, 50.0};
		static const double kBursts[] = {1.0, 3.0, 10.0, 40.0};
		Limit limit{Pick(kRates), Pick(kBursts)};
		if (Has(kSliding)) {
			static const std::int64_t kWindows[] = {500000, 2000000};
			limit.rate = limit.burst;
			limit.window_us = Pick(kWindows);
			limit.phase_us =
			    std::uniform_int_distribution<std::int64_t>(0, limit.window_us - 1)(rng_);
			limit.sliding = true;
			return limit;
		}
		if (Chance(0.15)) {
			static const std::int64_t kWindows[] = {500000, 2000000};
			limit.window_us = Pick(kWindows);
			limit.phase_us =
			    std::uniform_int_distribution<std::int64_t>(0, limit.window_us - 1)(rng_);
		} else if (Chance(0.12)) {
			limit.floor_rate = Chance(0.5) ? limit.burst / 2 : 5.0;
		}
		if (Has(kPenalties) && Chance(0.25)) {
			static const std::int64_t kPenalties[] = {300000, 2000000};
			limit.penalty_us = Pick(kPenalties);
		}
		if (Has(kInitial) && Chance(0.3)) {
			limit.has_initial = true;
			static const double kShares[] = {0.0, 0.0, 0.34, 0.5, 1.0};
			limit.initial = std::floor(limit.burst * Pick(kShares));
		}
		return limit;
	}

	Request
	RandomRequest(const Limit &limit)
	{
		if (Chance(0.08))
			return Request::Plain(0.0);
		const int whole = static_cast<int>(limit.burst);
		double cost = Chance(0.2) ? 0.5 * (1 + Below(2 * whole)) : 1 + Below(whole);
		Request request = Request::Plain(std::min(cost, limit.burst));
		if (Chance(0.15)) {
			static const double kDebts[] = {0.0, 1.0, 4.0};
			request.reserve = true;
			request.debt_capped = true;
			request.max_reserved = Pick(kDebts);
			request.cost = 1 + Below(whole + static_cast<int>(request.max_reserved));
		}
		if (Validate(limit, request) != Status::kOk)
			request = Request::Plain(std::min(cost, limit.burst));
		return request;
	}

	/* The limit `txn`'s calls are made under. */
	const Limit &
	LimitOf(const SimTransaction *txn) const
	{
		return txn != nullptr && txn->wrote ? txn->own : policy_;
	}

	bool
	AnyOpen() const
	{
		for (const SimTransaction &txn : txns_)
			if (txn.open)
				return true;
		return false;
	}

	void
	Step()
	{
		if (!config_.serial || !AnyOpen())
			AdvanceClock();
		const int roll = Below(100);
		if (roll < 10) {
			Begin();
		} else if (roll < 62) {
			SimTransaction *txn = RandomOpen();
			if (txn != nullptr)
				InTransaction(*txn);
			else
				Begin();
		} else if (roll < 82) {
			Autocommit();
		} else if (roll < 88) {
			Redefine();
		} else if (roll < 91) {
			ResetWholeLimit();
		} else {
			MaybeForget();
		}
	}

	void
	AdvanceClock()
	{
		const int roll = Below(10);
		if (roll < 4)
			return;
		if (roll < 8)
			now_ += std::uniform_int_distribution<std::int64_t>(1, 300000)(rng_);
		else
			now_ += std::uniform_int_distribution<std::int64_t>(1, 3 * kSecond)(rng_);
	}

	SimTransaction *
	RandomOpen()
	{
		std::vector<SimTransaction *> open;
		for (SimTransaction &txn : txns_)
			if (txn.open)
				open.push_back(&txn);
		return open.empty() ? nullptr : open[Below(static_cast<int>(open.size()))];
	}

	void
	Begin()
	{
		for (SimTransaction &txn : txns_) {
			if (txn.open)
				continue;
			if (config_.serial && AnyOpen())
				return;
			txn.open = true;
			txn.undo = Transaction{};
			txn.calls.clear();
			txn.savepoints.clear();
			txn.wrote = false;
			Log("T" + std::to_string(txn.id) + " begins");
			return;
		}
	}

	void
	InTransaction(SimTransaction &txn)
	{
		const int roll = Below(100);
		if (roll < 40)
			MakeCall(&txn, Operation{Operation::kTake, RandomRequest(LimitOf(&txn)), 0.0});
		else if (roll < 48)
			MakeCall(&txn, Operation{Operation::kRefund, Request::Plain(0), RandomAmount()});
		else if (roll < 52 && Has(kResets))
			MakeReset(txn);
		else if (roll < 55)
			MakeCall(&txn, Operation{Operation::kRecordNew, Request::Plain(0), 0.0});
		else if (roll < 59)
			MakeCall(&txn, Operation{Operation::kPenalize, RandomRequest(LimitOf(&txn)), 0.0});
		else if (roll < 64)
			Savepoint(txn);
		else if (roll < 70)
			RollbackToSavepoint(txn);
		else if (roll < 74)
			ReleaseSavepoint(txn);
		else if (roll < 77 && Has(kRedefineHeld) && !txn.wrote)
			WritePolicy(txn);
		else if (roll < 91)
			EndTransaction(txn, true);
		else
			EndTransaction(txn, false);
	}

	double
	RandomAmount()
	{
		static const double kAmounts[] = {0.0, 0.5, 1.0, 2.0, 5.0};
		return Pick(kAmounts);
	}

	void
	Autocommit()
	{
		if (config_.serial && AnyOpen())
			return;
		const int roll = Below(100);
		Operation operation{Operation::kTake, RandomRequest(policy_), 0.0};
		if (roll >= 85)
			operation = Operation{Operation::kRefund, Request::Plain(0), RandomAmount()};
		SimTransaction single;
		single.id = 0;
		single.open = true;
		MakeCall(&single, operation);
		Commit(single);
	}

	std::string
	Name(const SimTransaction &txn) const
	{
		return txn.id == 0 ? std::string("auto") : "T" + std::to_string(txn.id);
	}

	/* `operation` in `txn`, on the escrow; kept for the reference. */
	void
	MakeCall(SimTransaction *txn, const Operation &operation)
	{
		const Limit limit = LimitOf(txn);
		if (operation.kind == Operation::kTake || operation.kind == Operation::kPenalize) {
			if (Validate(limit, operation.request) != Status::kOk)
				return;
		}
		const EscrowStep step = Call(slot_, &txn->undo, operation, limit, now_);
		if (step.recorded && (step.record.created || step.record.relimits))
			MarkIfBeingRedefined();
		Recorded call{};
		call.seq = ++seq_;
		call.operation = operation;
		call.limit = limit;
		call.at_us = now_;
		call.subxact = txn->undo.subxact;
		call.granted = step.decision.allowed;
		call.boxed = step.recorded && step.record.boxed;
		static const char *const kKinds[] = {"check", "take",       "refund",
		                                     "peek",  "record-new", "penalize"};
		std::ostringstream s;
		s.precision(17);
		s << Name(*txn) << " " << kKinds[operation.kind] << " ";
		if (operation.kind == Operation::kRefund)
			s << operation.amount;
		else
			s << Describe(operation.request);
		if (txn->wrote)
			s << " (own definition)";
		s << " -> " << (step.decision.allowed ? "granted" : "denied")
		  << " remaining=" << step.decision.remaining << (step.recorded ? " recorded" : "")
		  << (call.boxed ? " boxed" : "") << " seq=" << call.seq << " subxact=" << call.subxact;
		call.text = s.str();
		Log(call.text);
		txn->calls.push_back(call);
	}

	void
	MakeReset(SimTransaction &txn)
	{
		const bool existed = Reset(slot_, txn.undo);
		Recorded call{};
		call.seq = ++seq_;
		call.reset = true;
		call.at_us = now_;
		call.subxact = txn.undo.subxact;
		call.text = Name(txn) + " reset" + (existed ? "" : " (nothing to reset)");
		Log(call.text + " seq=" + std::to_string(call.seq));
		/* A key absent resets to what it is: the table deletes nothing. */
		if (existed)
			txn.calls.push_back(call);
	}

	void
	Savepoint(SimTransaction &txn)
	{
		txn.undo.subxact = txn.undo.next_subxact++;
		txn.savepoints.push_back(txn.undo.subxact);
		Log(Name(txn) + " savepoint " + std::to_string(txn.undo.subxact));
	}

	void
	RollbackToSavepoint(SimTransaction &txn)
	{
		if (txn.savepoints.empty())
			return;
		const int level = Below(static_cast<int>(txn.savepoints.size()));
		const int from = txn.savepoints[level];
		EndSubtransaction(slot_, txn.undo, from, false, 0);
		txn.calls.erase(std::remove_if(txn.calls.begin(), txn.calls.end(),
		                               [from](const Recorded &c) { return c.subxact >= from; }),
		                txn.calls.end());
		txn.savepoints.resize(level + 1);
		/* The savepoint stays; what follows runs in a new subtransaction. */
		txn.savepoints[level] = txn.undo.subxact = txn.undo.next_subxact++;
		Log(Name(txn) + " rollback to savepoint " + std::to_string(from) + ", now in " +
		    std::to_string(txn.undo.subxact));
	}

	void
	ReleaseSavepoint(SimTransaction &txn)
	{
		if (txn.savepoints.empty())
			return;
		const int level = Below(static_cast<int>(txn.savepoints.size()));
		const int from = txn.savepoints[level];
		const int parent = level == 0 ? 1 : txn.savepoints[level - 1];
		EndSubtransaction(slot_, txn.undo, from, true, parent);
		for (Recorded &call : txn.calls)
			if (call.subxact >= from)
				call.subxact = parent;
		txn.savepoints.resize(level);
		txn.undo.subxact = parent;
		Log(Name(txn) + " release savepoint " + std::to_string(from));
	}

	/* A policy written: the engine keeps the buckets of the policy until a
	 * call under another limit judges them (KeepMemoryBuckets), with the
	 * writer's mark, taken back if it aborts. */
	void
	KeepBuckets(int writer)
	{
		if (slot_.used && !slot_.state.absent && !slot_.kept) {
			slot_.kept = true;
			slot_.kept_by = writer;
		}
	}

	/* A bucket stored new, or judged by another limit, while a write of its
	 * policy is open: kept with the oldest writer's mark. */
	void
	MarkIfBeingRedefined()
	{
		if (writers_.empty() || slot_.kept)
			return;
		slot_.kept = true;
		slot_.kept_by = *std::min_element(writers_.begin(), writers_.end());
	}

	void
	WritePolicy(SimTransaction &txn)
	{
		txn.wrote = true;
		txn.own = RandomLimit();
		writers_.push_back(txn.id);
		KeepBuckets(txn.id);
		Log(Name(txn) + " redefines the policy: " + Describe(txn.own));
	}

	void
	Redefine()
	{
		if (!Has(kRedefineHeld) && (!Has(kRedefine) || AnyOpen()))
			return;
		policy_ = RandomLimit();
		KeepBuckets(0);
		Log("policy redefined: " + Describe(policy_));
	}

	/* Only while nobody holds the key: a bucket an open transaction holds
	 * the memory engine forgets at once, pending takes counting after the
	 * reset, where the table engine resets it once its writer has ended. */
	void
	ResetWholeLimit()
	{
		if (!Has(kResetLimit) || AnyOpen())
			return;
		Log("the whole limit is reset");
		if (slot_.used && !slot_.state.absent && Forget(slot_.state))
			slot_.used = false;
		Recorded reset{};
		reset.seq = ++seq_;
		reset.reset = true;
		reset.text = "the whole limit is reset";
		reset.effect = reset.effect_order = reset.seq;
		committed_.push_back(reset);
	}

	void
	MaybeForget()
	{
		if (Has(kEvict) && slot_.used && Forgettable(slot_.state, slot_.kept, now_)) {
			slot_.used = false;
			slot_.kept = false;
			Log("the slot is forgotten (evicted)");
			/* The table forgets a full bucket too, when purged. */
			Recorded purge{};
			purge.seq = ++seq_;
			purge.purge = true;
			purge.limit = slot_.state.limit;
			purge.at_us = now_;
			purge.text = "the bucket is purged if full";
			purge.effect = purge.effect_order = purge.seq;
			committed_.push_back(purge);
		}
	}

	void
	EndTransaction(SimTransaction &txn, bool commit)
	{
		if (commit) {
			Commit(txn);
			return;
		}
		End(slot_, txn.undo, false);
		Log(Name(txn) + " aborts");
		LeaveWriters(txn, false);
		txn.open = false;
	}

	void
	LeaveWriters(const SimTransaction &txn, bool commit)
	{
		if (!txn.wrote)
			return;
		writers_.erase(std::remove(writers_.begin(), writers_.end(), txn.id), writers_.end());
		if (!commit && slot_.kept && slot_.kept_by == txn.id)
			slot_.kept = false;
		if (slot_.kept && slot_.kept_by == txn.id)
			slot_.kept_by = 0;
		if (commit) {
			policy_ = txn.own;
			Log("policy committed: " + Describe(policy_));
		}
	}

	void
	Commit(SimTransaction &txn)
	{
		End(slot_, txn.undo, true);
		const std::int64_t commit = ++seq_;
		Log(Name(txn) + " commits seq=" + std::to_string(commit));
		p_.commits++;
		for (Recorded call : txn.calls) {
			/* One at a time, the reference is the table engine: every call
			 * where it was made.  Otherwise refunds and resets take effect
			 * where their transaction commits, as the escrow applies them;
			 * the first sighting a refund stores, where it was made. */
			const bool deferred = call.reset || call.operation.kind == Operation::kRefund;
			call.effect = call.effect_order = call.seq;
			if (deferred && !config_.serial) {
				if (!call.reset) {
					Recorded sighting = call;
					sighting.operation = Operation{Operation::kRecordNew, Request::Plain(0), 0.0};
					committed_.push_back(sighting);
				}
				call.effect = commit;
			}
			committed_.push_back(call);
		}
		LeaveWriters(txn, true);
		txn.open = false;
	}

	/* With no transaction open every call so far has ended: the reference
	 * applies those committed, in the order of their effects. */
	void
	CatchUp()
	{
		std::stable_sort(
		    committed_.begin(), committed_.end(), [](const Recorded &a, const Recorded &b) {
			    return a.effect != b.effect ? a.effect < b.effect : a.effect_order < b.effect_order;
		    });
		for (const Recorded &call : committed_) {
			if (call.granted && call.operation.kind == Operation::kTake && !call.reset &&
			    !call.purge)
				JudgeGrant(call);
			Replay(reference_, call);
		}
		committed_.clear();
	}

	/* A committed call applied to `r`, as the table engine applies it, but
	 * consuming only what the escrow granted. */
	void
	Replay(Reference &r, const Recorded &call) const
	{
		if (call.reset) {
			r.Reset();
			return;
		}
		if (call.purge) {
			if (!r.present ||
			    IsFull(r.Base(call.limit, call.seq, call.at_us), call.limit, call.at_us))
				r.Reset();
			return;
		}
		const Limit &limit = call.limit;
		const Bucket base = r.Base(limit, call.seq, call.at_us);
		const bool sighting = !r.present && StartsBelowFull(limit);
		const Operation &operation = call.operation;
		const ratelimit::core::Decision d =
		    ratelimit::core::Apply(operation, base, limit, call.at_us);
		if (operation.kind == Operation::kTake && call.granted) {
			if (d.allowed) {
				if (d.write || sighting)
					r.Store(d.next, call.seq, base.blocked_until_us);
			} else {
				/* Granted all the same, to follow the escrow. */
				Bucket taken = Refill(base, limit, call.at_us);
				taken.tokens -= operation.request.cost;
				r.Store(taken, call.seq, base.blocked_until_us);
			}
			return;
		}
		if (operation.kind == Operation::kTake || operation.kind == Operation::kPenalize) {
			/* Denied by the escrow: a denial here too, storing only what a
			 * denial stores (the box it starts, a first sighting). */
			const bool starts_box = d.next.blocked_until_us != base.blocked_until_us;
			if (!d.allowed && d.write && (call.boxed || !starts_box || !Has(kFollowBoxes)))
				r.Store(d.next, call.seq, base.blocked_until_us);
			else if (sighting)
				r.Store(NewBucket(limit, call.at_us), call.seq, base.blocked_until_us);
			return;
		}
		/* A refund, or a first sighting recorded: as the table decides them. */
		if (d.write || sighting)
			r.Store(d.next, call.seq, base.blocked_until_us);
	}

	/* Whether `r` grants the take `call` (to within rounding); why not. */
	static bool
	Grants(const Reference &r, const Recorded &call, std::string *why)
	{
		const Limit &limit = call.limit;
		const Request &request = call.operation.request;
		const Bucket base = r.Base(limit, call.seq, call.at_us);
		if (Decide(base, limit, request, call.at_us).allowed)
			return true;
		const Bucket current = Refill(base, limit, call.at_us);
		const bool boxed = request.cost > 0.0 && call.at_us < base.blocked_until_us;
		const double slack = 1e-9 * std::max(1.0, limit.burst);
		if (!boxed && (limit.sliding ? request.cost <= RoomAt(base, limit, call.at_us) + slack
		                             : Admits(current.tokens + slack, limit, request)))
			return true;
		std::ostringstream s;
		s.precision(17);
		s << "it holds " << current.tokens << " at its stamp +" << (current.stamp_us - kT0) << "us";
		if (boxed)
			s << ", in a penalty box until +" << (base.blocked_until_us - kT0) << "us";
		*why = s.str();
		return false;
	}

	/* A take the escrow granted, at its place. */
	void
	JudgeGrant(const Recorded &call)
	{
		if (call.operation.request.cost > 0.0)
			p_.grants++;
		std::string why;
		const bool granted = Grants(reference_, call, &why);
		Verify(p_.granted, granted,
		       granted ? ""
		               : call.text + " under " + Describe(call.limit) + ": the reference " + why);
	}

	void
	CheckInvariants()
	{
		if (!slot_.used)
			return;
		const EscrowState &s = slot_.state;
		std::ostringstream detail;
		detail << "holds=" << s.holds << " prior_holds=" << s.prior_holds
		       << " provisional=" << s.provisional << " pending=" << s.pending
		       << " unsettled=" << s.unsettled;
		Verify(p_.invariants, InvariantsHold(s), detail.str());
	}

	/* With no transaction open: the escrow's balance against the
	 * reference's, under the policy of the moment. */
	void
	CheckQuiet()
	{
		if (AnyOpen())
			return;
		CatchUp();
		if (failed_)
			return;
		const double escrow = slot_.used
		                          ? RoomAt(Available(slot_.state, policy_, now_), policy_, now_)
		                          : StartTokens(policy_);
		const double reference = reference_.Tokens(policy_, now_);
		const double slack = 1e-9 * std::max(1.0, policy_.burst);
		std::ostringstream s;
		s.precision(17);
		s << "escrow " << escrow << ", reference " << reference << " under " << Describe(policy_);
		Verify(p_.balance, escrow <= reference + slack, s.str());
		if (config_.equal)
			Verify(p_.equal, std::fabs(escrow - reference) <= slack, s.str());
	}
};

class EscrowProperty : public ::testing::TestWithParam<Config>
{
};

void
PrintTo(const Config &config, std::ostream *os)
{
	*os << config.name;
}

TEST_P(EscrowProperty, NeverAdmitsWhatSerialisingTheTransactionsWouldNot)
{
	const Config &config = GetParam();
	Properties properties;
	for (int run = 0; run < config.runs; run++)
		Simulation(config, run, properties).Go();
	/* The runs exercise what they claim to. */
	EXPECT_GT(properties.grants, config.runs * config.steps / 40);
	EXPECT_GT(properties.commits, config.runs * config.steps / 40);
	RecordProperty("steps", static_cast<int>(properties.steps));
	RecordProperty("grants", static_cast<int>(properties.grants));
}

/* Everything but redefinitions while transactions are open. */
constexpr unsigned kQuiet = kEverything & ~kRedefineHeld;

const Config kConfigs[] = {
    {"OneTransactionAtATime", 20251125, 150, 200, 1, true, true,
     (kQuiet & ~kResets) | kFollowBoxes},
    {"OneTransactionAtATimeWithEverythingBetween", 20251202, 150, 200, 1, true, true, kQuiet},
    {"OneTransactionAtATimeWithResets", 20251126, 150, 200, 1, true, true,
     kQuiet & ~kRedefine & ~kInitial & ~kPenalties},
    {"OneTransactionAtATimeRedefinedWithResets", 20251201, 150, 200, 1, true, true,
     kQuiet & ~kInitial & ~kPenalties},
    {"Concurrent", 20251127, 150, 200, 4, false, false,
     (kQuiet & ~kRedefine & ~kResets) | kFollowBoxes},
    {"ConcurrentWithResets", 20251128, 150, 200, 4, false, false,
     (kQuiet & ~kRedefine & ~kInitial) | kFollowBoxes},
    {"SlidingOneTransactionAtATime", 20261126, 150, 200, 1, true, true,
     (kQuiet & ~kPenalties & ~kInitial) | kSliding},
    {"SlidingConcurrent", 20261127, 150, 200, 4, false, false,
     (kQuiet & ~kRedefine & ~kPenalties & ~kInitial) | kSliding},
};

INSTANTIATE_TEST_SUITE_P(Configs, EscrowProperty, ::testing::ValuesIn(kConfigs),
                         [](const ::testing::TestParamInfo<Config> &info) {
	                         return std::string(info.param.name);
                         });

/* Everything, as the table engine would answer it: fails today (see the
 * file header).  One transaction at a time, only where the policy is
 * redefined while the transaction is open: the balances are not equal
 * then (the escrow counts on no more than either definition leaves, and
 * may hold less), and with some seeds a denial inside a box the table
 * would not have leaves a balance above the reference's (the second case
 * in the file header).  With several transactions, all three cases. */
const Config kOverAdmitting[] = {
    {"OneTransactionAtATime", 20251129, 150, 200, 1, true, true, kEverything},
    {"Concurrent", 20251130, 150, 200, 4, false, false, kEverything},
};

INSTANTIATE_TEST_SUITE_P(DISABLED_Everything, EscrowProperty, ::testing::ValuesIn(kOverAdmitting),
                         [](const ::testing::TestParamInfo<Config> &info) {
	                         return std::string(info.param.name);
                         });

} /* namespace */
