/*
 * test/unit/token_bucket_property_test.cpp
 *
 * Property checks of the token-bucket core over seeded random and extreme
 * inputs: waiting times are exact to the microsecond, denials change
 * nothing, no NaN ever escapes, Refill is monotone and composes, and a
 * million-call run neither drifts nor admits more than burst + rate * t.
 * Every generator has a fixed seed, so a failure reproduces.
 */
#include "test_helpers.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <random>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kMicros = static_cast<double>(ratelimit::core::kMicrosPerSecond);
constexpr std::int64_t kNow = INT64_C(800000000000000);
/* Waiting times beyond this many µs are not checked to the microsecond. */
constexpr double kCheckableMicros = 1e15;
/* Failures reported in full per property; the rest are only counted. */
constexpr int kReportedFailures = 5;

/* One Decide() call, printable with full precision for reproduction. */
struct Call {
	Limit limit;
	Request request;
	Bucket stored;
	std::int64_t now_us;
};

std::string
Describe(const Call &c)
{
	std::ostringstream s;

	s.precision(17);
	s << "rate=" << c.limit.rate << " burst=" << c.limit.burst << " cost=" << c.request.cost
	  << " reserve=" << c.request.reserve << " debt_capped=" << c.request.debt_capped
	  << " max_reserved=" << c.request.max_reserved << " tokens=" << c.stored.tokens
	  << " stamp_us=" << c.stored.stamp_us << " now_us=" << c.now_us;
	return s.str();
}

/* Counts violations of one property and reports the first few in full. */
class Property
{
public:
	explicit Property(const char *name) : name_(name) {}

	void
	Check(bool holds, const Call &c, const std::string &detail = "")
	{
		checked_++;
		if (holds)
			return;
		if (failed_++ < kReportedFailures)
			ADD_FAILURE() << name_ << " violated: " << Describe(c) << " " << detail;
	}

	~Property()
	{
		EXPECT_EQ(failed_, 0) << name_ << ": " << failed_ << " of " << checked_ << " checks failed";
	}

private:
	const char *name_;
	long checked_ = 0;
	long failed_ = 0;
};

std::int64_t
WholeMicros(double seconds)
{
	return std::llround(seconds * kMicros);
}

std::string
Seconds(const char *what, double v)
{
	std::ostringstream s;

	s.precision(17);
	s << what << "=" << v;
	return s.str();
}

bool
NoNaN(const Decision &d)
{
	return !std::isnan(d.remaining) && !std::isnan(d.retry_after) && !std::isnan(d.reset_after) &&
	       !std::isnan(d.next.tokens);
}

double
LogUniform(std::mt19937_64 &rng, double lo, double hi)
{
	std::uniform_real_distribution<double> u(std::log(lo), std::log(hi));
	return std::exp(u(rng));
}

/*
 * A random valid call: random doubles, so that rounding gets exercised, and
 * rates from one token in twelve days to a million a second, bursts up to a
 * million, so that a microsecond of refill is sometimes worth only a few
 * ulps of the balance.
 */
Call
RandomCall(std::mt19937_64 &rng)
{
	std::uniform_real_distribution<double> unit(0.0, 1.0);
	std::uniform_int_distribution<int> mode(0, 2);
	Call c{};

	c.limit.rate = unit(rng) < 0.1 ? 0.0 : LogUniform(rng, 1e-6, 1e6);
	c.limit.burst = LogUniform(rng, 1e-3, 1e6);
	switch (mode(rng)) {
	case 0:
		c.request = Request{unit(rng) * c.limit.burst, false, false, 0.0};
		break;
	case 1:
		c.request = Request{unit(rng) * 3 * c.limit.burst, true, false, 0.0};
		break;
	default:
		c.request.reserve = true;
		c.request.debt_capped = true;
		c.request.max_reserved = unit(rng) < 0.1 ? 0.0 : unit(rng) * 2 * c.limit.burst;
		c.request.cost = unit(rng) * (c.limit.burst + c.request.max_reserved);
		break;
	}
	double pick = unit(rng);
	if (pick < 0.05)
		c.request.cost = 0.0;
	else if (pick < 0.10 && !c.request.reserve)
		c.request.cost = c.limit.burst;

	pick = unit(rng);
	if (pick < 0.1)
		c.stored.tokens = c.limit.burst;
	else if (pick < 0.15)
		c.stored.tokens = 0.0;
	else if (pick < 0.20)
		c.stored.tokens = 1.5 * c.limit.burst; /* burst was lowered */
	else
		c.stored.tokens = (2 * unit(rng) - 1) * c.limit.burst;

	c.now_us = kNow + std::uniform_int_distribution<std::int64_t>(0, INT64_C(1000000000))(rng);
	pick = unit(rng);
	if (pick < 0.1)
		c.stored.stamp_us = c.now_us;
	else if (pick < 0.2) /* the clock stepped back */
		c.stored.stamp_us =
		    c.now_us + std::uniform_int_distribution<std::int64_t>(1, INT64_C(10000000))(rng);
	else
		c.stored.stamp_us =
		    c.now_us - std::uniform_int_distribution<std::int64_t>(0, INT64_C(100000000))(rng);
	return c;
}

