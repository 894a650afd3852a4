/*
 * test/load/load.cpp
 *
 * The load generator: N libpq connections, one thread each, hammer
 * rate_limit_take() on one or many keys at READ COMMITTED, REPEATABLE READ
 * or SERIALIZABLE, ending a random fraction of transactions with ROLLBACK.
 * It then checks the concurrency contract under real concurrency:
 *
 *   - admission bound: for every key, committed grants never exceed
 *     burst + rate*T (+1 token of slack), T being the length of the run;
 *   - under overload (one key) the limiter grants what it may: at least
 *     F * (burst + rate*T);
 *   - zero errors of any kind: no 40001, no 23505, no timeouts.
 *
 * One result line goes to stdout; exit 0 on PASS, 1 on FAIL, 2 on usage or
 * connection problems.  `make load` builds it; see --help for the options.
 */
#include <libpq-fe.h>

#include <getopt.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

/*
 * A hung server must not hang the tool: every statement is bounded, and the
 * deadline is checked between transactions, so a run ends at most this long
 * after --seconds.
 */
constexpr const char *kStatementTimeout = "30s";
constexpr const char *kConnectTimeout = "10";

constexpr const char *kTakeSql = "SELECT allowed FROM rate_limit_take($1, $2, $3, $4, $5)";
/* With --storage: the take of a policy defined with that storage. */
constexpr const char *kPolicyTakeSql = "SELECT allowed FROM rate_limit_take($1, $2, $3)";
/* With --report-only as well: true for a grant, false for a would-be denial
 * (allowed, with a wait: nothing was taken), NULL (an error) for a refusal,
 * which a report-only policy never gives. */
constexpr const char *kReportOnlyTakeSql =
    "SELECT CASE WHEN allowed THEN retry_after = 0 END FROM rate_limit_take($1, $2, $3)";
constexpr const char *kDefineSql =
    "SELECT rate_limit_define($1, $2, '1 second', $3, storage => $4, enforce => $5)";

/* Errors that carry no SQLSTATE get these labels in the per-code counts. */
constexpr const char *kNoSqlstate = "no-sqlstate";
constexpr const char *kBadResult = "bad-result";
constexpr const char *kSilentRollback = "commit-rolled-back";

/* Exit statuses. */
constexpr int kExitPass = 0;
constexpr int kExitFail = 1;
constexpr int kExitUsage = 2;

struct IsolationLevel {
	const char *option; /* as given to --isolation and printed */
	const char *begin_sql;
};

const IsolationLevel kIsolationLevels[] = {
    {"rc", "BEGIN ISOLATION LEVEL READ COMMITTED"},
    {"rr", "BEGIN ISOLATION LEVEL REPEATABLE READ"},
    {"serializable", "BEGIN ISOLATION LEVEL SERIALIZABLE"},
};

struct Options {
	std::string conninfo; /* "" = libpq's environment */
	int clients = 8;
	double seconds = 5.0;
	int keys = 1;
	std::string name; /* "" = a fresh name, so buckets start full */
	const IsolationLevel *isolation = &kIsolationLevels[0];
	double rollback = 0.10;
	double cost = 1.0;
	double rate = 200.0;
	double burst = 100.0;
	double lower_bound = 0.98;
	uint64_t seed = 0;
	bool seed_given = false;
	std::string tolerate;     /* a SQLSTATE counted and printed, not failed on */
	std::string storage;      /* "" = explicit limits; else a policy with this storage */
	bool report_only = false; /* the policy is report-only: denials are would-be denials */
};

/* What one client saw.  Only its own thread writes it until join(). */
struct ClientStats {
	long transactions = 0;
	long rollbacks = 0;                 /* chosen ROLLBACKs, not error recovery */
	long denials = 0;                   /* committed transactions that were denied */
	std::vector<long> grants;           /* committed grants per key */
	std::map<std::string, long> errors; /* count per SQLSTATE */
	std::string first_error;
	Clock::time_point first_error_at;
	Clock::time_point finished;
};

