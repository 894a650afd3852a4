/*
 * test/unit/escrow_harness.hpp
 *
 * The escrow as an engine drives it, for the tests: one key's slot (free,
 * or holding a state), and transactions that keep their records with the
 * subtransaction that made each, commit them oldest first and undo them
 * newest first, as the memory engine's undo log does.
 */
#ifndef RATELIMIT_TEST_ESCROW_HARNESS_HPP
#define RATELIMIT_TEST_ESCROW_HARNESS_HPP

#include "test_helpers.hpp"

#include <cstdint>
#include <vector>

#include "escrow.hpp"
#include "operation.hpp"

namespace escrow_harness {

/* The SQL tests' clock: ratelimit.fixed_clock = 2000000000. */
constexpr std::int64_t kSecond = ratelimit::core::kMicrosPerSecond;
constexpr std::int64_t kT0 = INT64_C(2000000000) * kSecond;

using ratelimit::core::EscrowEnd;
using ratelimit::core::EscrowRecord;
using ratelimit::core::EscrowState;
using ratelimit::core::EscrowStep;
using ratelimit::core::Operation;

/* One key's slot. */
struct Slot {
	bool used = false;
	bool kept = false; /* the engine's mark: not forgotten while set */
	int kept_by = 0;   /* who set it, to take it back (0: nobody can) */
	EscrowState state{};
};

/* A transaction's records, each with the limit it was decided under and
 * the subtransaction that made it. */
struct Transaction {
	struct Entry {
		EscrowRecord record;
		Limit limit;
		int subxact;
	};
	std::vector<Entry> entries;
	int subxact = 1; /* the current one; 1 is the top level */
	int next_subxact = 2;
};

/* Applies what Finish left to the engine. */
inline void
Ended(Slot &slot, const EscrowEnd &end)
{
	if (end.keep) {
		slot.kept = true;
		slot.kept_by = 0;
	}
	if (end.forget)
		slot.used = false;
}

/* `operation` under `limit` at `now_us` on `slot`, in `txn` (NULL: on its
 * own, committed at once). */
inline EscrowStep
Call(Slot &slot, Transaction *txn, const Operation &operation, const Limit &limit,
     std::int64_t now_us)
{
	EscrowState unseen = ratelimit::core::UnseenEscrow(limit);
	EscrowState &state = slot.used ? slot.state : unseen;
	const EscrowStep step = ratelimit::core::Decide(state, operation, limit, now_us);
	if (!step.recorded)
		return step;
	if (!slot.used) {
		slot.state = unseen;
		slot.used = true;
		slot.kept = false;
		slot.kept_by = 0;
	}
	if (step.record.relimits) {
		slot.kept = false; /* judged by its limit from now on */
		slot.kept_by = 0;
	}
	if (txn != nullptr) {
		txn->entries.push_back(Transaction::Entry{step.record, limit, txn->subxact});
	} else {
		Ended(slot, ratelimit::core::Finish(slot.state, step.record, limit, true));
	}
	return step;
}

/* Ends the records of subtransaction `from` and those inside it: undone
 * newest first at an abort; at a commit, the parent's. */
inline void
EndSubtransaction(Slot &slot, Transaction &txn, int from, bool commit, int parent)
{
	if (commit) {
		for (Transaction::Entry &entry : txn.entries)
			if (entry.subxact >= from)
				entry.subxact = parent;
		return;
	}
	while (!txn.entries.empty() && txn.entries.back().subxact >= from) {
		const Transaction::Entry &entry = txn.entries.back();
		Ended(slot, ratelimit::core::Finish(slot.state, entry.record, entry.limit, false));
		txn.entries.pop_back();
	}
}

/* Ends the whole transaction: commits oldest first, aborts newest first. */
inline void
End(Slot &slot, Transaction &txn, bool commit)
{
	if (commit) {
		for (const Transaction::Entry &entry : txn.entries)
			Ended(slot, ratelimit::core::Finish(slot.state, entry.record, entry.limit, true));
		txn.entries.clear();
	} else {
		EndSubtransaction(slot, txn, 1, false, 0);
	}
	txn.subxact = 1;
}

/* A reset of the key in `txn`: false (and nothing kept) when it is absent. */
inline bool
Reset(Slot &slot, Transaction &txn)
{
	if (!slot.used || slot.state.absent)
		return false;
	const Limit limit = slot.state.limit;
	txn.entries.push_back(
	    Transaction::Entry{ratelimit::core::RecordReset(slot.state), limit, txn.subxact});
	return true;
}

inline Operation
Take(double cost)
{
	return Operation{Operation::kTake, Request::Plain(cost), 0.0};
}

inline Operation
Check(double cost)
{
	return Operation{Operation::kCheck, Request::Plain(cost), 0.0};
}

inline Operation
GiveBack(double amount)
{
	return Operation{Operation::kRefund, Request::Plain(0.0), amount};
}

} /* namespace escrow_harness */

#endif