/* ------------------------------------------------------------ random sweep */

constexpr int kSweepCalls = 40000;

TEST(DecideProperty, RandomSweepIsConsistent)
{
	std::mt19937_64 rng(20240611);
	Property valid("generated call is valid");
	Property no_nan("no NaN in any Decision field");
	Property bounded("remaining and next.tokens <= burst, waits >= 0");
	Property denial("denial changes nothing");
	Property grant("grant takes exactly cost from the refilled bucket");

	for (int i = 0; i < kSweepCalls; i++) {
		Call c = RandomCall(rng);
		valid.Check(Validate(c.limit, c.request) == Status::kOk, c);
		Decision d = Decide(c.stored, c.limit, c.request, c.now_us);
		Bucket current = Refill(c.stored, c.limit, c.now_us);

		no_nan.Check(NoNaN(d), c);
		bounded.Check(d.remaining <= c.limit.burst && d.next.tokens <= c.limit.burst &&
		                  d.retry_after >= 0.0 && d.reset_after >= 0.0,
		              c);
		if (!d.allowed)
			denial.Check(!d.write && d.remaining == current.tokens &&
			                 d.next.tokens == current.tokens &&
			                 d.next.stamp_us == current.stamp_us && d.retry_after > 0.0,
			             c);
		else
			grant.Check(d.remaining == current.tokens - c.request.cost &&
			                d.write == (c.request.cost > 0.0) && d.next.tokens == d.remaining &&
			                d.next.stamp_us == std::max(c.stored.stamp_us, c.now_us),
			            c);
	}
}

/* A denied call, retried with the same stored state after retry_after. */
TEST(DecideProperty, DenialRetryAfterIsExactToTheMicrosecond)
{
	std::mt19937_64 rng(7);
	Property enough("allowed at now + retry_after");
	Property minimal("denied at now + retry_after - 1 us");
	int exercised = 0;

	for (int i = 0; i < kSweepCalls; i++) {
		Call c = RandomCall(rng);
		Decision d = Decide(c.stored, c.limit, c.request, c.now_us);

		if (d.allowed || !(d.retry_after * kMicros < kCheckableMicros))
			continue;
		exercised++;
		std::int64_t wait = WholeMicros(d.retry_after);
		enough.Check(Decide(c.stored, c.limit, c.request, c.now_us + wait).allowed, c,
		             Seconds("retry_after", d.retry_after));
		minimal.Check(!Decide(c.stored, c.limit, c.request, c.now_us + wait - 1).allowed, c,
		              Seconds("retry_after", d.retry_after));
	}
	EXPECT_GT(exercised, kSweepCalls / 10);
}

/* A reserved grant: the debt is repaid exactly at retry_after. */
TEST(DecideProperty, ReservationRetryAfterIsExactToTheMicrosecond)
{
	std::mt19937_64 rng(11);
	Property enough("balance >= 0 at now + retry_after");
	int exercised = 0;

	for (int i = 0; i < kSweepCalls; i++) {
		Call c = RandomCall(rng);
		Decision d = Decide(c.stored, c.limit, c.request, c.now_us);

		if (!d.allowed || !(d.retry_after > 0.0) || !(d.retry_after * kMicros < kCheckableMicros))
			continue;
		exercised++;
		std::int64_t wait = WholeMicros(d.retry_after);
		enough.Check(Refill(d.next, c.limit, c.now_us + wait).tokens >= 0.0, c,
		             Seconds("retry_after", d.retry_after));
	}
	EXPECT_GT(exercised, kSweepCalls / 20);
}