/*
 * The start barrier: every thread reports ready, the main thread starts the
 * clock only once all are, then releases them together, so connection and
 * thread start-up never count towards T.
 */
struct StartGate {
	std::mutex mutex;
	std::condition_variable cv;
	int ready = 0;
	bool open = false;
	Clock::time_point start;
	Clock::time_point deadline;
};

void
usage(FILE *out)
{
	fprintf(
	    out,
	    "Usage: ratelimit_load [OPTION]...\n"
	    "Load generator for rate_limit_take(): checks the admission bound and zero errors.\n"
	    "\n"
	    "  --conninfo STR       libpq connection string (default: \"\", i.e. PGHOST, PGPORT, ...)\n"
	    "  --clients N          connections, one thread each (default 8)\n"
	    "  --seconds S          run time, fractions allowed (default 5)\n"
	    "  --keys K             keys k0..k<K-1>, one chosen uniformly per transaction (default 1)\n"
	    "  --name STR           limit name (default load-<pid>-<epoch>, so buckets start full)\n"
	    "  --isolation LEVEL    rc, rr or serializable (default rc)\n"
	    "  --rollback P         fraction of transactions ended with ROLLBACK (default 0.10)\n"
	    "  --cost C             tokens per call (default 1)\n"
	    "  --rate R             tokens per second (default 200)\n"
	    "  --burst B            bucket capacity (default 100)\n"
	    "  --lower-bound F      with one key, require grants >= F*(burst+rate*T);\n"
	    "                       0 skips the check (default 0.98)\n"
	    "  --seed N             base of the per-thread random seeds (default: from pid and time)\n"
	    "  --tolerate SQLSTATE  count errors of this SQLSTATE (e.g. 40001) and print their rate,\n"
	    "                       without failing on them\n"
	    "  --storage ENGINE     define policy --name with --rate per second, --burst and this\n"
	    "                       storage (table or memory), and take by policy\n"
	    "  --report-only        with --storage: the policy is report-only (enforce false);\n"
	    "                       every take must be allowed, would-be denials count as denials\n"
	    "  --help               show this help\n"
	    "\n"
	    "Exit status: 0 PASS, 1 FAIL, 2 usage or connection problem.\n");
}

bool
parse_double(const char *text, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(text, &end);
	return errno == 0 && end != text && *end == '\0' && std::isfinite(*out);
}

bool
parse_int(const char *text, long min, long max, long *out)
{
	char *end;

	errno = 0;
	*out = strtol(text, &end, 10);
	return errno == 0 && end != text && *end == '\0' && *out >= min && *out <= max;
}

