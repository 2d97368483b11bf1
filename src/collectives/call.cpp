// Group::Call: deadline, tags, tracked operations and failure handling of one call.
#include "collectives/call.h"

#include <algorithm>
#include <type_traits>

#include <spdlog/spdlog.h>

namespace wcomm {

Group::Call::Call(Group& g, std::string w, const CallOptions& options, bool is_collective)
    : group(g), what(std::move(w)), collective(is_collective) {
  Seconds timeout = options.timeout.value_or(group.options_.timeout);
  if (!(timeout.count() > 0)) throw InvalidArgumentError(what + ": the timeout must be positive");
  timeout_ = timeout;
  deadline = deadline_after(timeout);  // (saturating: a timeout too long for the clock has no end)
  {
    std::lock_guard lock(group.fail_->mu);
    if (group.fail_->closed) throw ClosedError(what + ": the group is closed");
    if (group.fail_->error) {
      const CollectiveError& e = *group.fail_->error;
      // Another rank failed this very call before this rank got to it.
      if (collective && group.fail_->error_seq == group.seq_) throw e;
      throw CollectiveError(e.code(), e.rank(),
                            what + ": the group failed in an earlier call (create a new group): " + e.what());
    }
  }
  if (collective) {
    seq = group.seq_++;
    signature_ = Dict{{"wcomm_group", what + " #" + std::to_string(seq)}};
  }
}

Group::Call::~Call() {
  if (!collective) return;
  if (std::uncaught_exceptions() > uncaught_) settle();
  std::lock_guard lock(group.fail_->mu);
  group.fail_->cancel_ops.clear();
}

// A failed call's operations may still use the caller's tensors: a send being written reads
// them (tensors are sent from their own memory), and a recv_into whose frame is being read
// writes them (a frame claims its recv_into when it starts; a cancel no longer takes it
// back). So the call does not throw until every one has ended. By now they are cancelled and
// the other ranks told (fail() sends the aborts before it throws), so this is short: a queued
// send, or a recv nothing is being read into, ends at the cancel; a send being written ends
// its connection; a frame being read ends whole, or when its sender, told by the abort,
// cancels it (which ends the connection), or when the connection fails (a dead peer: after
// 3 heartbeat intervals). Past a bound (the call's timeout, within 1..10 s) the connections to
// the ranks whose operations are still going are ended here (Comm::drop_connections), which
// ends those operations at once; only then does the call throw (after at most 5 s more, with
// an error logged, should one still not have ended).
void Group::Call::settle() noexcept {
  for (auto& [rank, f] : sends_) f.cancel();  // again: an exception other than ours skipped fail()
  for (auto& [rank, f] : recvs_) f.cancel();
  const Seconds bound = std::clamp(timeout_, Seconds(1), Seconds(10));
  const Clock::time_point until = Clock::now() + std::chrono::duration_cast<Clock::duration>(bound);
  std::vector<int> going;  // ranks whose operations outlived the bound
  auto wait_until = [&](auto& operations) {
    for (auto& [rank, f] : operations)
      if (!f.ready() && !f.wait_for(std::max(Clock::duration::zero(), until - Clock::now()))) going.push_back(rank);
  };
  wait_until(sends_);
  wait_until(recvs_);
  if (going.empty()) return;
  std::sort(going.begin(), going.end());
  going.erase(std::unique(going.begin(), going.end()), going.end());
  for (int rank : going)
    group.comm_->drop_connections(*group.peers_[rank], what + " #" + std::to_string(seq) + " failed and rank " +
                                                           std::to_string(rank) + "'s transfer did not end within " +
                                                           std::to_string(static_cast<int>(bound.count())) + " s");
  // Each ends with its connection, at once. Still bounded: a Comm that fails to end one must
  // not hang the caller for ever; that is logged, since the tensor may still be in use.
  const Clock::time_point last = Clock::now() + std::chrono::seconds(5);
  std::size_t left = 0;
  auto wait_last = [&](auto& operations) {
    for (auto& [rank, f] : operations)
      if (!f.ready() && !f.wait_for(std::max(Clock::duration::zero(), last - Clock::now()))) ++left;
  };
  wait_last(sends_);
  wait_last(recvs_);
  if (left)
    spdlog::error("wcomm: {} #{} failed and {} of its sends / receives did not end even after their connections "
                  "were ended; their tensors may still be in use",
                  what, seq, left);
}

std::uint32_t Group::Call::tag(std::uint32_t step) const {
  if (!collective) return kP2PTagBase | step;
  return kCollectiveTagBase | ((seq % 2048u) << 16) | step;
}

std::optional<Seconds> Group::Call::remaining() const {
  if (deadline == Clock::time_point::max()) return std::nullopt;
  return std::max(Seconds(0.0), std::chrono::duration_cast<Seconds>(deadline - Clock::now()));
}

template <class T>
void Group::Call::track(Future<T>& f, int rank) {
  if (!collective) return;  // a send / recv by rank may run beside a collective: not its to cancel
  if constexpr (std::is_same_v<T, SendResult>) sends_.emplace_back(rank, f); else recvs_.emplace_back(rank, f);
  bool aborted;
  {
    std::lock_guard lock(group.fail_->mu);
    aborted = group.fail_->error.has_value();
    if (!aborted) group.fail_->cancel_ops.push_back([f]() mutable { f.cancel(); });
  }
  if (aborted) f.cancel();
}

Future<SendResult> Group::Call::send(int rank, const Tensor& tensor, std::uint32_t step) {
  return send_value(rank, Value(tensor), step);
}

Future<SendResult> Group::Call::send_value(int rank, Value value, std::uint32_t step) {
  auto f = group.comm_->send(std::move(value), *group.peers_[rank], collective ? signature_ : Value(),
                             {.tag = tag(step), .timeout = remaining()});
  track(f, rank);
  return f;
}

Future<Received> Group::Call::recv_into(int rank, const Tensor& into, std::uint32_t step) {
  auto f = group.comm_->recv_into(*group.peers_[rank], {into}, {.tag = tag(step), .timeout = remaining()});
  track(f, rank);
  return f;
}

Future<Received> Group::Call::recv(int rank, std::uint32_t step) {
  auto f = group.comm_->recv(*group.peers_[rank], {.tag = tag(step), .timeout = remaining()});
  track(f, rank);
  return f;
}

void Group::Call::wait(Future<SendResult>& f, int rank) {
  Result<SendResult>& r = f.wait();
  if (!r.ok()) fail_from(r.error(), rank, "sending to");
}

void Group::Call::wait(Future<Received>& f, int rank) {
  Result<Received>& r = f.wait();
  if (!r.ok()) fail_from(r.error(), rank, "receiving from");
  check_signature(r.value(), rank);
}

void Group::Call::wait_all(std::vector<Future<SendResult>>& fs, const std::vector<int>& ranks) {
  for (std::size_t i = 0; i < fs.size(); ++i) wait(fs[i], ranks[i]);
}

std::string Group::Call::signature_problem(const Received& got, int rank) const {
  if (!collective || got.piggypayload == signature_) return {};
  std::string theirs = "something else";
  if (const Dict* d = got.piggypayload.get_if<Dict>())
    if (const Value* v = d->find("wcomm_group"); v && v->is<std::string>()) theirs = v->as<std::string>();
  return "rank " + std::to_string(rank) + " called " + theirs + " where rank " + std::to_string(group.rank_) +
         " called " + what + " #" + std::to_string(seq) +
         ": every rank must make the same calls with the same sizes, dtypes, op and root";
}

void Group::Call::check_signature(const Received& got, int rank) {
  std::string problem = signature_problem(got, rank);
  if (!problem.empty()) fail(ErrorCode::kInvalidArgument, rank, problem);
}

void Group::Call::fail_from(const Error& error, int rank, const char* action) {
  {
    std::unique_lock lock(group.fail_->mu);
    // A lost connection may be the other rank's own abort: it cancelled its send to us midway
    // (which ends the connection) and is sending its reason on a new one. Give that reason a
    // moment to arrive, so every rank names the rank that failed first, not the messenger
    // (it may need a fresh connection: half a second was too short on two loaded cores).
    if (!group.fail_->error && (error.code == ErrorCode::kConnectionClosed || error.code == ErrorCode::kPeerRestarted)) {
      Seconds grace = std::min(Seconds(2), remaining().value_or(Seconds(2)));
      group.fail_->aborted.wait_for(lock, grace, [&] { return group.fail_->error.has_value(); });
    }
    if (group.fail_->error) throw *group.fail_->error;  // an abort from another rank came first
  }
  if (error.code == ErrorCode::kUnsupportedPayload)
    fail(ErrorCode::kInvalidArgument, rank,
         "rank " + std::to_string(rank) + " sent data whose size or dtype differs from rank " +
             std::to_string(group.rank_) + "'s " + what + " #" + std::to_string(seq) +
             ": every rank must pass the same sizes and dtypes (" + error.message + ")");
  std::string cause = error.code == ErrorCode::kOperationTimeout ? "timed out " : "failed ";
  fail(error.code, rank,
       "rank " + std::to_string(rank) + ": " + cause + std::string(action) + " it in " + what + " (rank " +
           std::to_string(group.rank_) + "): " + error.message);
}

void Group::Call::fail(ErrorCode code, int rank, const std::string& message) {
  if (!collective) throw CollectiveError(code, rank, message);
  std::vector<std::function<void()>> cancels;
  {
    std::lock_guard lock(group.fail_->mu);
    if (group.fail_->error) throw *group.fail_->error;
    group.fail_->error.emplace(code, rank, message);
    group.fail_->error_seq = seq;
    cancels.swap(group.fail_->cancel_ops);
  }
  for (auto& c : cancels) c();
  // Tell every other rank, so that none waits for its timeout. Best effort, but written
  // before this throws (up to a second): a caller that closes the group at once would
  // otherwise drop the queued aborts, and the others would name the messenger instead.
  Dict abort{{"rank", rank}, {"code", static_cast<int>(code)}, {"message", message}, {"seq", seq}};
  std::vector<Future<SendResult>> aborts;
  for (int k = 0; k < group.world_; ++k)
    if (k != group.rank_)
      aborts.push_back(group.comm_->send(abort, *group.peers_[k], {}, {.tag = kAbortTag, .timeout = Seconds(5)}));
  const auto written_by = Clock::now() + std::chrono::seconds(1);
  for (auto& f : aborts) (void)f.wait_for(std::max(Clock::duration::zero(), written_by - Clock::now()));
  throw CollectiveError(code, rank, message);
}

}  // namespace wcomm