/* The state after the call is full again exactly at reset_after. */
TEST(DecideProperty, ResetAfterIsExactToTheMicrosecond)
{
	std::mt19937_64 rng(13);
	Property full("full at now + reset_after");
	Property infinite("reset_after is +inf only with rate 0");
	int exercised = 0;

	for (int i = 0; i < kSweepCalls; i++) {
		Call c = RandomCall(rng);
		Decision d = Decide(c.stored, c.limit, c.request, c.now_us);

		infinite.Check(!std::isinf(d.reset_after) || c.limit.rate == 0.0, c);
		if (!(d.reset_after > 0.0) || !(d.reset_after * kMicros < kCheckableMicros))
			continue;
		exercised++;
		std::int64_t wait = WholeMicros(d.reset_after);
		/* What is stored after the call: the new state for a grant; a denial
		 * writes nothing, so the old state refills from its own stamp. */
		const Bucket &persisted = d.write ? d.next : c.stored;
		full.Check(Refill(persisted, c.limit, c.now_us + wait).tokens == c.limit.burst, c,
		           Seconds("reset_after", d.reset_after));
	}
	EXPECT_GT(exercised, kSweepCalls / 2);
}

/* ---------------------------------------------------------- Refill algebra */

TEST(RefillProperty, MonotoneComposableAndCapped)
{
	std::mt19937_64 rng(17);
	std::uniform_int_distribution<std::int64_t> offset(-INT64_C(10000000), INT64_C(200000000));
	Property monotone("Refill(b, t1) <= Refill(b, t2) for t1 <= t2");
	Property composes("Refill(Refill(b, t1), t2) == Refill(b, t2)");
	Property capped("tokens <= burst, stamp == max(stamp, now)");

	for (int i = 0; i < kSweepCalls; i++) {
		Call c = RandomCall(rng);
		std::int64_t t1 = c.stored.stamp_us + offset(rng);
		std::int64_t t2 = c.stored.stamp_us + offset(rng);
		if (t1 > t2)
			std::swap(t1, t2);
		Bucket at1 = Refill(c.stored, c.limit, t1);
		Bucket at2 = Refill(c.stored, c.limit, t2);
		Bucket both = Refill(at1, c.limit, t2);
		double scale = std::max(c.limit.burst, std::fabs(c.stored.tokens));

		monotone.Check(at1.tokens <= at2.tokens, c);
		composes.Check(std::fabs(both.tokens - at2.tokens) <= 1e-9 * scale &&
		                   both.stamp_us == at2.stamp_us,
		               c, Seconds("difference", both.tokens - at2.tokens));
		capped.Check(at1.tokens <= c.limit.burst && at2.tokens <= c.limit.burst &&
		                 at1.stamp_us == std::max(c.stored.stamp_us, t1) &&
		                 at2.stamp_us == std::max(c.stored.stamp_us, t2),
		             c);
	}
}

/* ---------------------------------------------------------- extreme numbers */

TEST(DecideProperty, ExtremeNumbersNeverGiveNaN)
{
	const double max = std::numeric_limits<double>::max();
	const double denorm = std::numeric_limits<double>::denorm_min();
	const double rates[] = {0.0, denorm, 1e-300, 1e-12, 1.0 / 3.0, 1.0, 1e12, 1e300, max};
	const double bursts[] = {denorm, 1e-300, 1e-12, 1.0, 1e12, 1e300, max};
	const double costs[] = {0.0, denorm, 1e-12, 1.0, 1e12, 1e300, max};
	const double tokens[] = {-max, -1e300, -1.0, 0.0, 1e-12, 1.0, 1e300, max};
	const double caps[] = {0.0, 1.0, 1e300, max};
	const std::int64_t elapsed[] = {0, 1, 1000000, INT64_C(1000000000000000), -1000000};
	Property no_nan("no NaN in any Decision field");
	Property sane("remaining <= burst, waits >= 0");

	for (double rate : rates)
		for (double burst : bursts)
			for (double cost : costs)
				for (double tok : tokens)
					for (std::int64_t e : elapsed)
						for (int m = 0; m < 6; m++) {
							Request r{cost, m > 0, m > 1, m > 1 ? caps[m - 2] : 0.0};
							Call c{Limit{rate, burst}, r, Bucket{tok, kNow - e}, kNow};

							if (Validate(c.limit, c.request) != Status::kOk)
								continue;
							Decision d = Decide(c.stored, c.limit, c.request, c.now_us);
							no_nan.Check(NoNaN(d), c);
							sane.Check(d.remaining <= burst && d.retry_after >= 0.0 &&
							               d.reset_after >= 0.0,
							           c);
						}
}