/* Returns -1 when the options are fine, else the exit status to use. */
int
parse_options(int argc, char **argv, Options *opts)
{
	enum {
		kOptConninfo = 256,
		kOptClients,
		kOptSeconds,
		kOptKeys,
		kOptName,
		kOptIsolation,
		kOptRollback,
		kOptCost,
		kOptRate,
		kOptBurst,
		kOptLowerBound,
		kOptSeed,
		kOptTolerate,
		kOptStorage,
		kOptReportOnly,
		kOptHelp
	};
	static const struct option long_options[] = {
	    {"conninfo", required_argument, nullptr, kOptConninfo},
	    {"clients", required_argument, nullptr, kOptClients},
	    {"seconds", required_argument, nullptr, kOptSeconds},
	    {"keys", required_argument, nullptr, kOptKeys},
	    {"name", required_argument, nullptr, kOptName},
	    {"isolation", required_argument, nullptr, kOptIsolation},
	    {"rollback", required_argument, nullptr, kOptRollback},
	    {"cost", required_argument, nullptr, kOptCost},
	    {"rate", required_argument, nullptr, kOptRate},
	    {"burst", required_argument, nullptr, kOptBurst},
	    {"lower-bound", required_argument, nullptr, kOptLowerBound},
	    {"seed", required_argument, nullptr, kOptSeed},
	    {"tolerate", required_argument, nullptr, kOptTolerate},
	    {"storage", required_argument, nullptr, kOptStorage},
	    {"report-only", no_argument, nullptr, kOptReportOnly},
	    {"help", no_argument, nullptr, kOptHelp},
	    {nullptr, 0, nullptr, 0},
	};
	int c;

	while ((c = getopt_long(argc, argv, "", long_options, nullptr)) != -1) {
		long n;
		double d;
		bool ok = true;

		switch (c) {
		case kOptConninfo:
			opts->conninfo = optarg;
			break;
		case kOptClients:
			ok = parse_int(optarg, 1, 10000, &n);
			opts->clients = static_cast<int>(n);
			break;
		case kOptSeconds:
			ok = parse_double(optarg, &d) && d > 0 && d <= 86400;
			opts->seconds = d;
			break;
		case kOptKeys:
			ok = parse_int(optarg, 1, 100000000, &n);
			opts->keys = static_cast<int>(n);
			break;
		case kOptName:
			opts->name = optarg;
			break;
		case kOptTolerate:
			opts->tolerate = optarg;
			break;
		case kOptStorage:
			ok = strcmp(optarg, "table") == 0 || strcmp(optarg, "memory") == 0;
			opts->storage = optarg;
			break;
		case kOptReportOnly:
			opts->report_only = true;
			break;
		case kOptIsolation:
			ok = false;
			for (const IsolationLevel &level : kIsolationLevels) {
				if (strcmp(optarg, level.option) == 0) {
					opts->isolation = &level;
					ok = true;
				}
			}
			break;
		case kOptRollback:
			ok = parse_double(optarg, &d) && d >= 0 && d <= 1;
			opts->rollback = d;
			break;
		case kOptCost:
			ok = parse_double(optarg, &d) && d >= 0;
			opts->cost = d;
			break;
		case kOptRate:
			ok = parse_double(optarg, &d) && d >= 0;
			opts->rate = d;
			break;
		case kOptBurst:
			ok = parse_double(optarg, &d) && d > 0;
			opts->burst = d;
			break;
		case kOptLowerBound:
			ok = parse_double(optarg, &d) && d >= 0 && d <= 1;
			opts->lower_bound = d;
			break;
		case kOptSeed:
			ok = parse_int(optarg, 0, LONG_MAX, &n);
			opts->seed = static_cast<uint64_t>(n);
			opts->seed_given = true;
			break;
		case kOptHelp:
			usage(stdout);
			return kExitPass;
		default:
			/* getopt_long has already said what is wrong */
			fprintf(stderr, "Try \"ratelimit_load --help\" for more information.\n");
			return kExitUsage;
		}
		if (!ok) {
			fprintf(stderr, "ratelimit_load: invalid value for --%s: \"%s\"\n",
			        long_options[c - kOptConninfo].name, optarg);
			return kExitUsage;
		}
	}
	if (optind < argc) {
		fprintf(stderr,
		        "ratelimit_load: unexpected argument \"%s\"\n"
		        "Try \"ratelimit_load --help\" for more information.\n",
		        argv[optind]);
		return kExitUsage;
	}
	if (opts->report_only && opts->storage.empty()) {
		fprintf(stderr, "ratelimit_load: --report-only needs --storage\n");
		return kExitUsage;
	}
	if (opts->cost > opts->burst) {
		/* the contract makes this an error on every call: nothing to measure */
		fprintf(stderr, "ratelimit_load: --cost must not exceed --burst\n");
		return kExitUsage;
	}
	if (opts->name.empty())
		opts->name = "load-" + std::to_string(getpid()) + "-" +
		             std::to_string(static_cast<long long>(time(nullptr)));
	if (!opts->seed_given)
		opts->seed = (static_cast<uint64_t>(getpid()) << 32) ^ static_cast<uint64_t>(time(nullptr));
	return -1;
}

/* One line, no trailing newline: libpq messages end in "\n" and may span lines. */
std::string
one_line(const char *message)
{
	std::string line(message ? message : "");

	std::replace(line.begin(), line.end(), '\n', ' ');
	while (!line.empty() && line.back() == ' ')
		line.pop_back();
	return line;
}

/* Counts one error under `sqlstate` and keeps its message if it is the first. */
void
record_error(ClientStats *stats, const char *sqlstate, const char *what, const std::string &message)
{
	stats->errors[sqlstate]++;
	if (stats->first_error.empty()) {
		stats->first_error = std::string(what) + ": " + message;
		stats->first_error_at = Clock::now();
	}
}

/* Counts a failed statement by its SQLSTATE; `res` may be null. */
void
record_pq_error(ClientStats *stats, PGconn *conn, const PGresult *res, const char *what)
{
	const char *sqlstate = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
	const char *message = res ? PQresultErrorMessage(res) : "";

	/* a lost connection or an out-of-memory result has no SQLSTATE */
	if (message == nullptr || *message == '\0')
		message = PQerrorMessage(conn);
	record_error(stats, sqlstate ? sqlstate : kNoSqlstate, what, one_line(message));
}

/*
 * Runs a command that returns no rows.  With `expected_tag`, the command
 * tag must match too: COMMIT of a transaction that is already aborted
 * "succeeds" with the tag ROLLBACK, which must not count as a commit.
 */
bool
run_command(PGconn *conn, ClientStats *stats, const char *sql, const char *expected_tag)
{
	PGresult *res = PQexec(conn, sql);
	bool ok = res != nullptr && PQresultStatus(res) == PGRES_COMMAND_OK;

	if (!ok)
		record_pq_error(stats, conn, res, sql);
	else if (expected_tag && strcmp(PQcmdStatus(res), expected_tag) != 0) {
		record_error(stats, kSilentRollback, sql, std::string("command tag ") + PQcmdStatus(res));
		ok = false;
	}
	PQclear(res);
	return ok;
}

/*
 * After an error: end whatever transaction is open, so the next one starts
 * clean.  Returns false when the connection is gone and the client must stop
 * (the error that killed it has been counted already).
 */
bool
recover(PGconn *conn, ClientStats *stats)
{
	if (PQstatus(conn) != CONNECTION_OK)
		return false;
	/* a failed COMMIT has already ended the transaction */
	if (PQtransactionStatus(conn) != PQTRANS_IDLE)
		run_command(conn, stats, "ROLLBACK", nullptr);
	return PQstatus(conn) == CONNECTION_OK;
}

/* Runs the prepared take; on success sets *allowed from the single row. */
bool
take(PGconn *conn, ClientStats *stats, int nparams, const char *const values[5], bool *allowed)
{
	PGresult *res = PQexecPrepared(conn, "take", nparams, values, nullptr, nullptr, 0);
	bool ok = false;

	if (res == nullptr || PQresultStatus(res) != PGRES_TUPLES_OK)
		record_pq_error(stats, conn, res, "rate_limit_take");
	else if (PQntuples(res) != 1 || PQnfields(res) != 1)
		record_error(stats, kBadResult, "rate_limit_take",
		             "expected one row and one column, got " + std::to_string(PQntuples(res)) +
		                 " rows and " + std::to_string(PQnfields(res)) + " columns");
	else if (PQgetisnull(res, 0, 0))
		record_error(stats, kBadResult, "rate_limit_take",
		             "allowed is null (with --report-only: a take was refused)");
	else {
		const char *value = PQgetvalue(res, 0, 0);

		ok = strcmp(value, "t") == 0 || strcmp(value, "f") == 0;
		if (ok)
			*allowed = value[0] == 't';
		else
			record_error(stats, kBadResult, "rate_limit_take",
			             std::string("allowed is \"") + value + "\"");
	}
	PQclear(res);
	return ok;
}