/* ---------------------------------------------------------------- no drift */

struct DriftCase {
	const char *name;
	double rate;
	double burst;
	double cost;
	std::int64_t min_interval_us; /* calls come every [min, max] µs */
	std::int64_t max_interval_us;
};

void
PrintTo(const DriftCase &c, std::ostream *os)
{
	*os << c.name;
}

class NoDrift : public ::testing::TestWithParam<DriftCase>
{
};

constexpr int kDriftCalls = 1000000;

/*
 * One bucket under constant demand, stored only when a call writes (as the
 * table is).  At every call the tokens granted so far stay within
 * burst + rate * t; at the end, granted + what is left in the bucket is
 * exactly burst + rate * T, so nothing was lost or minted along the way.
 */
TEST_P(NoDrift, GrantedMatchesBurstPlusRateTimesT)
{
	const DriftCase &p = GetParam();
	const Limit limit{p.rate, p.burst};
	const Request take{p.cost, false, false, 0.0};
	std::mt19937_64 rng(42);
	std::uniform_int_distribution<std::int64_t> interval(p.min_interval_us, p.max_interval_us);
	const std::int64_t start = kNow;
	std::int64_t now = start;
	Bucket stored = FullBucket(limit, start);
	double granted = 0.0;
	long grants = 0;
	long over_bound = 0;
	double worst_excess = -kInf;

	for (int i = 0; i < kDriftCalls; i++) {
		if (i > 0)
			now += interval(rng);
		Decision d = Decide(stored, limit, take, now);
		if (d.write)
			stored = d.next;
		if (d.allowed) {
			granted += p.cost;
			grants++;
		}
		double bound = p.burst + p.rate * (static_cast<double>(now - start) / kMicros);
		if (granted > bound + 1e-6) {
			over_bound++;
			worst_excess = std::max(worst_excess, granted - bound);
		}
	}

	double t = static_cast<double>(now - start) / kMicros;
	double ideal = p.burst + p.rate * t;
	double left = Refill(stored, limit, now).tokens;

	EXPECT_EQ(over_bound, 0) << "admission bound exceeded, worst by " << worst_excess;
	EXPECT_NEAR(granted + left, ideal, 1e-6) << "tokens lost or minted";
	EXPECT_LE(granted, ideal + 1e-6);
	EXPECT_GT(granted, ideal - std::max(1.0, p.cost)) << "T=" << t << "s";
	/* the run really is rate-limited, not mostly granted or mostly idle */
	EXPECT_LT(grants, kDriftCalls / 2);
	EXPECT_GT(grants, 10);
}

const DriftCase kDriftCases[] = {
    {"Rate7p3Cost1Every97us", 7.3, 20, 1, 97, 97},
    {"Rate7p3Cost1RandomIntervals", 7.3, 20, 1, 1, 200},
    {"Rate7p3Cost0p37RandomIntervals", 7.3, 20, 0.37, 1, 200},
    {"Rate1000Cost3Every97us", 1000, 20, 3, 97, 97},
    {"RateOneThirdCost1RandomIntervals", 1.0 / 3.0, 20, 1, 1, 200},
    {"RateOneThirdCost0p37Every1us", 1.0 / 3.0, 5, 0.37, 1, 1},
};

INSTANTIATE_TEST_SUITE_P(Cases, NoDrift, ::testing::ValuesIn(kDriftCases),
                         [](const ::testing::TestParamInfo<DriftCase> &info) {
	                         return std::string(info.param.name);
                         });

} /* namespace */