/* The body of one client thread: transactions until the deadline. */
void
run_client(PGconn *conn, int index, const Options &opts, const std::vector<std::string> &key_names,
           const std::string params[3], StartGate *gate, ClientStats *stats)
{
	std::mt19937_64 rng(opts.seed + static_cast<uint64_t>(index) * 0x9E3779B97F4A7C15ULL);
	std::uniform_int_distribution<int> pick_key(0, opts.keys - 1);
	std::uniform_real_distribution<double> coin(0.0, 1.0);
	const char *values[5] = {opts.name.c_str(), nullptr, params[0].c_str(), params[1].c_str(),
	                         params[2].c_str()};
	Clock::time_point deadline;

	stats->grants.assign(static_cast<size_t>(opts.keys), 0);
	{
		std::unique_lock<std::mutex> lock(gate->mutex);

		gate->ready++;
		gate->cv.notify_all();
		gate->cv.wait(lock, [gate] { return gate->open; });
		deadline = gate->deadline;
	}

	while (Clock::now() < deadline) {
		int key = pick_key(rng);
		bool end_with_rollback = coin(rng) < opts.rollback;
		bool allowed = false;

		stats->transactions++;
		values[1] = key_names[static_cast<size_t>(key)].c_str();

		if (!run_command(conn, stats, opts.isolation->begin_sql, nullptr) ||
		    !take(conn, stats, opts.storage.empty() ? 5 : 3, values, &allowed)) {
			if (!recover(conn, stats))
				break;
			continue;
		}
		if (end_with_rollback) {
			/* the contract says this refunds the tokens: never count them */
			stats->rollbacks++;
			if (!run_command(conn, stats, "ROLLBACK", "ROLLBACK") && !recover(conn, stats))
				break;
			continue;
		}
		if (!run_command(conn, stats, "COMMIT", "COMMIT")) {
			/* a grant counts only once committed */
			if (!recover(conn, stats))
				break;
			continue;
		}
		if (allowed)
			stats->grants[static_cast<size_t>(key)]++;
		else
			stats->denials++;
	}
	stats->finished = Clock::now();
}

/* Opens and prepares one connection; prints why and returns null on failure. */
PGconn *
open_client(const Options &opts, int index)
{
	/*
	 * The user's conninfo comes last so that it overrides our defaults;
	 * empty values fall back to libpq's environment (PGHOST, ...).
	 */
	const char *keywords[] = {"fallback_application_name", "connect_timeout", "dbname", nullptr};
	const char *values[] = {"ratelimit_load", getenv("PGCONNECT_TIMEOUT") ? "" : kConnectTimeout,
	                        opts.conninfo.c_str(), nullptr};
	PGconn *conn = PQconnectdbParams(keywords, values, 1);
	std::string setup = std::string("SET statement_timeout = '") + kStatementTimeout + "'";
	const Oid param_types[5] = {25, 25, 701, 701, 701}; /* text, text, float8 x 3 */
	PGresult *res;

	if (conn == nullptr || PQstatus(conn) != CONNECTION_OK) {
		fprintf(stderr, "ratelimit_load: connection %d failed: %s\n", index,
		        conn ? one_line(PQerrorMessage(conn)).c_str() : "out of memory");
		PQfinish(conn);
		return nullptr;
	}
	res = PQexec(conn, setup.c_str());
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		fprintf(stderr, "ratelimit_load: connection %d: %s failed: %s\n", index, setup.c_str(),
		        one_line(PQerrorMessage(conn)).c_str());
		PQclear(res);
		PQfinish(conn);
		return nullptr;
	}
	PQclear(res);
	const char *take_sql = opts.storage.empty() ? kTakeSql
	                       : opts.report_only   ? kReportOnlyTakeSql
	                                            : kPolicyTakeSql;
	res = PQprepare(conn, "take", take_sql, opts.storage.empty() ? 5 : 3, param_types);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		fprintf(stderr,
		        "ratelimit_load: connection %d: cannot prepare %s: %s\n"
		        "ratelimit_load: is the extension installed (CREATE EXTENSION ratelimit)?\n",
		        index, take_sql, one_line(PQerrorMessage(conn)).c_str());
		PQclear(res);
		PQfinish(conn);
		return nullptr;
	}
	PQclear(res);
	return conn;
}

/* Full precision, so the server sees exactly the numbers we check against. */
std::string
format_double(double value)
{
	char buf[64];

	snprintf(buf, sizeof(buf), "%.17g", value);
	return buf;
}

} /* namespace */

int
main(int argc, char **argv)
{
	Options opts;
	int status = parse_options(argc, argv, &opts);

	if (status >= 0)
		return status;

	std::vector<std::string> key_names;

	for (int i = 0; i < opts.keys; i++)
		key_names.push_back("k" + std::to_string(i));
	const std::string params[3] = {format_double(opts.cost), format_double(opts.rate),
	                               format_double(opts.burst)};

	/* Connect everyone before anyone starts: a failure is a setup problem. */
	std::vector<PGconn *> conns;

	for (int i = 0; i < opts.clients; i++) {
		PGconn *conn = open_client(opts, i);

		if (conn == nullptr) {
			for (PGconn *c : conns)
				PQfinish(c);
			return kExitUsage;
		}
		conns.push_back(conn);
	}

	/* The policy the clients take by, defined before anyone starts. */
	if (!opts.storage.empty()) {
		const char *values[5] = {opts.name.c_str(), params[1].c_str(), params[2].c_str(),
		                         opts.storage.c_str(), opts.report_only ? "false" : "true"};
		PGresult *res = PQexecParams(conns[0], kDefineSql, 5, nullptr, values, nullptr, nullptr, 0);
		const bool ok = PQresultStatus(res) == PGRES_TUPLES_OK;
		if (!ok)
			fprintf(stderr, "ratelimit_load: cannot define policy %s: %s\n", opts.name.c_str(),
			        one_line(PQerrorMessage(conns[0])).c_str());
		PQclear(res);
		if (!ok) {
			for (PGconn *c : conns)
				PQfinish(c);
			return kExitUsage;
		}
	}

	StartGate gate;
	std::vector<ClientStats> stats(static_cast<size_t>(opts.clients));
	std::vector<std::thread> threads;

	for (int i = 0; i < opts.clients; i++)
		threads.emplace_back(run_client, conns[static_cast<size_t>(i)], i, std::cref(opts),
		                     std::cref(key_names), params, &gate, &stats[static_cast<size_t>(i)]);
	{
		std::unique_lock<std::mutex> lock(gate.mutex);

		gate.cv.wait(lock, [&] { return gate.ready == opts.clients; });
		gate.start = Clock::now();
		gate.deadline = gate.start + std::chrono::duration_cast<Clock::duration>(
		                                 std::chrono::duration<double>(opts.seconds));
		gate.open = true;
	}
	gate.cv.notify_all();
	for (std::thread &t : threads)
		t.join();
	for (PGconn *c : conns)
		PQfinish(c);

	/* Add it all up. */
	long transactions = 0;
	long rollbacks = 0;
	long denials = 0;
	long total_grants = 0;
	long error_count = 0;
	long tolerated = 0;
	std::vector<long> grants(static_cast<size_t>(opts.keys), 0);
	std::map<std::string, long> errors;
	const ClientStats *first_error = nullptr;
	Clock::time_point finished = gate.start;

	for (const ClientStats &s : stats) {
		transactions += s.transactions;
		rollbacks += s.rollbacks;
		denials += s.denials;
		for (size_t k = 0; k < grants.size(); k++)
			grants[k] += s.grants[k];
		for (const auto &e : s.errors) {
			if (!opts.tolerate.empty() && e.first == opts.tolerate) {
				tolerated += e.second;
				continue;
			}
			errors[e.first] += e.second;
			error_count += e.second;
		}
		if (!s.first_error.empty() &&
		    (first_error == nullptr || s.first_error_at < first_error->first_error_at))
			first_error = &s;
		finished = std::max(finished, s.finished);
	}

	/*
	 * The checks.  Every take happened inside [start, finished], and each
	 * bucket was full at most at the start, so granted cost <= burst +
	 * rate*T exactly; one token of slack covers floating point and the
	 * difference between our clock and the server's.  The lower bound uses
	 * only the time up to the deadline, when every client was still asking:
	 * a last transaction that overruns it (a lock wait, a slow COMMIT) loosens
	 * the upper bound, as it must, but must not raise the lower one.  Bounds
	 * are printed in grants (calls) rather than tokens.
	 */
	double elapsed = std::chrono::duration<double>(finished - gate.start).count();
	double ceiling = opts.burst + opts.rate * elapsed;
	double lower_window = std::min(elapsed, opts.seconds);
	double cost = opts.cost > 0 ? opts.cost : 1.0;
	double bound = opts.cost > 0 ? (ceiling + 1.0) / cost : HUGE_VAL;
	double lower = opts.lower_bound * (opts.burst + opts.rate * lower_window) / cost;
	bool check_lower = opts.keys == 1 && opts.lower_bound > 0 && opts.cost > 0;
	long max_grants = 0;
	int max_key = 0;
	int keys_granted = 0;
	bool pass = error_count == 0;
	std::vector<std::string> reasons;

	for (int k = 0; k < opts.keys; k++) {
		long g = grants[static_cast<size_t>(k)];

		total_grants += g;
		keys_granted += g > 0;
		if (g > max_grants) {
			max_grants = g;
			max_key = k;
		}
	}
	if (static_cast<double>(max_grants) > bound) {
		/* the worst key is the one to report; any key over is a failure */
		pass = false;
		reasons.push_back("key " + key_names[static_cast<size_t>(max_key)] + " got " +
		                  std::to_string(max_grants) + " grants, above the admission bound");
	}
	if (check_lower && static_cast<double>(total_grants) < lower) {
		pass = false;
		/* The bound means something only under overload: with few denials, or
		 * fewer committed calls than half as many again as the bound, the load
		 * was the bottleneck, not the limiter: say so. */
		const double attempts = static_cast<double>(total_grants + denials);
		if (denials > 0 && attempts >= 1.5 * lower)
			reasons.push_back(
			    "only " + std::to_string(total_grants) + " grants and " + std::to_string(denials) +
			    " denials: below the lower bound, the limiter denied what it may grant");
		else
			reasons.push_back("only " + std::to_string(total_grants) + " grants and " +
			                  std::to_string(denials) +
			                  " denials: the load did not saturate the limit; "
			                  "lower --rate or --burst, add --clients, or pass --lower-bound 0");
	}

	printf("load: isolation=%s clients=%d keys=%d seconds=%.2f transactions=%ld rollbacks=%ld",
	       opts.isolation->option, opts.clients, opts.keys, elapsed, transactions, rollbacks);
	if (opts.keys == 1)
		printf(" grants=%ld bound=%.1f", total_grants, bound);
	else
		printf(" grants=%ld max_key_grants=%ld bound=%.1f keys_granted=%d", total_grants,
		       max_grants, bound, keys_granted);
	if (check_lower)
		printf(" lower=%.1f", lower);
	if (!opts.tolerate.empty())
		printf(" %s=%ld (%.1f%% of attempts)", opts.tolerate.c_str(), tolerated,
		       100.0 * static_cast<double>(tolerated) /
		           static_cast<double>(std::max(1L, transactions + tolerated)));
	printf(" errors=%ld %s\n", error_count, pass ? "PASS" : "FAIL");

	if (error_count > 0) {
		printf("load: errors by sqlstate:");
		for (const auto &e : errors)
			printf(" %s=%ld", e.first.c_str(), e.second);
		printf("; first: %s\n", first_error ? first_error->first_error.c_str() : "?");
	}
	for (const std::string &reason : reasons)
		printf("load: %s\n", reason.c_str());
	return pass ? kExitPass : kExitFail;
}
